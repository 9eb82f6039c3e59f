package kms_test

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"strings"
	"testing"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/kmstest"
)

// testRootKey is a RootKey that is no MasterKey, as an embedding
// application's own would be (a cloud KMS's, a token's): AES-256-GCM
// under a key the Service never sees.
type testRootKey struct{ aead cipher.AEAD }

func newTestRootKey(t testing.TB) *testRootKey {
	k := make([]byte, 32)
	rand.Read(k)
	b, err := aes.NewCipher(k)
	if err != nil {
		t.Fatal(err)
	}
	aead, err := cipher.NewGCM(b)
	if err != nil {
		t.Fatal(err)
	}
	return &testRootKey{aead}
}

func (k *testRootKey) Seal(plaintext, aad []byte) ([]byte, error) {
	nonce := make([]byte, k.aead.NonceSize())
	rand.Read(nonce)
	return k.aead.Seal(nonce, nonce, plaintext, aad), nil
}

func (k *testRootKey) Open(sealed, aad []byte) ([]byte, error) {
	n := k.aead.NonceSize()
	if len(sealed) < n {
		return nil, errors.New("too short")
	}
	return k.aead.Open(nil, sealed[:n], sealed[n:], aad)
}

// TestRootKeyOfItsOwn: a store started under a root key that is no
// MasterKey keeps its root secret sealed under it: the Service starts
// again under that key, no master key opens it, and a backup restores
// under that key alone. A store of a master key, never rekeyed, is not
// opened by such a key, with a message that says to rekey it.
func TestRootKeyOfItsOwn(t *testing.T) {
	ctx := context.Background()
	rk := newTestRootKey(t)
	st := kmstest.MemoryStore(t)
	first, app := startApplication(t, st, rk, "rootkey-test")
	ring, err := first.CreateKeyRing(app, kms.CreateKeyRingInput{Name: "docs", KEM: "x25519"})
	if err != nil {
		t.Fatal(err)
	}
	enc, err := first.Encrypt(app, kms.EncryptInput{RingName: "docs"})
	if err != nil {
		t.Fatal(err)
	}
	var backup bytes.Buffer
	if _, err := first.Backup(ctx, &backup); err != nil {
		t.Fatalf("Backup = %v", err)
	}
	first.Close()

	if _, err := kms.New(st, kms.Options{MasterKey: kms.GenerateMasterKey()}); kms.ErrorKind(err) != kms.KindUnauthenticated {
		t.Fatalf("New(a master key) on a store of another root key = %v, want unauthenticated", err)
	}
	if _, err := kms.New(st, kms.Options{MasterKey: newTestRootKey(t)}); kms.ErrorKind(err) != kms.KindUnauthenticated {
		t.Fatalf("New(another root key) = %v, want unauthenticated", err)
	}
	svc, err := kms.New(st, kms.Options{MasterKey: rk})
	if err != nil {
		t.Fatalf("New(its root key) again = %v", err)
	}
	dec, err := svc.Decrypt(app, kms.DecryptInput{Hash: enc.Hash, Header: enc.Header})
	svc.Close()
	if err != nil || dec.Key.ID != ring.Key.ID {
		t.Fatalf("Decrypt after a restart = %v", err)
	}
	if _, err := kms.VerifyAudit(ctx, st, rk); err != nil {
		t.Fatalf("VerifyAudit(its root key) = %v", err)
	}

	for _, wrong := range []kms.RootKey{kms.GenerateMasterKey(), newTestRootKey(t)} {
		if _, err := kms.Restore(ctx, kmstest.MemoryStore(t), bytes.NewReader(backup.Bytes()), wrong); kms.ErrorKind(err) != kms.KindUnprocessable {
			t.Errorf("Restore under another key = %v, want unprocessable", err)
		}
	}
	restored := kmstest.MemoryStore(t)
	if _, err := kms.Restore(ctx, restored, bytes.NewReader(backup.Bytes()), rk); err != nil {
		t.Fatalf("Restore under its root key = %v", err)
	}
	svc, err = kms.New(restored, kms.Options{MasterKey: rk})
	if err != nil {
		t.Fatalf("New on the restored store = %v", err)
	}
	defer svc.Close()
	if _, err := svc.Decrypt(app, kms.DecryptInput{Hash: enc.Hash, Header: enc.Header}); err != nil {
		t.Fatalf("Decrypt on the restored store = %v", err)
	}

	legacy := kmstest.MemoryStore(t)
	if s, err := kms.New(legacy, kms.Options{MasterKey: kms.GenerateMasterKey()}); err != nil {
		t.Fatal(err)
	} else {
		s.Close()
	}
	_, err = kms.New(legacy, kms.Options{MasterKey: rk})
	if kms.ErrorKind(err) != kms.KindUnauthenticated || !strings.Contains(kms.ErrorMessage(err), "rekey") {
		t.Fatalf("New(a root key) on a store of a master key = %v, want unauthenticated, saying to rekey", err)
	}
}
