package kms_test

import (
	"context"
	"errors"
	"testing"

	"github.com/ringkms/kms"
)

// A signed request's key is found by its ID, and its secret given to the
// protocol's check of the signature; the principal is the key's.
func TestAuthenticateSigned(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	key, err := e.svc.CreateAPIKey(e.root, kms.APIKeyInput{AccountID: e.acct, Flags: kms.Flags{"keyring.docs.encrypt": true}})
	if err != nil {
		t.Fatal(err)
	}
	var seen string
	check := func(secret []byte) error {
		seen = string(secret)
		return nil
	}
	p, err := e.svc.AuthenticateSigned(ctx, key.KeyID, check)
	if err != nil || p.ID != key.KeyID || p.AccountID != e.acct || !p.Can("keyring.docs.encrypt") || p.Can("keyring.docs.decrypt") {
		t.Fatalf("AuthenticateSigned() = %+v, %v; want the key's principal", p, err)
	}
	if seen != key.Key {
		t.Fatal("AuthenticateSigned gave the check another secret than the key's")
	}
	bearer, err := e.svc.Authenticate(ctx, key.Key)
	if err != nil || bearer != p {
		t.Fatalf("the bearer principal %p and the signed one %p differ: %v", bearer, p, err)
	}

	bad := errors.New("signature mismatch")
	_, err = e.svc.AuthenticateSigned(ctx, key.KeyID, func([]byte) error { return bad })
	if kms.ErrorKind(err) != kms.KindUnauthenticated || !errors.Is(err, bad) {
		t.Fatalf("AuthenticateSigned(a refused signature) = %v, want Unauthenticated wrapping the check's error", err)
	}
	called := false
	for _, id := range []string{"", "nope", "a/b", key.KeyID + "x"} {
		_, err := e.svc.AuthenticateSigned(ctx, id, func([]byte) error { called = true; return nil })
		if kms.ErrorKind(err) != kms.KindUnauthenticated {
			t.Errorf("AuthenticateSigned(%q) = %v, want Unauthenticated", id, err)
		}
	}
	off := false
	if _, err := e.svc.UpdateAPIKey(e.root, kms.APIKeyUpdate{Ref: kms.APIKeyRef{Value: key.KeyID}, Op: kms.UpdateMerge, Flags: kms.Flags{}, Active: &off}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.AuthenticateSigned(ctx, key.KeyID, func([]byte) error { called = true; return nil }); kms.ErrorKind(err) != kms.KindUnauthenticated {
		t.Errorf("AuthenticateSigned(an inactive key) = %v, want Unauthenticated", err)
	}
	if called {
		t.Error("the check saw a secret for an unknown or inactive key")
	}
}
