package kms_test

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/store/badgerstore"
)

func TestEncryptDecrypt(t *testing.T) {
	e := newEnv(t)
	ring := e.ring(t, "data")
	res := e.encrypt(t, "DATA")
	if res.RingID != ring.Ring.ID || res.Key.ID != ring.Key.ID || res.Key.KeyData == nil {
		t.Fatalf("Encrypt = %+v", res)
	}
	res2, _ := e.svc.Encrypt(e.root, kms.EncryptInput{RingName: "data"})
	if res2.Hash == res.Hash || res2.Header == res.Header {
		t.Fatal("two encrypt calls gave the same hash or header")
	}
	dec, err := e.svc.Decrypt(e.root, kms.DecryptInput{Hash: res.Hash, Header: res.Header})
	if err != nil {
		t.Fatalf("Decrypt = %v", err)
	}
	if !dec.Asset.Valid || dec.RingID != ring.Ring.ID || dec.RingName != "data" || dec.Key.ID != res.Key.ID ||
		dec.Key.KeyData.Encrypted.Key.Value != res.Key.KeyData.Encrypted.Key.Value {
		t.Fatalf("Decrypt = %+v", dec)
	}
	info, err := e.svc.LookupHash(e.root, res.Hash)
	if err != nil || info.RingID != ring.Ring.ID || info.KeyID != res.Key.ID {
		t.Fatalf("LookupHash = %+v, %v", info, err)
	}
	hi, err := e.svc.LookupHeader(e.root, res.Header)
	if err != nil || !hi.Valid || hi.Version != 1 || hi.HasSignedAsset || hi.Hash != res.Hash {
		t.Fatalf("LookupHeader = %+v, %v", hi, err)
	}
	// A header from another encrypt call does not belong to this hash.
	_, err = e.svc.Decrypt(e.root, kms.DecryptInput{Hash: res.Hash, Header: res2.Header})
	wantKind(t, "Decrypt(hash, other header)", err, kms.KindUnprocessable)
	_, err = e.svc.Decrypt(e.root, kms.DecryptInput{Hash: res.Hash})
	wantKind(t, "Decrypt(no header)", err, kms.KindInvalid)
	_, err = e.svc.Decrypt(e.root, kms.DecryptInput{Header: res.Header})
	wantKind(t, "Decrypt(no hash)", err, kms.KindInvalid)
	_, err = e.svc.Encrypt(e.root, kms.EncryptInput{})
	wantKind(t, "Encrypt(no ringname)", err, kms.KindInvalid)
	_, err = e.svc.Encrypt(e.root, kms.EncryptInput{RingName: "missing"})
	wantKind(t, "Encrypt(missing)", err, kms.KindNotFound)

	// After the ring is deleted, its hashes stop resolving.
	if _, err := e.svc.DeleteKeyRing(e.root, kms.RingRef{Name: "data"}); err != nil {
		t.Fatal(err)
	}
	_, err = e.svc.LookupHash(e.root, res.Hash)
	wantKind(t, "LookupHash(deleted ring)", err, kms.KindNotFound)
	_, err = e.svc.LookupHeader(e.root, res.Header)
	wantKind(t, "LookupHeader(deleted ring)", err, kms.KindNotFound)
	_, err = e.svc.Decrypt(e.root, kms.DecryptInput{Hash: res.Hash, Header: res.Header})
	wantKind(t, "Decrypt(deleted ring)", err, kms.KindNotFound)
}

// flip returns text with bit of the byte at i of its decoded form flipped.
func flip(text string, i, bit int) string {
	raw, _ := base64.RawURLEncoding.DecodeString(text)
	raw[i] ^= 1 << bit
	return base64.RawURLEncoding.EncodeToString(raw)
}

func TestDecryptDetectsEveryAlteration(t *testing.T) {
	e := newEnv(t)
	e.ring(t, "tamper")
	res := e.encrypt(t, "tamper")
	rawHash, _ := base64.RawURLEncoding.DecodeString(res.Hash)
	rawHeader, _ := base64.RawURLEncoding.DecodeString(res.Header)
	check := func(what string, in kms.DecryptInput) {
		t.Helper()
		dec, err := e.svc.Decrypt(e.root, in)
		wantKind(t, what, err, kms.KindUnprocessable)
		if dec == nil || dec.Asset.Valid || dec.Asset.Message == "" || dec.Key != nil {
			t.Fatalf("%s = %+v, want asset.valid false with a message and no key", what, dec)
		}
		if n := strings.Count(dec.Asset.Message, "failed verification"); n != 1 {
			t.Fatalf("%s: message %q says failed verification %d times, want once", what, dec.Asset.Message, n)
		}
	}
	for i := range rawHash {
		for bit := 0; bit < 8; bit += 3 {
			check("Decrypt(hash flipped)", kms.DecryptInput{Hash: flip(res.Hash, i, bit), Header: res.Header})
		}
	}
	for i := range rawHeader {
		for bit := 0; bit < 8; bit += 3 {
			check("Decrypt(header flipped)", kms.DecryptInput{Hash: res.Hash, Header: flip(res.Header, i, bit)})
		}
	}
	check("Decrypt(hash truncated)", kms.DecryptInput{Hash: res.Hash[:40], Header: res.Header})
	check("Decrypt(header truncated)", kms.DecryptInput{Hash: res.Hash, Header: res.Header[:100]})
	check("Decrypt(hash garbage)", kms.DecryptInput{Hash: "!!!", Header: res.Header})
	check("Decrypt(header garbage)", kms.DecryptInput{Hash: res.Hash, Header: "%%%"})

	dec, err := e.svc.Decrypt(e.root, kms.DecryptInput{Hash: res.Hash, Header: flip(res.Header, 5, 0)})
	if err == nil || !strings.Contains(dec.Asset.Message, "header") {
		t.Errorf("Decrypt(altered header) message = %q, want it to name the header", dec.Asset.Message)
	}
	dec, err = e.svc.Decrypt(e.root, kms.DecryptInput{Hash: flip(res.Hash, 40, 0), Header: res.Header})
	if err == nil || !strings.Contains(dec.Asset.Message, "hash") {
		t.Errorf("Decrypt(altered hash) message = %q, want it to name the hash", dec.Asset.Message)
	}

	// The look-ups reject alterations too.
	_, err = e.svc.LookupHash(e.root, flip(res.Hash, 20, 1))
	wantKind(t, "LookupHash(altered)", err, kms.KindInvalid)
	_, err = e.svc.LookupHash(e.root, "short")
	wantKind(t, "LookupHash(garbage)", err, kms.KindInvalid)
	if msg := kms.ErrorMessage(err); strings.Count(msg, "failed verification") != 1 {
		t.Errorf("LookupHash(garbage) message = %q, want failed verification once", msg)
	}
	hi, err := e.svc.LookupHeader(e.root, flip(res.Header, 30, 2))
	if err != nil || hi.Valid {
		t.Errorf("LookupHeader(altered) = %+v, %v; want valid false", hi, err)
	}
	_, err = e.svc.LookupHeader(e.root, "garbage")
	wantKind(t, "LookupHeader(garbage)", err, kms.KindInvalid)
}

func TestDecryptNeedsFlagOnTheHashRing(t *testing.T) {
	e := newEnv(t)
	e.ring(t, "a")
	e.ring(t, "b")
	res, _ := e.svc.Encrypt(e.root, kms.EncryptInput{RingName: "a"})
	onlyB := e.as(t, kms.Flags{"keyring.b.decrypt": true})
	_, err := e.svc.Decrypt(onlyB, kms.DecryptInput{Hash: res.Hash, Header: res.Header})
	wantKind(t, "Decrypt(ring a) with keyring.b.decrypt", err, kms.KindPermissionDenied)
	onlyA := e.as(t, kms.Flags{"keyring.a.decrypt": true})
	if _, err := e.svc.Decrypt(onlyA, kms.DecryptInput{Hash: res.Hash, Header: res.Header}); err != nil {
		t.Errorf("Decrypt with keyring.a.decrypt = %v", err)
	}
}

// TestHashesSurviveRestart checks that hashes and headers stay valid when
// the service restarts on the same store and master key, and fail under
// another master key.
func TestHashesSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	mk := kms.GenerateMasterKey()
	// start opens the store in dir and a Service on it under key.
	start := func(key kms.RootKey) (*badgerstore.Store, *kms.Service, error) {
		t.Helper()
		st, err := badgerstore.OpenDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		svc, err := kms.New(st, kms.Options{MasterKey: key})
		return st, svc, err
	}
	st, svc, err := start(mk)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := svc.Bootstrap(t.Context(), "")
	p, _ := svc.Authenticate(t.Context(), b.Secret)
	ctx := kms.WithPrincipal(t.Context(), p)
	if _, err := svc.CreateKeyRing(ctx, kms.CreateKeyRingInput{Name: "r", KEM: "x25519"}); err != nil {
		t.Fatal(err)
	}
	res, err := svc.Encrypt(ctx, kms.EncryptInput{RingName: "r"})
	if err != nil {
		t.Fatal(err)
	}
	svc.Close()
	st.Close()

	st, svc, err = start(mk)
	if err != nil {
		t.Fatal(err)
	}
	p, err = svc.Authenticate(t.Context(), b.Secret)
	if err != nil {
		t.Fatal(err)
	}
	ctx = kms.WithPrincipal(t.Context(), p)
	if _, err := svc.Decrypt(ctx, kms.DecryptInput{Hash: res.Hash, Header: res.Header}); err != nil {
		t.Fatalf("Decrypt after restart = %v", err)
	}
	if hi, err := svc.LookupHeader(ctx, res.Header); err != nil || !hi.Valid {
		t.Fatalf("LookupHeader after restart = %+v, %v", hi, err)
	}
	if _, err := svc.VerifyActivityChain(t.Context()); err != nil {
		t.Fatalf("VerifyActivityChain after restart = %v", err)
	}
	svc.Close()
	st.Close()

	st, _, err = start(kms.GenerateMasterKey())
	defer st.Close()
	if err == nil {
		t.Fatal("New with another master key succeeded; want the signing key to fail to open")
	}
}
