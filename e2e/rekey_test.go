package e2e

import (
	"strings"
	"testing"

	"github.com/ringkms/kms"
)

// rekey runs kmsd rekey on the instance's store (kmsd stopped, beside
// PostgreSQL nodes, or through the admin socket of the kmsd running on the
// data directory) with vars, the new master key when given here, and
// returns its summary; kmsd printing either key fails the test.
func (in *instance) rekey(t *testing.T, vars ...string) string {
	t.Helper()
	out := in.with(vars...).kmsdCmd(t, append([]string{"rekey"}, in.storeArgs()...)...)
	for _, kv := range append([]string{"KMS_MASTER_KEY=" + in.masterKey}, vars...) {
		if k, v, _ := strings.Cut(kv, "="); (k == "KMS_MASTER_KEY" || k == "KMS_NEW_MASTER_KEY") && v != "" && strings.Contains(out, v) {
			t.Fatalf("kmsd rekey printed %s", k)
		}
	}
	for line := range strings.Lines(out) {
		if strings.HasPrefix(line, "master key rotated") {
			return strings.TrimSpace(line)
		}
	}
	t.Fatalf("kmsd rekey printed:\n%s", out)
	return ""
}

// auditRefused requires kmsd verify-audit with the instance's keys to fail.
func (in *instance) auditRefused(t *testing.T) {
	t.Helper()
	if out, err := in.kmsdRun(append([]string{"verify-audit"}, in.storeArgs()...)...); err == nil || !strings.Contains(out, notThisStore) {
		t.Fatalf("kmsd verify-audit with a master key that is not the store's = %v, want an error saying so:\n%s", err, out)
	}
}

// notThisStore is what kmsd says of a master key its store's root secret
// does not open under.
const notThisStore = "the master key is not this store's"

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

	newKey := newMasterKey()
	in.rekey(t, "KMS_NEW_MASTER_KEY="+newKey)

	// The old key: kmsd does not start, nor verify-audit.
	in.refuses(t, notThisStore)
	in.auditRefused(t)
	in.masterKey = newKey
	in.verifyAudit(t)
	p = in.start(t)
	root = clientOf(p, t, v, in.bootstrap)
	dec := must[*kms.DecryptResult](t, "Decrypt after the rekey")(root.Decrypt(bg, kms.DecryptInput{Hash: before.Hash, Header: before.Header}))
	if got, want := unwrap(t, ring.PrivateKey, dec.RingID, dec.Key), unwrap(t, ring.PrivateKey, before.RingID, before.Key); string(got) != string(want) {
		t.Fatal("Decrypt after the rekey gave another key")
	}
}
