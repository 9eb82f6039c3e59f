package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

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
	in, p, v, root := serve(t)
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
	p, root = in.serve(t, v)
	dec := must[*kms.DecryptResult](t, "Decrypt after the rekey")(root.Decrypt(bg, kms.DecryptInput{Hash: before.Hash, Header: before.Header}))
	if got, want := unwrap(t, ring.PrivateKey, dec.RingID, dec.Key), unwrap(t, ring.PrivateKey, before.RingID, before.Key); string(got) != string(want) {
		t.Fatal("Decrypt after the rekey gave another key")
	}
}

// TestHeadersVerifyAcrossSigningKeyRotation: headers issued by kmsd are
// verified offline by the client package with the keys that
// /ks/signing-keys publishes, before and after `kmsd rotate-signing-key`;
// the headers issued before the rotation still verify after it, and new
// ones name the new key.
func TestHeadersVerifyAcrossSigningKeyRotation(t *testing.T) {
	in, p, v, c := serve(t)
	bg := context.Background()
	must[*kms.CreateKeyRingResult](t, "CreateKeyRing")(c.CreateKeyRing(bg, kms.CreateKeyRingInput{Name: "signed"}))
	before := must[*kms.EncryptResult](t, "Encrypt")(c.Encrypt(bg, kms.EncryptInput{RingName: "signed", Asset: &kms.AssetInput{Data: map[string]any{"doc": 1}}}))
	oldKeys := must[*kms.SigningKeySet](t, "SigningKeys")(clientOf(p, t, v, "").SigningKeys(bg))
	first, err := oldKeys.VerifyHeader(before.Header, before.Asset)
	if err != nil || !first.Valid {
		t.Fatalf("VerifyHeader before the rotation = %+v, %v", first, err)
	}
	p.Stop(t)

	in.kmsdCmd(t, "rotate-signing-key", "-data", in.data)

	p, c = in.serve(t, v)
	after := must[*kms.EncryptResult](t, "Encrypt after the rotation")(c.Encrypt(bg, kms.EncryptInput{RingName: "signed"}))
	keys := must[*kms.SigningKeySet](t, "SigningKeys after the rotation")(clientOf(p, t, v, "").SigningKeys(bg))
	if len(keys.Keys) != len(oldKeys.Keys)+1 {
		t.Fatalf("published keys after the rotation: %d, want %d", len(keys.Keys), len(oldKeys.Keys)+1)
	}
	for _, h := range []struct {
		what   string
		header string
		asset  *kms.Asset
	}{{"header from before", before.Header, before.Asset}, {"header from after", after.Header, nil}} {
		got, err := keys.VerifyHeader(h.header, h.asset)
		if err != nil || !got.Valid {
			t.Fatalf("VerifyHeader(%s) with the published keys = %+v, %v", h.what, got, err)
		}
	}
	second, _ := keys.VerifyHeader(after.Header, nil)
	if second.KeyID == first.KeyID {
		t.Fatalf("the header after the rotation names the old key %s", first.KeyID)
	}
	// A verifier holding only the old keys fetches the new ones once.
	verifier := clientOf(p, t, v, "").NewVerifier(oldKeys)
	ctx, cancel := context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	if got, err := verifier.VerifyHeader(ctx, after.Header, nil); err != nil || !got.Valid {
		t.Fatalf("Verifier with the old keys, header of the new = %+v, %v", got, err)
	}
	p.Stop(t)
	in.verifyAudit(t)
}
