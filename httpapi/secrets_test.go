package httpapi_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ringkms/kms"
)

// TestAuthLogsHoldNoSecret runs the flows of the /auth group with the
// handler's and the Service's log captured, and checks that the log holds
// none of the secrets that went by: passwords, API key secrets, access
// tokens, invitation and reset tokens.
func TestAuthLogsHoldNoSecret(t *testing.T) {
	e, clock, mail := newMailEnv(t, withServiceLog)
	secrets := map[string]string{"root API key": e.root}
	keep := func(what, s string) string {
		t.Helper()
		if s == "" {
			t.Fatalf("%s is empty", what)
		}
		secrets[what] = s
		return s
	}

	// A User: creation, login (failed and not), refresh, logout.
	_, pw := e.createUser(t, "kim")
	keep("generated password", pw)
	e.do(t, "POST", "/auth/basic/login", "", map[string]any{"username": "kim", "password": keep("wrong password", "Not-Kims-Pass-1")}).want(t, http.StatusBadRequest)
	token := keep("access token", e.login(t, "kim", pw))
	e.do(t, "GET", "/auth/users/kim", token, nil).want(t, http.StatusOK)
	fresh := keep("refreshed token", decode[kms.LoginResult](t, e.do(t, "GET", "/auth/basic/refresh", token, nil).want(t, http.StatusOK)).AccessToken)
	e.do(t, "GET", "/auth/users/kim", token, nil).want(t, http.StatusUnauthorized)
	e.do(t, "POST", "/auth/basic/logout", fresh, nil).want(t, http.StatusOK)

	// An invitation: the link, validation, a weak password, completion.
	inv := decode[map[string]string](t, e.do(t, "POST", "/auth/user/invite", e.root, e.userBody("lee")).want(t, http.StatusOK))
	mail.Next(t)
	u, err := url.Parse(inv["loginUrl"])
	if err != nil {
		t.Fatal(err)
	}
	invite := keep("invitation token", u.Query().Get("token"))
	e.do(t, "GET", "/auth/user/invite-validate?token="+url.QueryEscape(invite), "", nil).want(t, http.StatusOK)
	e.do(t, "POST", "/auth/user/invite-complete", "", map[string]any{"token": invite, "password": keep("weak password", "qwertyuiop")}).want(t, http.StatusBadRequest)
	done := decode[kms.InviteCompletion](t, e.do(t, "POST", "/auth/user/invite-complete", "", map[string]any{"token": invite, "password": keep("chosen password", "Lee-Chose-This-1")}).want(t, http.StatusOK))
	keep("invitation access token", done.AccessToken)
	e.do(t, "GET", "/auth/user/invite-validate?token="+url.QueryEscape(invite), "", nil).want(t, http.StatusUnauthorized)

	// A password reset.
	e.do(t, "POST", "/auth/basic/reset-password-start", "", map[string]any{"email": "lee@example.com"}).want(t, http.StatusOK)
	link := mailedLink(t, mail.Next(t), testBaseURL+"/auth/basic/reset-password-complete?token=")
	reset := keep("reset token", linkToken(t, link, testBaseURL))
	e.do(t, "POST", "/auth/basic/reset-password-complete", "", map[string]any{"token": reset, "password": keep("new password", "Lee-Reset-This-2")}).wantEmpty(t, http.StatusOK)
	e.do(t, "POST", "/auth/basic/reset-password-complete", "", map[string]any{"token": reset, "password": "Lee-Reset-This-3"}).wantEmpty(t, http.StatusBadRequest)

	// API keys: creation, validation, update by secret, deletion by secret.
	k := decode[kms.APIKey](t, e.do(t, "POST", "/auth/apikey", e.root, map[string]any{"accountId": e.account, "flags": map[string]bool{"apikeys.read": true}}).want(t, http.StatusOK))
	keep("API key", k.Key)
	e.do(t, "GET", "/auth/apikey", k.Key, nil).want(t, http.StatusOK)
	e.do(t, "POST", "/auth/validate", e.root, map[string]any{"key": k.Key}).want(t, http.StatusOK)
	e.do(t, "PUT", "/auth/apikey", e.root, map[string]any{"op": "merge", "key": k.Key, "props": map[string]any{"x": 1}}).want(t, http.StatusOK)
	e.do(t, "DELETE", "/auth/apikey/"+k.Key, e.root, nil).want(t, http.StatusOK)
	e.do(t, "DELETE", "/auth/apikey/"+k.Key, e.root, nil).want(t, http.StatusNotFound)
	e.do(t, "GET", "/auth/apikey", k.Key, nil).want(t, http.StatusUnauthorized)

	// Failures that log at level error: a store that refuses writes.
	leeToken := keep("access token after the reset", e.login(t, "lee", secrets["new password"]))
	e.store.readOnly.Store(true)
	e.do(t, "POST", "/auth/basic/login", "", map[string]any{"username": "lee", "password": secrets["new password"]}).want(t, http.StatusInternalServerError)
	e.do(t, "GET", "/auth/basic/refresh", leeToken, nil).want(t, http.StatusInternalServerError)
	e.store.readOnly.Store(false)
	clock.Advance(time.Minute)

	log := e.logs.String()
	if n := len(e.logs.Lines(t)); n < 25 {
		t.Fatalf("the log has %d lines; was it captured?", n)
	}
	for what, s := range secrets {
		if strings.Contains(log, s) {
			t.Errorf("the log holds the %s", what)
		}
	}
	for _, prefix := range []string{"rk_", "rkt_", "rki_", "rkr_", "token="} {
		if strings.Contains(log, prefix) {
			t.Errorf("the log holds %q", prefix)
		}
	}
}

// TestNearMissPathsHoldNoSecret: a request that misses a route (a
// trailing slash, a wrong method, a wrong name) with a secret in its path
// gets that secret neither in the log nor in the answer.
func TestNearMissPathsHoldNoSecret(t *testing.T) {
	e := newEnv(t)
	k := decode[kms.APIKey](t, e.do(t, "POST", "/auth/apikey", e.root, map[string]any{"accountId": e.account, "flags": map[string]bool{"apikeys.read": true}}).want(t, http.StatusOK))
	token := "rkt_" + strings.Repeat("T", 43)
	misses := []struct {
		method, path string
		status       int
	}{
		{"DELETE", "/auth/apikey/" + k.Key + "/", http.StatusNotFound},
		{"PATCH", "/auth/apikey/" + k.Key, http.StatusMethodNotAllowed},
		{"GET", "/auth/apikey/" + k.Key, http.StatusNotFound},
		{"GET", "/auth/apikey/" + k.Key + "/props", http.StatusNotFound},
		{"DELETE", "/auth/apikeys/" + k.Key, http.StatusNotFound},
		{"DELETE", "/auth/apikey/x/" + e.root, http.StatusNotFound},
		{"GET", "/auth/basic/refresh/" + token, http.StatusNotFound},
		{"POST", "/auth/validate/" + k.Key, http.StatusNotFound},
	}
	for _, m := range misses {
		r := e.do(t, m.method, m.path, e.root, nil)
		if r.status != m.status {
			t.Errorf("%s %s = %d, want %d", m.method, m.path, r.status, m.status)
		}
		for _, s := range []string{k.Key, e.root, token} {
			if strings.Contains(string(r.body), s) {
				t.Errorf("%s %s: the answer holds a secret: %s", m.method, m.path, r.body)
			}
		}
	}
	log := e.logs.String()
	for what, s := range map[string]string{"API key": k.Key, "root API key": e.root, "access token": token} {
		if strings.Contains(log, s) {
			t.Errorf("the log holds the %s", what)
		}
	}
	if !strings.Contains(log, `"path":"/auth/apikey/<redacted>/<redacted>"`) {
		t.Errorf("the log has no redacted path:\n%s", log)
	}
}
