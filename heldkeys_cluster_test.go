package kms_test

import (
	"testing"

	"github.com/ringkms/kms"
)

// TestTransitCluster: a node whose cache still has a transit key as it
// was before another node rotated it opens the new version's
// ciphertexts, and encrypts with it when asked, at once: it reads the ring
// again rather than answer that the version is too new.
func TestTransitCluster(t *testing.T) {
	nodes := pgNodes(t, 2, kms.Options{MasterKey: kms.GenerateMasterKey()}, nil)
	root := bootstrapRoot(t, nodes[0])
	enc := func(n *kms.Service, v int) kms.HeldCiphertext {
		t.Helper()
		out, err := n.EncryptWithHeldKey(root, kms.HeldEncryptInput{Name: "shared", Create: true,
			Items: []kms.HeldPlaintext{{Plaintext: []byte("across nodes"), KeyVersion: v}}})
		if err != nil || out[0].Err != nil {
			t.Fatalf("EncryptTransit(version %d) = %+v, %v", v, out, err)
		}
		return out[0]
	}
	enc(nodes[0], 0)
	enc(nodes[1], 0) // node 1 caches the key at version 1
	if _, err := nodes[0].RotateHeldKey(root, "shared"); err != nil {
		t.Fatal(err)
	}
	v2 := enc(nodes[0], 0)
	if v2.KeyVersion != 2 {
		t.Fatalf("encrypt after rotation used version %d", v2.KeyVersion)
	}
	out, err := nodes[1].DecryptWithHeldKey(root, kms.HeldDecryptInput{Name: "shared", Items: []kms.HeldSealed{{KeyVersion: v2.KeyVersion, Ciphertext: v2.Ciphertext}}})
	if err != nil || out[0].Err != nil || string(out[0].Plaintext) != "across nodes" || out[0].KeyVersion != 2 {
		t.Fatalf("DecryptTransit of version 2 on the other node = %+v, %v", out, err)
	}
	if got := enc(nodes[1], 2); got.KeyVersion != 2 {
		t.Errorf("EncryptTransit(version 2) on the other node used version %d", got.KeyVersion)
	}
}

// TestStaleNodeNeverUsesDisabledHeldKey: a node whose cache has not yet
// seen another node disable a held key encrypts nothing with it: the
// encrypt's commit checks the key's state.
func TestStaleNodeNeverUsesDisabledHeldKey(t *testing.T) {
	nodes, roots := staleNodes(t)
	if _, err := nodes[0].CreateHeldKey(roots[0], kms.CreateHeldKeyInput{Name: "shared"}); err != nil {
		t.Fatal(err)
	}
	transitEncrypt(t, nodes[1], roots[1], "shared", "cached") // node 1 caches the key, enabled
	if _, err := nodes[0].DisableHeldKey(roots[0], "shared"); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		out, err := nodes[1].EncryptWithHeldKey(roots[1], kms.HeldEncryptInput{Name: "shared", Items: []kms.HeldPlaintext{{Plaintext: []byte("x")}}})
		if err == nil {
			err = out[0].Err
		}
		if kms.ErrorKind(err) != kms.KindDisabled {
			t.Fatalf("EncryptWithHeldKey on the other node = %v, want a Disabled error", err)
		}
	}
}
