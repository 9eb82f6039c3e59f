package kms_test

import (
	"testing"

	"github.com/ringkms/kms"
)

// TestHeldKeyUses: signatures and HMACs count as encrypt calls of the
// version that made them, verifications as decrypt calls of the version
// that checks them, in the version's usage and in the key's Uses; a
// refused or failed call counts for nothing; a verification of a
// version below the key's minimum decryption version fails.
func TestHeldKeyUses(t *testing.T) {
	e := newEnv(t)
	if _, err := e.svc.CreateHeldKey(e.root, kms.CreateHeldKeyInput{Name: "sig", Type: "ed25519"}); err != nil {
		t.Fatal(err)
	}
	signed, err := e.svc.SignWithHeldKey(e.root, kms.HeldSignInput{Name: "sig", Inputs: [][]byte{[]byte("a"), []byte("b")}})
	if err != nil || signed[0].Err != nil || signed[1].Err != nil || signed[0].KeyVersion != 1 {
		t.Fatalf("SignWithHeldKey = %+v, %v", signed, err)
	}
	macs, err := e.svc.HMACWithHeldKey(e.root, kms.HeldSignInput{Name: "sig", Inputs: [][]byte{[]byte("a")}, Options: kms.HeldSignOptions{Hash: "sha2-512"}})
	if err != nil || macs[0].Err != nil || len(macs[0].Signature) != 64 {
		t.Fatalf("HMACWithHeldKey = %+v, %v", macs, err)
	}
	checks := []kms.HeldCheck{
		{KeyVersion: 1, Input: []byte("a"), Signature: signed[0].Signature},
		{KeyVersion: 1, Input: []byte("a"), Signature: signed[1].Signature}, // b's signature
		{KeyVersion: 2, Input: []byte("a"), Signature: signed[0].Signature}, // no such version: fails
	}
	got, err := e.svc.VerifyWithHeldKey(e.root, kms.HeldVerifyInput{Name: "sig", Items: checks})
	if err != nil || !got[0].Valid || got[1].Valid || got[1].Err != nil || got[2].Err == nil {
		t.Fatalf("VerifyWithHeldKey = %+v, %v", got, err)
	}
	_, err = e.svc.SignWithHeldKey(e.as(t, kms.Flags{"keyring.sig.verify": true}), kms.HeldSignInput{Name: "sig", Inputs: [][]byte{[]byte("x")}})
	wantKind(t, "SignWithHeldKey with keyring.sig.verify only", err, kms.KindPermissionDenied)

	key, err := e.svc.GetHeldKey(e.root, "sig")
	if err != nil || key.Uses != (kms.KeyUsageCounts{Encrypts: 3, Decrypts: 2}) {
		t.Fatalf("GetHeldKey = %+v, %v; want 3 uses that made and 2 that checked", key, err)
	}
	u, err := e.svc.AsymKeyUsage(e.root, kms.RingRef{Name: "sig"}, key.KeyIDs[1])
	if err != nil || u.EncryptCount != 3 || u.DecryptCount != 2 {
		t.Fatalf("AsymKeyUsage = %+v, %v", u, err)
	}

	if _, err := e.svc.RotateHeldKey(e.root, "sig"); err != nil {
		t.Fatal(err)
	}
	min := 2
	if _, err := e.svc.ConfigureHeldKey(e.root, "sig", kms.HeldKeyConfig{MinDecryptionVersion: &min}); err != nil {
		t.Fatal(err)
	}
	got, err = e.svc.VerifyWithHeldKey(e.root, kms.HeldVerifyInput{Name: "sig", Items: checks[:1]})
	if err != nil || got[0].Err == nil || got[0].Valid {
		t.Fatalf("VerifyWithHeldKey below the minimum decryption version = %+v, %v", got, err)
	}
	wantKind(t, "verify below the minimum", got[0].Err, kms.KindInvalid)
}
