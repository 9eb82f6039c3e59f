package kms_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/kmstest"
)

// TestSigningKeyGiven runs Services given their signing key
// (Options.SigningKey), here an Ed25519 key of the test's own with a
// URI, which the store records as a key held outside it (the tests of
// client and cmd/kmsd give a key pair in a SoftHSM2 token): it signs,
// is published and active; the store holds its public key alone (a
// Service given no key has none to sign with); the master key check, a
// rekey and a rotation back to a key of the store's own work on it.
func TestSigningKeyGiven(t *testing.T) {
	ctx := context.Background()
	pub, priv, _ := ed25519.GenerateKey(nil)
	sum := sha256.Sum256(pub)
	id := hex.EncodeToString(sum[:8])
	const uri = "pkcs11:token=kms;object=kms-signing?module-path=/usr/lib/softhsm/libsofthsm2.so"
	mk := kms.GenerateMasterKey()
	st := kmstest.MemoryStore(t)
	given := kms.Options{MasterKey: mk, SigningKey: priv, SigningKeyURI: uri}

	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	_, err := kms.New(st, kms.Options{MasterKey: mk, SigningKey: ec})
	wantKind(t, "New(SigningKey: an ECDSA key)", err, kms.KindInvalid)

	e := newEnvOn(t, st, given)
	e.ring(t, "r")
	enc := e.encrypt(t, "r")
	if got := headerKeyID(t, enc.Header); got != id {
		t.Fatalf("header names key %s, want the given key %s", got, id)
	}
	k := activeKey(t, signingKeys(t, e.svc))
	if k.ID != id || k.PublicKey != base64.StdEncoding.EncodeToString(pub) {
		t.Fatalf("active signing key %+v, want the given one, %s", k, id)
	}
	_, err = e.svc.RotateSigningKey(e.root)
	wantKind(t, "RotateSigningKey on a Service given its key", err, kms.KindInvalid)
	e.svc.Close()

	// The store holds no private key of it: given none, a Service has
	// no key to sign with, and says where the active one is held.
	svc, err := kms.New(st, kms.Options{MasterKey: mk})
	if err != nil {
		t.Fatalf("New() without the key = %v", err)
	}
	err = svc.CheckSigner()
	wantKind(t, "CheckSigner() without the key", err, kms.KindUnavailable)
	if !strings.Contains(err.Error(), id) || !strings.Contains(err.Error(), uri) {
		t.Errorf("CheckSigner() = %v, want it to name key %s and %s", err, id, uri)
	}
	_, err = svc.Encrypt(e.root, kms.EncryptInput{RingName: "r"})
	wantKind(t, "Encrypt() without a signing key", err, kms.KindUnavailable)
	if info, err := svc.LookupHeader(e.root, enc.Header); err != nil || !info.Valid {
		t.Errorf("LookupHeader() without the key = %+v, %v; want valid", info, err)
	}
	svc.Close()

	// Its record is sealed: another master key does not open the store.
	_, err = kms.New(st, kms.Options{MasterKey: kms.GenerateMasterKey(), SigningKey: priv, SigningKeyURI: uri})
	wantKind(t, "New() with another master key", err, kms.KindUnauthenticated)
	mk2 := kms.GenerateMasterKey()
	if _, err := kms.Rekey(ctx, st, mk, mk2); err != nil {
		t.Fatalf("Rekey() = %v", err)
	}
	given.MasterKey = mk2
	svc, err = kms.New(st, given)
	if err != nil {
		t.Fatalf("New() after a rekey = %v", err)
	}
	if got := activeKey(t, signingKeys(t, svc)); got.ID != id {
		t.Errorf("after a rekey the active key is %s, want %s", got.ID, id)
	}
	svc.Close()

	// A rotation without the key goes back to a key of the store's own.
	own, err := kms.RotateStoreSigningKey(ctx, st, mk2)
	if err != nil {
		t.Fatalf("RotateStoreSigningKey() = %v", err)
	}
	svc, err = kms.New(st, kms.Options{MasterKey: mk2})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	after, err := svc.Encrypt(e.root, kms.EncryptInput{RingName: "r"})
	if err != nil || headerKeyID(t, after.Header) != own.ID {
		t.Fatalf("Encrypt() after rotating back = %v, want a header of the new key %s", err, own.ID)
	}
	set := signingKeys(t, svc)
	for _, h := range []string{enc.Header, after.Header} {
		if v, err := set.VerifyHeader(h, nil); err != nil || !v.Valid {
			t.Errorf("VerifyHeader() = %+v, %v; want valid", v, err)
		}
	}
}
