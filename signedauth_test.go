package kms_test

import (
	"context"
	"errors"
	"strings"
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

// A signed request may carry a User's access token as its session
// token, signed with the token itself, under the User's ID as its access
// key: its principal is the token's. An API key's secret, another ID, a
// refused signature or a token logged out are refused.
func TestAuthenticateSession(t *testing.T) {
	e := newUserEnv(t)
	ctx := context.Background()
	u, pw := e.createUser(t, "ann", kms.Flags{"keyring.docs.encrypt": true})
	_, token := e.signIn(t, "ann", pw)
	var seen string
	check := func(secret []byte) error {
		seen = string(secret)
		return nil
	}
	p, err := e.svc.AuthenticateSession(ctx, u.ID, token, check)
	if err != nil || p.Kind != kms.PrincipalUser || p.ID != u.ID || !p.Can("keyring.docs.encrypt") || seen != token {
		t.Fatalf("AuthenticateSession() = %+v, %v (signed with %q); want the User's principal, signed with the token", p, err, seen)
	}

	key, err := e.svc.CreateAPIKey(e.root, kms.APIKeyInput{AccountID: e.acct, Flags: kms.Flags{"keyring.docs.encrypt": true}})
	if err != nil {
		t.Fatal(err)
	}
	bad := errors.New("signature mismatch")
	for _, tt := range []struct {
		name, keyID, token string
		verify             func([]byte) error
		wraps              error
	}{
		{"an API key's secret", key.KeyID, key.Key, check, nil},
		{"another User's ID", key.KeyID, token, check, nil},
		{"no ID", "", token, check, nil},
		{"a refused signature", u.ID, token, func([]byte) error { return bad }, bad},
		{"a token of no session", u.ID, "rkt_" + strings.Repeat("A", 43), check, nil},
	} {
		_, err := e.svc.AuthenticateSession(ctx, tt.keyID, tt.token, tt.verify)
		if kms.ErrorKind(err) != kms.KindUnauthenticated || (tt.wraps != nil && !errors.Is(err, tt.wraps)) {
			t.Errorf("AuthenticateSession(%s) = %v, want Unauthenticated", tt.name, err)
		}
	}
	if err := e.svc.Logout(e.actingWith(t, token), token); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.AuthenticateSession(ctx, u.ID, token, check); kms.ErrorKind(err) != kms.KindUnauthenticated {
		t.Errorf("AuthenticateSession(a token logged out) = %v, want Unauthenticated", err)
	}
}
