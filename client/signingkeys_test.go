package client_test

import (
	"encoding/base64"
	"sync"
	"testing"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/client"
)

// TestVerifyHeaderOffline checks headers the service issued, before and
// after a rotation of its signing key, with the keys of GET
// /ks/signing-keys alone: once they are fetched, the server is shut down.
func TestVerifyHeaderOffline(t *testing.T) {
	e, anon, counter := newCountingEnv(t)
	ctx := t.Context()
	check(e.c.CreateKeyRing(ctx, kms.CreateKeyRingInput{Name: "r"}))(t, "CreateKeyRing")
	parent := check(e.c.Encrypt(ctx, kms.EncryptInput{RingName: "r", Asset: &kms.AssetInput{Data: map[string]any{}}}))(t, "Encrypt parent")
	data := map[string]any{"amount": 12.5, "n": 3, "tag": "<x&y>", "deep": map[string]any{"b": []any{1, "two", nil}, "a": true}}
	before := check(e.c.Encrypt(ctx, kms.EncryptInput{RingName: "r", Asset: &kms.AssetInput{Data: data, Parents: []string{parent.Asset.ID}}}))(t, "Encrypt before")
	oldKeys := check(anon.SigningKeys(ctx))(t, "SigningKeys before")
	verifier := anon.NewVerifier(oldKeys)

	if _, err := e.svc.RotateSigningKey(e.rootCtx); err != nil {
		t.Fatal(err)
	}
	after := check(e.c.Encrypt(ctx, kms.EncryptInput{RingName: "r", Asset: &kms.AssetInput{Data: data}}))(t, "Encrypt after")
	plain := check(e.c.Encrypt(ctx, kms.EncryptInput{RingName: "r"}))(t, "Encrypt without an Asset")
	newKeys := check(anon.SigningKeys(ctx))(t, "SigningKeys after")
	if len(oldKeys.Keys) != 1 || len(newKeys.Keys) != 2 || newKeys.Keys[0].ID != oldKeys.Keys[0].ID || !newKeys.Keys[1].Active {
		t.Fatalf("SigningKeys before and after a rotation = %+v and %+v", oldKeys.Keys, newKeys.Keys)
	}
	// The Verifier holds the old keys: the new header costs one fetch.
	n := counter.n.Load()
	if v, err := verifier.VerifyHeader(ctx, after.Header, after.Asset); err != nil || !v.Valid {
		t.Fatalf("Verifier.VerifyHeader(header after the rotation) = %+v, %v; want valid", v, err)
	}
	if got := counter.n.Load() - n; got != 1 {
		t.Errorf("Verifier fetched the keys %d times for a header of a new key, want 1", got)
	}

	e.srv.Close() // from here on, nothing reaches the service
	valid := func(what string, keys *kms.SigningKeySet, header string, asset *kms.Asset) {
		t.Helper()
		v, err := keys.VerifyHeader(header, asset)
		if err != nil || !v.Valid {
			t.Errorf("VerifyHeader(%s) = %+v, %v; want valid", what, v, err)
		}
	}
	valid("header before, old keys", oldKeys, before.Header, before.Asset)
	valid("header before, new keys", newKeys, before.Header, before.Asset)
	valid("header after, new keys", newKeys, after.Header, after.Asset)
	valid("header without an Asset", newKeys, plain.Header, nil)
	for _, h := range []*kms.EncryptResult{before, after, plain} {
		if v, err := verifier.VerifyHeader(ctx, h.Header, h.Asset); err != nil || !v.Valid {
			t.Errorf("Verifier.VerifyHeader offline = %+v, %v; want valid", v, err)
		}
	}
	if v, err := oldKeys.VerifyHeader(after.Header, after.Asset); err != nil || v.Valid || v.KnownKey {
		t.Errorf("VerifyHeader(header after the rotation, old keys) = %+v, %v; want an unknown key", v, err)
	}

	invalid := func(what string, header string, asset *kms.Asset) {
		t.Helper()
		v, err := newKeys.VerifyHeader(header, asset)
		if err == nil && v.Valid {
			t.Errorf("VerifyHeader(%s) = %+v, want invalid", what, v)
		}
	}
	raw, _ := base64.RawURLEncoding.DecodeString(before.Header)
	for _, i := range []int{1, 3, 12, 40, 100, 130, len(raw) - 20} {
		bad := append([]byte(nil), raw...)
		bad[i] ^= 0x10
		invalid("a tampered header", base64.RawURLEncoding.EncodeToString(bad), before.Asset)
	}
	other := *before.Asset
	other.Data = map[string]any{"amount": 13.5, "n": 3, "tag": "<x&y>", "deep": map[string]any{"b": []any{1, "two", nil}, "a": true}}
	invalid("another Asset's data", before.Header, &other)
	other = *before.Asset
	other.Parents = nil
	invalid("other parents", before.Header, &other)
	invalid("another Asset", before.Header, after.Asset)
	invalid("an Asset for a header without one", plain.Header, after.Asset)
}

// TestVerifierRefetchBounded: headers that name keys nobody made (forged)
// cost the service at most one fetch of the keys per MinRefetch, however
// many are checked and however concurrently; each is found invalid.
func TestVerifierRefetchBounded(t *testing.T) {
	e, anon, counter := newCountingEnv(t)
	ctx := t.Context()
	check(e.c.CreateKeyRing(ctx, kms.CreateKeyRingInput{Name: "r"}))(t, "CreateKeyRing")
	enc := check(e.c.Encrypt(ctx, kms.EncryptInput{RingName: "r"}))(t, "Encrypt")
	raw, err := base64.RawURLEncoding.DecodeString(enc.Header)
	if err != nil {
		t.Fatal(err)
	}
	verifier := anon.NewVerifier(check(anon.SigningKeys(ctx))(t, "SigningKeys"))
	start := time.Now()
	before := counter.n.Load()
	for wave := range 3 {
		var wg sync.WaitGroup
		for i := range 30 {
			wg.Go(func() {
				forged := append([]byte(nil), raw...)
				forged[2], forged[3], forged[4] = byte(i), byte(wave), 0xee // bytes 2..9: the signing key's ID
				v, err := verifier.VerifyHeader(ctx, base64.RawURLEncoding.EncodeToString(forged), nil)
				if err != nil || v.Valid || v.KnownKey {
					t.Errorf("VerifyHeader(forged) = %+v, %v; want an unknown key", v, err)
				}
			})
		}
		wg.Wait()
	}
	elapsed := time.Since(start)
	// The first forged header fetches at once; the others share at most
	// one fetch more per MinRefetch that passed.
	if got, most := counter.n.Load()-before, int32(1+elapsed/client.MinRefetch); got > most || got < 1 {
		t.Errorf("90 forged headers in %v cost %d fetches, want 1 to %d", elapsed, got, most)
	}
	if v, err := verifier.VerifyHeader(ctx, enc.Header, nil); err != nil || !v.Valid {
		t.Errorf("VerifyHeader(a real header) = %+v, %v; want valid", v, err)
	}
}
