package kms_test

import (
	"context"
	"testing"

	"github.com/ringkms/kms"
)

// The fuzz targets feed outside input to every parser of the library:
// hashes, headers, cursors, limits, master keys. None may panic, and none
// may answer an internal error.

func noInternal(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil && kms.ErrorKind(err) == kms.KindInternal {
		t.Fatalf("%s = internal error %v", what, err)
	}
}

// fuzzEnv is shared by the iterations of a fuzz target: a ring, and one
// genuine hash and header to mutate.
func fuzzEnv(f *testing.F) (*env, *kms.EncryptResult, string) {
	e := newEnv(f)
	e.ring(f, "fuzz")
	res, err := e.svc.Encrypt(e.root, kms.EncryptInput{RingName: "fuzz", Asset: &kms.AssetInput{Data: map[string]any{"a": 1}}})
	if err != nil {
		f.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		e.ring(f, "fuzz"+string(rune('a'+i)))
	}
	page, err := e.svc.ListKeyRings(e.root, kms.PageRequest{Limit: 1})
	if err != nil {
		f.Fatal(err)
	}
	return e, res, page.Pagination.NextCursor
}

func FuzzDecrypt(f *testing.F) {
	e, res, _ := fuzzEnv(f)
	f.Add(res.Hash, res.Header)
	f.Add(res.Hash, "")
	f.Add("", res.Header)
	f.Add("AQ", "AQ")
	f.Add(res.Hash[:40], res.Header+"A")
	f.Fuzz(func(t *testing.T, hash, header string) {
		dec, err := e.svc.Decrypt(e.root, kms.DecryptInput{Hash: hash, Header: header})
		noInternal(t, "Decrypt", err)
		if err == nil && (hash != res.Hash || header != res.Header) {
			t.Fatalf("Decrypt accepted an altered pair (%q, %q)", hash, header)
		}
		if err != nil && dec != nil && dec.Key != nil {
			t.Fatal("a failed Decrypt answered a key")
		}
		_, err = e.svc.LookupHash(e.root, hash)
		noInternal(t, "LookupHash", err)
		info, err := e.svc.LookupHeader(e.root, header)
		noInternal(t, "LookupHeader", err)
		if err == nil && info.Valid && header != res.Header {
			t.Fatalf("LookupHeader(%q) is valid", header)
		}
	})
}

func FuzzCursor(f *testing.F) {
	e, _, cursor := fuzzEnv(f)
	f.Add(cursor, 1)
	f.Add("", 0)
	f.Add("AAAA", 5)
	f.Add(cursor+"A", 20000)
	f.Fuzz(func(t *testing.T, cursor string, limit int) {
		_, err := e.svc.ListKeyRings(e.root, kms.PageRequest{Cursor: cursor, Limit: limit})
		noInternal(t, "ListKeyRings", err)
		_, err = e.svc.SearchAssets(e.root, kms.AssetFilter{}, kms.PageRequest{Cursor: cursor, Limit: limit})
		noInternal(t, "SearchAssets", err)
	})
}

func FuzzParseLimit(f *testing.F) {
	for _, s := range []string{"", "1", "100", "10000", "10001", "0", "-1", "abc", "1e3", " 7 ", "99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := kms.ParseLimit(s)
		if err == nil && (n < 0 || n > kms.MaxPageLimit) {
			t.Fatalf("ParseLimit(%q) = %d", s, n)
		}
	})
}

func FuzzParseMasterKey(f *testing.F) {
	f.Add(kms.GenerateMasterKey().Base64())
	f.Add("")
	f.Add("AAAA")
	f.Fuzz(func(t *testing.T, s string) {
		k, err := kms.ParseMasterKey(s)
		if err == nil && k.IsZero() {
			t.Fatalf("ParseMasterKey(%q) gave the zero key without an error", s)
		}
	})
}

func FuzzCreateKeyRing(f *testing.F) {
	e := newEnv(f)
	f.Add("ring", "", "")
	f.Add("bad name", "", "xwing")
	f.Add("r2", "QBEJJBvAgLruMbDBfwyKbZewvVPlp/iXhszZ/jiIZU8=", "")
	f.Add("r3", "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VuAyEAQBEJJBvAgLruMbDBfwyKbZewvVPlp/iXhszZ/jiIZU8=\n-----END PUBLIC KEY-----\n", "")
	f.Add("r4", "", "rsa")
	f.Fuzz(func(t *testing.T, name, publicKey, kem string) {
		_, err := e.svc.CreateKeyRing(context.Background(), kms.CreateKeyRingInput{Name: name, PublicKey: publicKey, KEM: kem})
		if k := kms.ErrorKind(err); err == nil || k != kms.KindUnauthenticated && k != kms.KindInvalid {
			t.Fatalf("CreateKeyRing without a principal = %v", err)
		}
		_, err = e.svc.CreateKeyRing(e.root, kms.CreateKeyRingInput{Name: name, PublicKey: publicKey, KEM: kem})
		noInternal(t, "CreateKeyRing", err)
	})
}
