package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/kmstest"
)

// TestStolenTokenCannotTakeOverAccount: an access token alone does not
// change its User's email or password (the first steps of a takeover: a
// new address, then a reset mailed there); with the current password it
// does, and the address the User had hears of it.
func TestStolenTokenCannotTakeOverAccount(t *testing.T) {
	e, clock, mail := newMailEnv(t)
	_, pw := e.createUser(t, "nora")
	token := e.login(t, "nora", pw)
	patch := func(secret string, body map[string]any) reply {
		return e.do(t, "PATCH", "/auth/users/nora", secret, body)
	}
	get := func() kms.User {
		return decode[kms.User](t, e.do(t, "GET", "/auth/users/nora", e.root, nil).want(t, http.StatusOK))
	}

	t.Run("400 email without the current password", func(t *testing.T) {
		errs, _ := patch(token, map[string]any{"email": "thief@example.com"}).
			wantErrorBody(t, http.StatusBadRequest, "invalid")["errors"].(map[string]any)
		if errs["currentPassword"] == nil {
			t.Errorf("errors = %v, want currentPassword", errs)
		}
		patch(token, map[string]any{"password": "Thief-Chose-This-1"}).wantErrorBody(t, http.StatusBadRequest, "invalid")
		if got := get(); got.Email != "nora@example.com" {
			t.Fatalf("email = %s after a change without the password", got.Email)
		}
		mail.None(t)
	})
	t.Run("403 a wrong current password", func(t *testing.T) {
		patch(token, map[string]any{"email": "thief@example.com", "currentPassword": "Not-Noras-Pass-1"}).
			wantError(t, http.StatusForbidden, "permission_denied")
		if got := get(); got.Email != "nora@example.com" {
			t.Fatalf("email = %s after a change with a wrong password", got.Email)
		}
	})
	t.Run("other members need no password", func(t *testing.T) {
		got := decode[kms.User](t, patch(token, map[string]any{"lastName": "Self", "email": "NORA@example.com"}).want(t, http.StatusOK))
		if got.LastName != "Self" || got.Email != "NORA@example.com" {
			t.Fatalf("PATCH = %+v", got)
		}
		mail.None(t)
	})
	t.Run("email with the current password, and a notice to the old address", func(t *testing.T) {
		got := decode[kms.User](t, patch(token, map[string]any{"email": "nora.new@example.com", "currentPassword": pw}).want(t, http.StatusOK))
		if got.Email != "nora.new@example.com" {
			t.Fatalf("PATCH = %+v", got)
		}
		msg := mail.Next(t)
		if !strings.EqualFold(msg.To, "nora@example.com") || !strings.Contains(msg.Body, "nora.new@example.com") {
			t.Fatalf("notice to %s:\n%s\nwant one to nora@example.com naming the new address", msg.To, msg.Body)
		}
	})
	t.Run("an administrator's change is told too", func(t *testing.T) {
		patch(e.root, map[string]any{"email": "nora@example.com"}).want(t, http.StatusOK)
		if msg := mail.Next(t); msg.To != "nora.new@example.com" || !strings.Contains(msg.Body, "nora@example.com") {
			t.Fatalf("notice to %s:\n%s\nwant one to nora.new@example.com", msg.To, msg.Body)
		}
		// Only the User changes its password; others start a reset.
		patch(e.root, map[string]any{"password": "Root-Chose-This-1"}).wantError(t, http.StatusForbidden, "permission_denied")
	})
	t.Run("password", func(t *testing.T) {
		const newPw = "Nora-Chose-This-2"
		patch(token, map[string]any{"password": "weak", "currentPassword": pw}).wantErrorBody(t, http.StatusBadRequest, "invalid")
		patch(token, map[string]any{"password": newPw, "currentPassword": pw}).want(t, http.StatusOK)
		if msg := mail.Next(t); msg.To != "nora@example.com" || !strings.Contains(msg.Body, "password") {
			t.Fatalf("notice to %s:\n%s\nwant one to nora@example.com about the password", msg.To, msg.Body)
		}
		// Every token of the User is revoked; the new password logs in.
		e.do(t, "GET", "/auth/users/nora", token, nil).wantError(t, http.StatusUnauthorized, "unauthenticated")
		e.do(t, "POST", "/auth/basic/login", "", map[string]any{"username": "nora", "password": pw}).wantError(t, http.StatusBadRequest, "invalid")
		token = e.login(t, "nora", newPw)
		pw = newPw
	})
	t.Run("429 after repeated wrong passwords", func(t *testing.T) {
		for i := range 5 {
			patch(token, map[string]any{"email": "thief@example.com", "currentPassword": "Wrong-Pass-" + string(rune('0'+i))}).
				wantError(t, http.StatusForbidden, "permission_denied")
		}
		// Locked like a login: even the right password is refused.
		patch(token, map[string]any{"email": "thief@example.com", "currentPassword": pw}).wantError(t, http.StatusTooManyRequests, "rate_limited")
		e.do(t, "POST", "/auth/basic/login", "", map[string]any{"username": "nora", "password": pw}).wantError(t, http.StatusTooManyRequests, "rate_limited")
		clock.Advance(16 * time.Minute)
	})
}

// TestRefreshChainEnds: refresh carries a login on for at most the session
// lifetime (24 hours by default), and no token outlives it.
func TestRefreshChainEnds(t *testing.T) {
	clock := kmstest.NewClock()
	e := newEnv(t, withClock(clock))
	_, pw := e.createUser(t, "owen")
	token := e.login(t, "owen", pw)
	start := clock.Now()
	refresh := func() reply { return e.do(t, "GET", "/auth/basic/refresh", token, nil) }

	// Every 50 minutes, within the token's hour, until 23h20m.
	for clock.Now().Sub(start) < 23*time.Hour {
		clock.Advance(50 * time.Minute)
		token = decode[kms.LoginResult](t, refresh().want(t, http.StatusOK)).AccessToken
	}
	if d := clock.Now().Sub(start); d != 23*time.Hour+20*time.Minute {
		t.Fatalf("last refresh %v after the login", d)
	}
	// The last token stops at the end of the login, not an hour on.
	clock.Advance(40*time.Minute - time.Second)
	e.do(t, "GET", "/auth/users/owen", token, nil).want(t, http.StatusOK)
	last := decode[kms.LoginResult](t, refresh().want(t, http.StatusOK)).AccessToken
	clock.Advance(time.Second)
	e.do(t, "GET", "/auth/users/owen", last, nil).wantError(t, http.StatusUnauthorized, "unauthenticated")
	token = last
	refresh().wantError(t, http.StatusUnauthorized, "unauthenticated")

	// A new login starts a new chain.
	token = e.login(t, "owen", pw)
	clock.Advance(50 * time.Minute)
	refresh().want(t, http.StatusOK)
}
