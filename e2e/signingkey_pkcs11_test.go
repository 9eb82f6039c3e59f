//go:build cgo

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/hsmtest/hsmkey"
)

// TestHeadersSignedInToken runs kmsd with its header signing key in a
// SoftHSM2 token (-signing-key-pkcs11): the headers it issues name the
// token's key and the client's Verifier checks them with the keys of GET
// /ks/signing-keys; after kmsd rotate-signing-key made the next key in
// the token and kmsd runs with it, the headers of both keys verify.
func TestHeadersSignedInToken(t *testing.T) {
	tok, uri := hsmkey.NewToken(t)
	in := newInstance(t)
	in.vars = append(in.vars, tok.Env)
	v := newValidator(t)
	bg := context.Background()

	p, c := in.serve(t, v, "-signing-key-pkcs11", uri)
	must[*kms.CreateKeyRingResult](t, "CreateKeyRing")(c.CreateKeyRing(bg, kms.CreateKeyRingInput{Name: "token-signed"}))
	first := must[*kms.EncryptResult](t, "Encrypt")(c.Encrypt(bg, kms.EncryptInput{RingName: "token-signed", Asset: &kms.AssetInput{Data: map[string]any{"doc": 1}}}))
	anon := clientOf(p, t, v, "")
	keys := must[*kms.SigningKeySet](t, "SigningKeys")(anon.SigningKeys(bg))
	tokenID := hsmkey.KeyID(t, uri)
	if len(keys.Keys) != 1 || keys.Keys[0].ID != tokenID || !keys.Keys[0].Active {
		t.Fatalf("GET /ks/signing-keys = %+v, want the token's key %s alone, active", keys.Keys, tokenID)
	}
	verifier := anon.NewVerifier(nil)
	ctx, cancel := context.WithTimeout(bg, 30*time.Second)
	defer cancel()
	got, err := verifier.VerifyHeader(ctx, first.Header, first.Asset)
	if err != nil || !got.Valid || got.KeyID != tokenID {
		t.Fatalf("Verifier.VerifyHeader(header of kmsd on the token) = %+v, %v; want valid, key %s", got, err, tokenID)
	}
	p.Stop(t)

	out := in.kmsdCmd(t, "rotate-signing-key", "-data", in.data, "-signing-key-pkcs11", uri)
	_, newURI, ok := strings.Cut(out, "new key URI: ")
	newURI, _, _ = strings.Cut(newURI, "\n")
	if !ok || !strings.Contains(newURI, "object=kms-signing-2") {
		t.Fatalf("kmsd rotate-signing-key printed:\n%s", out)
	}

	p, c = in.serve(t, v, "-signing-key-pkcs11", newURI)
	second := must[*kms.EncryptResult](t, "Encrypt after the rotation")(c.Encrypt(bg, kms.EncryptInput{RingName: "token-signed"}))
	newID := hsmkey.KeyID(t, newURI)
	// A verifier that holds the keys of before fetches the new one once.
	verifier = clientOf(p, t, v, "").NewVerifier(keys)
	for _, h := range []*kms.EncryptResult{first, second} {
		got, err := verifier.VerifyHeader(ctx, h.Header, h.Asset)
		if err != nil || !got.Valid {
			t.Fatalf("Verifier.VerifyHeader after the rotation = %+v, %v; want valid", got, err)
		}
	}
	if got, _ := verifier.VerifyHeader(ctx, second.Header, nil); got.KeyID != newID {
		t.Fatalf("the header after the rotation names key %s, want the new key %s", got.KeyID, newID)
	}
	p.Stop(t)
	in.verifyAudit(t)
}
