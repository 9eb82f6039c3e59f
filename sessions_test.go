package kms_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ringkms/kms"
)

func TestLogin(t *testing.T) {
	e := newUserEnv(t)
	u, pw := e.createUser(t, "Jane", nil)
	if _, err := e.svc.Invite(e.root, kms.InviteInput(userInput("invitee", nil))); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	good := []struct {
		name string
		in   kms.LoginInput
	}{
		{"by username", kms.LoginInput{Username: "jane", Password: pw}},
		{"by email", kms.LoginInput{Username: "JANE@example.com", Password: pw, ByEmail: true}},
	}
	for _, tt := range good {
		t.Run(tt.name, func(t *testing.T) {
			res, err := e.svc.Login(ctx, tt.in)
			if err != nil || res.User.ID != u.ID || !strings.HasPrefix(res.AccessToken, "rkt_") {
				t.Fatalf("Login = %+v, %v", res, err)
			}
			p, err := e.svc.Authenticate(ctx, res.AccessToken)
			if err != nil || p.Kind != kms.PrincipalUser || p.ID != u.ID || p.AccountID != e.acct {
				t.Fatalf("Authenticate(token) = %+v, %v", p, err)
			}
		})
	}

	// Every bad credential gets the very same error.
	bad := []struct {
		name string
		in   kms.LoginInput
	}{
		{"wrong password", kms.LoginInput{Username: "jane", Password: "Wrong-pass1"}},
		{"unknown user", kms.LoginInput{Username: "nobody", Password: "Wrong-pass1"}},
		{"unknown email", kms.LoginInput{Username: "nobody@example.com", Password: "Wrong-pass1", ByEmail: true}},
		{"username given as email", kms.LoginInput{Username: "jane", Password: pw, ByEmail: true}},
		{"invited user", kms.LoginInput{Username: "invitee", Password: "Wrong-pass1"}},
		{"password too long", kms.LoginInput{Username: "jane", Password: strings.Repeat("x", kms.PasswordMaxLength+1)}},
	}
	var first error
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.svc.Login(ctx, tt.in)
			wantKind(t, "Login", err, kms.KindInvalid)
			if err.Error() != "kms: invalid username or password" {
				t.Fatalf("Login = %q", err)
			}
			if first == nil {
				first = err
			} else if !reflect.DeepEqual(kms.AsError(err), kms.AsError(first)) {
				t.Fatalf("Login = %#v, want the same error as %#v", kms.AsError(err), kms.AsError(first))
			}
		})
	}
	t.Run("missing fields", func(t *testing.T) {
		_, err := e.svc.Login(ctx, kms.LoginInput{Password: pw})
		wantKind(t, "Login without username", err, kms.KindInvalid)
		_, err = e.svc.Login(ctx, kms.LoginInput{Username: "jane"})
		wantKind(t, "Login without password", err, kms.KindInvalid)
	})
}

func TestLoginThrottle(t *testing.T) {
	e := newUserEnv(t)
	_, pw := e.createUser(t, "kim", nil)
	fail := func(t *testing.T, ctx context.Context, name string, times int) {
		t.Helper()
		for range times {
			_, err := e.svc.Login(ctx, kms.LoginInput{Username: name, Password: "Wrong-pass1"})
			wantKind(t, "Login with a wrong password", err, kms.KindInvalid)
		}
	}
	login := func(ctx context.Context, name, pw string) error {
		_, err := e.svc.Login(ctx, kms.LoginInput{Username: name, Password: pw, ByEmail: strings.Contains(name, "@")})
		return err
	}
	bg := context.Background()
	// lockedOut checks that kim's right password is still refused when
	// within has passed, and taken when rest has passed after it.
	lockedOut := func(t *testing.T, what string, within, rest time.Duration) {
		t.Helper()
		e.advance(within)
		wantKind(t, "Login within "+what, login(bg, "kim", pw), kms.KindRateLimited)
		e.advance(rest)
		if err := login(bg, "kim", pw); err != nil {
			t.Fatalf("Login after %s = %v", what, err)
		}
	}

	t.Run("per user", func(t *testing.T) {
		fail(t, bg, "kim", 5)
		err := login(bg, "KIM@example.com", pw) // the same User by email, right password
		wantKind(t, "Login after 5 failures", err, kms.KindRateLimited)
		if !strings.Contains(err.Error(), "try again after") {
			t.Fatalf("Login = %q, want when to retry", err)
		}
		lockedOut(t, "the lockout", 14*time.Minute, 2*time.Minute)
	})

	t.Run("the lockout grows", func(t *testing.T) {
		fail(t, bg, "kim", 5)
		e.advance(16 * time.Minute)
		fail(t, bg, "kim", 5)
		lockedOut(t, "the second lockout", 16*time.Minute, 15*time.Minute)
	})

	t.Run("success clears the count", func(t *testing.T) {
		fail(t, bg, "kim", 4)
		if err := login(bg, "kim", pw); err != nil {
			t.Fatal(err)
		}
		fail(t, bg, "kim", 4)
		if err := login(bg, "kim", pw); err != nil {
			t.Fatalf("Login after 4+4 failures with a success between = %v", err)
		}
	})

	t.Run("per address", func(t *testing.T) {
		attacker := kms.WithClientAddr(bg, "192.0.2.7")
		for i := range 20 {
			fail(t, attacker, fmt.Sprintf("guess%d", i), 1)
		}
		wantKind(t, "Login from the address after 20 failures", login(attacker, "kim", pw), kms.KindRateLimited)
		if err := login(kms.WithClientAddr(bg, "198.51.100.1"), "kim", pw); err != nil {
			t.Fatalf("Login from another address = %v", err)
		}
		e.advance(16 * time.Minute)
		if err := login(attacker, "kim", pw); err != nil {
			t.Fatalf("Login from the address after its lockout = %v", err)
		}
	})
}

func TestRefreshAndLogout(t *testing.T) {
	e := newUserEnv(t)
	u, pw := e.createUser(t, "lee", nil)
	_, otherPw := e.createUser(t, "mia", nil)
	ctx, token := e.signIn(t, "lee", pw)

	res, err := e.svc.Refresh(ctx, token)
	if err != nil || res.User.ID != u.ID || res.AccessToken == token || !strings.HasPrefix(res.AccessToken, "rkt_") {
		t.Fatalf("Refresh = %+v, %v", res, err)
	}
	_, err = e.svc.Authenticate(context.Background(), token)
	wantKind(t, "Authenticate with the refreshed token", err, kms.KindUnauthenticated)
	_, err = e.svc.Refresh(ctx, token)
	wantKind(t, "Refresh with the refreshed token", err, kms.KindUnauthenticated)
	ctx = e.actingWith(t, res.AccessToken)
	token = res.AccessToken

	_, otherToken := e.signIn(t, "mia", otherPw)
	_, err = e.svc.Refresh(ctx, otherToken)
	wantKind(t, "Refresh with another User's token", err, kms.KindUnauthenticated)
	wantKind(t, "Logout of another User's token", e.svc.Logout(ctx, otherToken), kms.KindUnauthenticated)
	if _, err := e.svc.Authenticate(context.Background(), otherToken); err != nil {
		t.Fatalf("the other User's token stopped working: %v", err)
	}

	apiKey := e.as(t, kms.Flags{"*": true})
	_, err = e.svc.Refresh(apiKey, token)
	wantKind(t, "Refresh with an API key", err, kms.KindInvalid)
	wantKind(t, "Logout with an API key", e.svc.Logout(apiKey, token), kms.KindInvalid)
	_, err = e.svc.Refresh(context.Background(), token)
	wantKind(t, "Refresh without a principal", err, kms.KindUnauthenticated)

	if err := e.svc.Logout(ctx, token); err != nil {
		t.Fatalf("Logout = %v", err)
	}
	_, err = e.svc.Authenticate(context.Background(), token)
	wantKind(t, "Authenticate after logout", err, kms.KindUnauthenticated)
	wantKind(t, "Logout again", e.svc.Logout(ctx, token), kms.KindUnauthenticated)
}

func TestTokenExpiry(t *testing.T) {
	e := newUserEnv(t, func(o *kms.Options) { o.TokenTTL = 10 * time.Minute })
	_, pw := e.createUser(t, "nia", nil)
	_, cached := e.signIn(t, "nia", pw) // authenticated once: cached
	res, err := e.svc.Login(context.Background(), kms.LoginInput{Username: "nia", Password: pw})
	if err != nil {
		t.Fatal(err)
	}
	stored := res.AccessToken // never authenticated: only in the store
	e.advance(10*time.Minute - time.Second)
	for _, tok := range []string{cached, stored} {
		if _, err := e.svc.Authenticate(context.Background(), tok); err != nil {
			t.Fatalf("Authenticate before expiry = %v", err)
		}
	}
	e.advance(time.Second)
	for name, tok := range map[string]string{"cached": cached, "stored": stored} {
		t.Run(name, func(t *testing.T) {
			for range 2 { // expired, then deleted
				_, err := e.svc.Authenticate(context.Background(), tok)
				if !errors.Is(err, kms.ErrUnauthenticated) || err.Error() != "kms: invalid credential" {
					t.Fatalf("Authenticate after expiry = %v, want the opaque credential error", err)
				}
			}
		})
	}
}
