package kms_test

import (
	"bytes"
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"testing"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/kmstest"
)

// ringKeys is every way a ring's keys are wrapped, with the private key
// in each form its holder keeps it.
func ringKeys(t *testing.T) []struct {
	name    string
	in      kms.CreateKeyRingInput
	private []byte // nil: the one the service returns
} {
	t.Helper()
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	rsaPub, _ := x509.MarshalPKIXPublicKey(&rsaKey.PublicKey)
	rsaKey1, err := rsa.GenerateKey(rand.Reader, 2048) // another, for PKCS #1
	if err != nil {
		t.Fatal(err)
	}
	rsaPub1, _ := x509.MarshalPKIXPublicKey(&rsaKey1.PublicKey)
	rsaPKCS8, _ := x509.MarshalPKCS8PrivateKey(rsaKey)
	x, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	xPub, _ := x509.MarshalPKIXPublicKey(x.PublicKey())
	xPKCS8, _ := x509.MarshalPKCS8PrivateKey(x)
	pemOf := func(typ string, der []byte) string {
		return string(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}))
	}
	return []struct {
		name    string
		in      kms.CreateKeyRingInput
		private []byte
	}{
		{"hpke-xwing", kms.CreateKeyRingInput{}, nil},
		{"hpke-x25519", kms.CreateKeyRingInput{KEM: "x25519"}, nil},
		{"hpke-x25519 PEM", kms.CreateKeyRingInput{PublicKey: pemOf("PUBLIC KEY", xPub)}, []byte(pemOf("PRIVATE KEY", xPKCS8))},
		{"rsa-oaep-sha256 PKCS8", kms.CreateKeyRingInput{PublicKey: pemOf("PUBLIC KEY", rsaPub)}, []byte(pemOf("PRIVATE KEY", rsaPKCS8))},
		{"rsa-oaep-sha256 PKCS1", kms.CreateKeyRingInput{PublicKey: pemOf("PUBLIC KEY", rsaPub1)}, []byte(pemOf("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(rsaKey1)))},
	}
}

// TestUnwrapKey: UnwrapKey opens the keyData of encrypt and decrypt for
// every wrapping scheme and private key form, to the same 32 bytes, and
// refuses keyData moved to another ring or key, or a wrong private key.
func TestUnwrapKey(t *testing.T) {
	e := newEnv(t)
	var others [][]byte
	for i, tc := range ringKeys(t) {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			in.Name = "unwrap" + string(rune('a'+i))
			ring, err := e.svc.CreateKeyRing(e.root, in)
			if err != nil {
				t.Fatal(err)
			}
			priv := tc.private
			if priv == nil {
				priv = []byte(ring.PrivateKey)
			}
			enc, err := e.svc.Encrypt(e.root, kms.EncryptInput{RingName: in.Name})
			if err != nil {
				t.Fatal(err)
			}
			key, err := kms.UnwrapKey(priv, enc.RingID, enc.Key)
			if err != nil {
				t.Fatalf("UnwrapKey(encrypt) = %v", err)
			}
			if len(key) != 32 {
				t.Fatalf("UnwrapKey = %d bytes, want 32", len(key))
			}
			dec, err := e.svc.Decrypt(e.root, kms.DecryptInput{Hash: enc.Hash, Header: enc.Header})
			if err != nil {
				t.Fatal(err)
			}
			again, err := kms.UnwrapKey(priv, dec.RingID, dec.Key)
			if err != nil || !bytes.Equal(again, key) {
				t.Fatalf("UnwrapKey(decrypt) = %x, %v; want %x", again, err, key)
			}
			moved := *enc.Key
			moved.ID = ring.Ring.ID // any other key ID
			if _, err := kms.UnwrapKey(priv, enc.RingID, &moved); kms.ErrorKind(err) != kms.KindUnprocessable {
				t.Errorf("UnwrapKey(another key ID) = %v, want unprocessable", err)
			}
			if _, err := kms.UnwrapKey(priv, enc.Key.ID, enc.Key); kms.ErrorKind(err) != kms.KindUnprocessable {
				t.Errorf("UnwrapKey(another ring ID) = %v, want unprocessable", err)
			}
			for _, other := range others {
				if _, err := kms.UnwrapKey(other, enc.RingID, enc.Key); err == nil {
					t.Errorf("UnwrapKey(another ring's private key) succeeded")
				}
			}
			others = append(others, priv)
		})
	}
}

// TestParsePrivateKeyTakesTheAnswer: the PrivateKey string that
// CreateKeyRing answers parses as it is, as do the bytes of a file that
// holds it (with a newline), and each opens the key of an encrypt call.
func TestParsePrivateKeyTakesTheAnswer(t *testing.T) {
	e := newEnv(t)
	ring := e.ring(t, "answer")
	enc := e.encrypt(t, "answer")
	pk, err := kms.ParsePrivateKey(ring.PrivateKey)
	if err != nil {
		t.Fatalf("ParsePrivateKey(CreateKeyRing's PrivateKey) = %v", err)
	}
	want, err := pk.Unwrap(enc.RingID, enc.Key)
	if err != nil {
		t.Fatalf("Unwrap(encrypt) = %v", err)
	}
	file := []byte(ring.PrivateKey + "\n")
	fromFile, err := kms.UnwrapKey(file, enc.RingID, enc.Key)
	if err != nil || !bytes.Equal(fromFile, want) {
		t.Errorf("UnwrapKey(the key's file) = %x, %v; want %x", fromFile, err, want)
	}
	if string(file) != ring.PrivateKey+"\n" {
		t.Error("UnwrapKey changed the caller's bytes")
	}
	fromString, err := kms.UnwrapKey(ring.PrivateKey, enc.RingID, enc.Key)
	if err != nil || !bytes.Equal(fromString, want) {
		t.Errorf("UnwrapKey(CreateKeyRing's PrivateKey) = %x, %v; want %x", fromString, err, want)
	}
}

// TestParsePrivateKeyRefuses: bad private keys are Invalid errors that
// never quote the key.
func TestParsePrivateKeyRefuses(t *testing.T) {
	for _, text := range []string{"", "c2VjcmV0LXNlY3JldA==", "not base64 at all", "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n",
		"-----BEGIN PRIVATE KEY-----\nc2VjcmV0LXNlY3JldA==\n-----END PRIVATE KEY-----\n"} {
		_, err := kms.ParsePrivateKey([]byte(text))
		if kms.ErrorKind(err) != kms.KindInvalid {
			t.Errorf("ParsePrivateKey(%q) = %v, want invalid", text, err)
		}
		if err != nil && text != "" && bytes.Contains([]byte(err.Error()), []byte("c2VjcmV0")) {
			t.Errorf("ParsePrivateKey error quotes the key: %v", err)
		}
	}
	if _, err := kms.UnwrapKey([]byte(nil), "r", &kms.Key{}); err == nil {
		t.Error("UnwrapKey(no keyData) succeeded")
	}
}

// TestErrorKindNil: no error is of kind None, not Internal.
func TestErrorKindNil(t *testing.T) {
	if k := kms.ErrorKind(nil); k != kms.KindNone || k == kms.KindInternal {
		t.Errorf("ErrorKind(nil) = %v, want none", k)
	}
	if k := kms.ErrorKind(errors.New("x")); k != kms.KindInternal {
		t.Errorf("ErrorKind(plain error) = %v, want internal", k)
	}
}

// TestApplication: an embedding application acts as itself with no
// bootstrap secret: on an empty store it makes the root Account, its
// calls are recorded under its name, and a later Bootstrap puts the root
// API key in the same Account.
func TestApplication(t *testing.T) {
	ctx := context.Background()
	st := kmstest.MemoryStore(t)
	svc := serviceOn(t, st, kms.Options{MasterKey: kms.GenerateMasterKey()})
	if _, err := svc.Application(ctx, "Bad Name"); kms.ErrorKind(err) != kms.KindInvalid {
		t.Errorf("Application(bad name) = %v, want invalid", err)
	}
	p, err := svc.Application(ctx, "billing")
	if err != nil {
		t.Fatal(err)
	}
	if p.Kind != kms.PrincipalApplication || p.ID != "app:billing" || p.AccountID == "" {
		t.Fatalf("Application = %+v", p)
	}
	app := kms.WithPrincipal(ctx, p)
	if _, err := svc.CreateKeyRing(app, kms.CreateKeyRingInput{Name: "docs", KEM: "x25519"}); err != nil {
		t.Fatal(err)
	}
	again, err := svc.Application(ctx, "billing")
	if err != nil || again.AccountID != p.AccountID {
		t.Fatalf("Application again = %+v, %v; want Account %s", again, err, p.AccountID)
	}
	boot, err := svc.Bootstrap(ctx, "")
	if err != nil || !boot.Created || boot.AccountID != p.AccountID {
		t.Fatalf("Bootstrap after Application = %+v, %v; want the key in Account %s", boot, err, p.AccountID)
	}
	l, err := svc.SearchActivity(app, kms.ActivityFilter{Action: "keyring.create"}, kms.PageRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Data) != 1 || l.Data[0].KeyID != "app:billing" {
		t.Fatalf("keyring.create records = %+v, want one by app:billing", l.Data)
	}
	accts, err := svc.ListAccounts(app, kms.PageRequest{})
	if err != nil || len(accts.Data) != 1 {
		t.Fatalf("ListAccounts = %v, %v; want the one root Account", accts, err)
	}
}
