//go:build cgo

package client_test

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/client"
	"github.com/ringkms/kms/httpapi"
	"github.com/ringkms/kms/internal/headersign"
	"github.com/ringkms/kms/internal/hsm"
	"github.com/ringkms/kms/internal/hsmtest"
	"github.com/ringkms/kms/internal/hsmtest/hsmkey"
	"github.com/ringkms/kms/kmstest"
)

// tokenService is a Service started on st with opts and served over
// loopback HTTP, with a client of it holding the root API key.
type tokenService struct {
	svc *kms.Service
	c   *client.Client
}

// startTokenService starts a Service on st with opts and serves it; it
// is closed (before the store) by stop or at the end of the test.
func startTokenService(t *testing.T, st kms.Store, opts kms.Options, rootKey string) *tokenService {
	t.Helper()
	svc, err := kms.New(st, opts)
	if err != nil {
		t.Fatalf("kms.New() = %v", err)
	}
	t.Cleanup(func() { svc.Close() })
	srv, base := kmstest.Serve(t, httpapi.New(svc, httpapi.Options{}), "")
	t.Cleanup(srv.Close)
	c, err := client.New(base, client.WithAPIKey(rootKey))
	if err != nil {
		t.Fatal(err)
	}
	return &tokenService{svc: svc, c: c}
}

// headerKeyID is the signing key ID a header names (bytes 2..9), in hex.
func headerKeyID(t *testing.T, header string) string {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(header)
	if err != nil || len(raw) < 10 {
		t.Fatalf("header %q: %v", header, err)
	}
	return kmsKeyID(raw[2:10])
}

func kmsKeyID(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&15])
	}
	return string(out)
}

// idOf is the signing key ID of an Ed25519 key.
func idOf(k *hsm.Ed25519Key) string {
	id := headersign.KeyID(k.Public().(ed25519.PublicKey))
	return kmsKeyID(id[:])
}

// TestTokenSignedHeaders: a Service given a key pair in a SoftHSM2 token
// (kms.Options.SigningKey, as kmsd -signing-key-pkcs11 gives it) signs
// live headers that the client's Verifier checks against the keys of GET
// /ks/signing-keys; after a rotation to a new key pair in the token
// (kms.RotateStoreSigningKeyTo) the headers of both keys verify, and a
// Service started again with the old key signs with it, still published.
// A Service given no key on that store has none to sign with, and a
// token that fails makes encrypt answer Unavailable.
func TestTokenSignedHeaders(t *testing.T) {
	tok := hsmtest.New(t, "kms")
	tok.GenerateEd25519(t, "kms-signing", nil)
	tk, keyA, u := hsmkey.Open(t, tok.URI("kms-signing"))
	ctx := context.Background()
	st := kmstest.MemoryStore(t)
	mk := kms.GenerateMasterKey()
	u.PINFile = ""
	uriA := u.String()

	// A Service on a new store with the token's key: the key is recorded,
	// active, and signs.
	svc, err := kms.New(st, kms.Options{MasterKey: mk, SigningKey: keyA, SigningKeyURI: uriA})
	if err != nil {
		t.Fatalf("kms.New(SigningKey) = %v", err)
	}
	boot, err := svc.Bootstrap(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	svc.Close()
	a := startTokenService(t, st, kms.Options{MasterKey: mk, SigningKey: keyA, SigningKeyURI: uriA}, boot.Secret)
	check(a.c.CreateKeyRing(ctx, kms.CreateKeyRingInput{Name: "r"}))(t, "CreateKeyRing")
	h1 := check(a.c.Encrypt(ctx, kms.EncryptInput{RingName: "r", Asset: &kms.AssetInput{Data: map[string]any{"doc": 1}}}))(t, "Encrypt")
	if got := headerKeyID(t, h1.Header); got != idOf(keyA) {
		t.Fatalf("header names key %s, want the token's %s", got, idOf(keyA))
	}
	keys := check(a.c.SigningKeys(ctx))(t, "SigningKeys")
	if len(keys.Keys) != 1 || keys.Keys[0].ID != idOf(keyA) || !keys.Keys[0].Active ||
		keys.Keys[0].PublicKey != base64.StdEncoding.EncodeToString(keyA.Public().(ed25519.PublicKey)) {
		t.Fatalf("SigningKeys() = %+v, want the token's key alone, active", keys.Keys)
	}
	verifier := a.c.NewVerifier(nil)
	if v, err := verifier.VerifyHeader(ctx, h1.Header, h1.Asset); err != nil || !v.Valid {
		t.Fatalf("Verifier.VerifyHeader(header of the token's key) = %+v, %v; want valid", v, err)
	}
	_, err = a.svc.RotateSigningKey(kms.WithPrincipal(ctx, check(a.svc.Authenticate(ctx, boot.Secret))(t, "Authenticate")))
	if kms.ErrorKind(err) != kms.KindInvalid {
		t.Errorf("RotateSigningKey on a Service given its key = %v, want Invalid", err)
	}
	a.svc.Close()

	// The next key in the token, recorded by the holder of the master key.
	var keyB *hsm.Ed25519Key
	rotated, err := kms.RotateStoreSigningKeyTo(ctx, st, mk, func() (crypto.Signer, string, error) {
		k, err := tk.GenerateEd25519("kms-signing-2", nil)
		keyB = k
		return k, strings.Replace(uriA, "object=kms-signing", "object=kms-signing-2", 1), err
	})
	if err != nil {
		t.Fatalf("RotateStoreSigningKeyTo() = %v", err)
	}
	if rotated.ID != idOf(keyB) || !rotated.Active {
		t.Fatalf("RotateStoreSigningKeyTo() = %+v, want the new key %s, active", rotated, idOf(keyB))
	}

	b := startTokenService(t, st, kms.Options{MasterKey: mk, SigningKey: keyB, SigningKeyURI: "elsewhere"}, boot.Secret)
	h2 := check(b.c.Encrypt(ctx, kms.EncryptInput{RingName: "r"}))(t, "Encrypt after the rotation")
	if got := headerKeyID(t, h2.Header); got != idOf(keyB) {
		t.Fatalf("header after the rotation names key %s, want %s", got, idOf(keyB))
	}
	b.svc.Close()

	// Started again with the key before the rotation, a Service signs
	// with it: it stays published, the store's active key stays the new.
	old := startTokenService(t, st, kms.Options{MasterKey: mk, SigningKey: keyA, SigningKeyURI: uriA}, boot.Secret)
	h3 := check(old.c.Encrypt(ctx, kms.EncryptInput{RingName: "r"}))(t, "Encrypt with the old key")
	if got := headerKeyID(t, h3.Header); got != idOf(keyA) {
		t.Fatalf("header of a Service given the old key names key %s, want %s", got, idOf(keyA))
	}
	keys = check(old.c.SigningKeys(ctx))(t, "SigningKeys")
	if len(keys.Keys) != 2 || keys.Keys[0].ID != idOf(keyA) || keys.Keys[1].ID != idOf(keyB) || keys.Keys[0].Active || !keys.Keys[1].Active {
		t.Fatalf("SigningKeys() = %+v, want the old key, then the new one active", keys.Keys)
	}
	// The Verifier holds the keys of its first fetch (key A alone): a
	// header of key B costs it one more.
	for _, h := range []*kms.EncryptResult{h1, h2, h3} {
		if v, err := verifier.VerifyHeader(ctx, h.Header, h.Asset); err != nil || !v.Valid {
			t.Errorf("Verifier.VerifyHeader(header of key %s) = %+v, %v; want valid", headerKeyID(t, h.Header), v, err)
		}
		if v, err := keys.VerifyHeader(h.Header, h.Asset); err != nil || !v.Valid {
			t.Errorf("VerifyHeader(header of key %s) offline = %+v, %v; want valid", headerKeyID(t, h.Header), v, err)
		}
	}
	old.svc.Close()

	// Given no key, a Service on this store has none to sign with.
	none := startTokenService(t, st, kms.Options{MasterKey: mk}, boot.Secret)
	if err := none.svc.CheckSigner(); kms.ErrorKind(err) != kms.KindUnavailable || !strings.Contains(err.Error(), idOf(keyB)) || !strings.Contains(err.Error(), "object=kms-signing-2") {
		t.Errorf("CheckSigner() without the token's key = %v; want Unavailable naming key %s and its URI", err, idOf(keyB))
	}
	if _, err := none.c.Encrypt(ctx, kms.EncryptInput{RingName: "r"}); kms.ErrorKind(err) != kms.KindUnavailable || strings.Contains(err.Error(), "pkcs11:") {
		t.Errorf("Encrypt() without a signing key = %v; want Unavailable, naming no URI to the caller", err)
	}
	if v, err := none.c.LookupHeader(ctx, h2.Header); err != nil || !v.Valid {
		t.Errorf("LookupHeader(header of the token's key) without the key = %+v, %v; want valid", v, err)
	}
	none.svc.Close()

	// A token that stops signing: encrypt answers Unavailable.
	failing := startTokenService(t, st, kms.Options{MasterKey: mk, SigningKey: keyB}, boot.Secret)
	if err := tk.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = failing.c.Encrypt(ctx, kms.EncryptInput{RingName: "r"})
	if kms.ErrorKind(err) != kms.KindUnavailable || !strings.Contains(err.Error(), "failed to sign") {
		t.Errorf("Encrypt() with a closed token = %v; want Unavailable: the key failed to sign", err)
	}
}
