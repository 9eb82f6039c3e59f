package e2e

import (
	"crypto/rand"
	"encoding/base64"
	"os/exec"
	"strings"
	"testing"

	"github.com/ringkms/kms"
)

// TestRekey: kmsd rekey moves the store to a new master key: kmsd then
// starts only with the new one, decrypts what was encrypted before, and
// verify-audit passes with it.
func TestRekey(t *testing.T) {
	in := newInstance(t)
	p := in.start(t)
	v := newValidator(t)
	root := clientOf(p, t, v, in.bootstrap)
	ring := must[*kms.CreateKeyRingResult](t, "CreateKeyRing")(root.CreateKeyRing(bg, kms.CreateKeyRingInput{Name: "docs"}))
	before := must[*kms.EncryptResult](t, "Encrypt")(root.Encrypt(bg, kms.EncryptInput{RingName: "docs"}))
	p.Stop(t)

	b := make([]byte, 32)
	rand.Read(b)
	newKey := base64.StdEncoding.EncodeToString(b)
	cmd := exec.Command(kmsdPath, "rekey", "-data", in.data)
	cmd.Env = append(in.env(), "KMS_NEW_MASTER_KEY="+newKey)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "master key rotated") {
		t.Fatalf("kmsd rekey: %v\n%s", err, out)
	}
	if strings.Contains(string(out), newKey) || strings.Contains(string(out), in.masterKey) {
		t.Fatal("kmsd rekey printed a master key")
	}

	// The old key: kmsd does not start.
	old := exec.Command(kmsdPath, "verify-audit", "-data", in.data)
	old.Env = in.env()
	if out, err := old.CombinedOutput(); err == nil {
		t.Fatalf("verify-audit with the old master key passed:\n%s", out)
	}
	in.masterKey = newKey
	in.verifyAudit(t)
	p = in.start(t)
	root = clientOf(p, t, v, in.bootstrap)
	dec := must[*kms.DecryptResult](t, "Decrypt after the rekey")(root.Decrypt(bg, kms.DecryptInput{Hash: before.Hash, Header: before.Header}))
	if got, want := unwrap(t, ring.PrivateKey, dec.RingID, dec.Key), unwrap(t, ring.PrivateKey, before.RingID, before.Key); string(got) != string(want) {
		t.Fatal("Decrypt after the rekey gave another key")
	}
}
