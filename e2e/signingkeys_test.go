package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/ringkms/kms"
)

// TestHeadersVerifyAcrossSigningKeyRotation: headers issued by kmsd are
// verified offline by the client package with the keys that
// /ks/signing-keys publishes, before and after `kmsd rotate-signing-key`;
// the headers issued before the rotation still verify after it, and new
// ones name the new key.
func TestHeadersVerifyAcrossSigningKeyRotation(t *testing.T) {
	in := newInstance(t)
	v := newValidator(t)
	bg := context.Background()
	p := in.start(t)
	c := clientOf(p, t, v, in.bootstrap)
	must[*kms.CreateKeyRingResult](t, "CreateKeyRing")(c.CreateKeyRing(bg, kms.CreateKeyRingInput{Name: "signed"}))
	before := must[*kms.EncryptResult](t, "Encrypt")(c.Encrypt(bg, kms.EncryptInput{RingName: "signed", Asset: &kms.AssetInput{Data: map[string]any{"doc": 1}}}))
	oldKeys := must[*kms.SigningKeySet](t, "SigningKeys")(clientOf(p, t, v, "").SigningKeys(bg))
	first, err := oldKeys.VerifyHeader(before.Header, before.Asset)
	if err != nil || !first.Valid {
		t.Fatalf("VerifyHeader before the rotation = %+v, %v", first, err)
	}
	p.Stop(t)

	in.kmsdCmd(t, "rotate-signing-key", "-data", in.data)

	p = in.start(t)
	c = clientOf(p, t, v, in.bootstrap)
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
