package httpapi_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/kmstest"
)

// Password hashing (argon2id) costs about 0.25 s a call under the race
// detector: these tests create Users and log in sparingly.

// strongPassword meets the password rules.
const strongPassword = "Correct-Horse-9"

// userBody is a valid body of POST /auth/users for name, in the test
// Account, with the given flags granted.
func (e *env) userBody(name string, flags ...string) map[string]any {
	f := map[string]bool{}
	for _, n := range flags {
		f[n] = true
	}
	return map[string]any{
		"username": name, "email": name + "@example.com", "firstName": "First", "lastName": "Last",
		"accountId": e.account, "flags": f, "props": map[string]any{"team": "qa"},
	}
}

// createUser creates an active User over HTTP as root and returns it and
// its generated password.
func (e *env) createUser(t testing.TB, name string, flags ...string) (kms.User, string) {
	t.Helper()
	r := e.do(t, "POST", "/auth/users", e.root, e.userBody(name, flags...)).want(t, http.StatusOK)
	res := decode[struct {
		User     kms.User `json:"user"`
		Password string   `json:"password"`
	}](t, r)
	if res.User.ID == "" || res.User.Username != name || !kms.CheckPassword(res.Password).IsValid {
		t.Fatalf("POST /auth/users = %s", r.body)
	}
	return res.User, res.Password
}

// login signs in over HTTP and returns the access token.
func (e *env) login(t testing.TB, name, password string) string {
	t.Helper()
	r := e.do(t, "POST", "/auth/basic/login", "", map[string]any{"username": name, "password": password}).want(t, http.StatusOK)
	res := decode[kms.LoginResult](t, r)
	if !strings.HasPrefix(res.AccessToken, "rkt_") || res.User == nil || res.User.Username != name {
		t.Fatalf("POST /auth/basic/login = %s", r.body)
	}
	return res.AccessToken
}

// linkToken returns the token query parameter of a link, after checking
// that the link starts with prefix.
func linkToken(t testing.TB, link, prefix string) string {
	t.Helper()
	if !strings.HasPrefix(link, prefix) {
		t.Fatalf("link %q does not start with %q", link, prefix)
	}
	return kmstest.LinkToken(t, link)
}

// mailedLink returns the line of a mail body that starts with prefix.
func mailedLink(t testing.TB, msg kms.Message, prefix string) string {
	t.Helper()
	for _, l := range strings.Split(msg.Body, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	t.Fatalf("mail to %s has no link starting with %q:\n%s", msg.To, prefix, msg.Body)
	return ""
}

func TestUsersOverHTTP(t *testing.T) {
	e := newEnv(t)
	alice, _ := e.createUser(t, "alice")

	t.Run("create", func(t *testing.T) {
		if alice.Email != "alice@example.com" || alice.FirstName != "First" || alice.DisplayName != "First Last" ||
			alice.AccountID != e.account || alice.Props["team"] != "qa" || alice.Keys == nil {
			t.Fatalf("created user = %+v", alice)
		}
		e.checkAuth(t, "POST", "/auth/users", e.userBody("nobody"))
	})
	t.Run("400 username or email taken", func(t *testing.T) {
		body := e.userBody("ALICE")
		body["email"] = "other@example.com"
		errs, _ := e.do(t, "POST", "/auth/users", e.root, body).wantErrorBody(t, http.StatusBadRequest, "conflict")["errors"].(map[string]any)
		if errs["username"] == nil || errs["email"] != nil {
			t.Errorf("errors = %v, want username only", errs)
		}
		body = e.userBody("other")
		body["email"] = "Alice@Example.com"
		errs, _ = e.do(t, "POST", "/auth/users", e.root, body).wantErrorBody(t, http.StatusBadRequest, "conflict")["errors"].(map[string]any)
		if errs["email"] == nil || errs["username"] != nil {
			t.Errorf("errors = %v, want email only", errs)
		}
	})
	t.Run("400 missing fields", func(t *testing.T) {
		errs, _ := e.do(t, "POST", "/auth/users", e.root, map[string]any{"username": "bob"}).
			wantErrorBody(t, http.StatusBadRequest, "invalid")["errors"].(map[string]any)
		for _, f := range []string{"email", "firstName", "lastName"} {
			if errs[f] == nil {
				t.Errorf("errors = %v, want %s", errs, f)
			}
		}
		e.do(t, "POST", "/auth/users", e.root, `{"username": 1}`).wantError(t, http.StatusBadRequest, "invalid")
	})
	t.Run("403 a flag the caller does not hold", func(t *testing.T) {
		secret, _ := e.apiKey(t, "users.write")
		e.do(t, "POST", "/auth/users", secret, e.userBody("mallory", "*")).wantError(t, http.StatusForbidden, "permission_denied")
	})
	t.Run("get", func(t *testing.T) {
		for _, path := range []string{"/auth/users/alice", "/auth/users/ALICE", "/auth/users/alice@example.com?email=true", "/auth/users/" + alice.ID + "?id=true"} {
			got := decode[kms.User](t, e.do(t, "GET", path, e.root, nil).want(t, http.StatusOK))
			if got.ID != alice.ID || got.Username != "alice" {
				t.Errorf("GET %s = %+v", path, got)
			}
		}
		for _, path := range []string{"/auth/users/nobody", "/auth/users/alice?email=true", "/auth/users/alice?id=true", "/auth/users/01a2000000000000000000000000beef?id=true"} {
			e.do(t, "GET", path, e.root, nil).wantError(t, http.StatusNotFound, "not_found")
		}
		e.checkAuth(t, "GET", "/auth/users/alice", nil)
	})
	t.Run("tenancy", func(t *testing.T) {
		// Without accounts.all, a key sees the Users of its own Account only.
		secret, _ := e.apiKey(t, "users.read")
		e.do(t, "GET", "/auth/users/alice", secret, nil).want(t, http.StatusOK)
		other := e.userBody("rooted")
		delete(other, "accountId") // root's own Account
		e.do(t, "POST", "/auth/users", e.root, other).want(t, http.StatusOK)
		e.do(t, "GET", "/auth/users/rooted", secret, nil).wantError(t, http.StatusNotFound, "not_found")
		e.do(t, "GET", "/auth/users/rooted", e.root, nil).want(t, http.StatusOK)
		list := decode[kms.List[kms.User]](t, e.do(t, "GET", "/auth/users", secret, nil).want(t, http.StatusOK))
		for _, u := range list.Data {
			if u.AccountID != e.account {
				t.Errorf("GET /auth/users listed %s of account %s", u.Username, u.AccountID)
			}
		}
	})
	t.Run("patch", func(t *testing.T) {
		got := decode[kms.User](t, e.do(t, "PATCH", "/auth/users/alice", e.root,
			map[string]any{"firstName": "Alice", "email": "alice2@example.com", "props": map[string]any{"team": "dev"}}).want(t, http.StatusOK))
		if got.FirstName != "Alice" || got.LastName != "Last" || got.Email != "alice2@example.com" || got.Props["team"] != "dev" {
			t.Fatalf("PATCH = %+v", got)
		}
		e.do(t, "PATCH", "/auth/users/nobody", e.root, map[string]any{"firstName": "X"}).wantError(t, http.StatusNotFound, "not_found")
		errs, _ := e.do(t, "PATCH", "/auth/users/alice", e.root, map[string]any{"email": "rooted@example.com"}).
			wantErrorBody(t, http.StatusBadRequest, "conflict")["errors"].(map[string]any)
		if errs["email"] == nil {
			t.Errorf("errors = %v, want email", errs)
		}
		e.do(t, "PATCH", "/auth/users/alice", e.root, map[string]any{"email": "not an address"}).wantErrorBody(t, http.StatusBadRequest, "invalid")
		e.do(t, "PATCH", "/auth/users/alice", e.root, nil).wantError(t, http.StatusBadRequest, "invalid")
		e.checkAuth(t, "PATCH", "/auth/users/alice", map[string]any{"firstName": "X"})
	})
	t.Run("403 changing a more powerful user", func(t *testing.T) {
		body := e.userBody("boss", "keyring.*.rotate")
		e.do(t, "POST", "/auth/users", e.root, body).want(t, http.StatusOK)
		secret, _ := e.apiKey(t, "users.write")
		e.do(t, "PATCH", "/auth/users/boss", secret, map[string]any{"email": "mine@example.com"}).wantError(t, http.StatusForbidden, "permission_denied")
		e.do(t, "DELETE", "/auth/users/boss", secret, nil).wantError(t, http.StatusForbidden, "permission_denied")
	})
	t.Run("list", func(t *testing.T) {
		for _, name := range []string{"carol", "dave"} {
			e.do(t, "POST", "/auth/users", e.root, e.userBody(name)).want(t, http.StatusOK)
		}
		var names []string
		cursor := ""
		for range 10 {
			page := decode[kms.List[kms.User]](t, e.do(t, "GET", "/auth/users?limit=2&cursor="+url.QueryEscape(cursor), e.root, nil).want(t, http.StatusOK))
			for _, u := range page.Data {
				names = append(names, u.Username)
			}
			if page.Pagination.Limit != 2 || page.Pagination.Count != len(page.Data) || page.Pagination.HasMore != (page.Pagination.NextCursor != "") {
				t.Fatalf("pagination = %+v", page.Pagination)
			}
			if !page.Pagination.HasMore {
				break
			}
			cursor = page.Pagination.NextCursor
		}
		if got := strings.Join(names, ","); got != "alice,boss,carol,dave,rooted" {
			t.Errorf("usernames = %s", got)
		}
		e.do(t, "GET", "/auth/users?limit=0", e.root, nil).wantError(t, http.StatusBadRequest, "invalid")
		e.do(t, "GET", "/auth/users?cursor=bogus", e.root, nil).wantError(t, http.StatusBadRequest, "invalid")
		e.checkAuth(t, "GET", "/auth/users", nil)
	})
	t.Run("delete", func(t *testing.T) {
		u := decode[kms.User](t, e.do(t, "GET", "/auth/users/carol", e.root, nil).want(t, http.StatusOK))
		e.checkAuth(t, "DELETE", "/auth/users/carol", nil)
		body := e.do(t, "DELETE", "/auth/users/"+u.ID+"?id=true", e.root, nil).want(t, http.StatusOK).object(t)
		if msg, _ := body["message"].(string); !strings.Contains(msg, "carol") {
			t.Errorf("DELETE = %v", body)
		}
		e.do(t, "DELETE", "/auth/users/"+u.ID+"?id=true", e.root, nil).wantError(t, http.StatusNotFound, "not_found")
		e.do(t, "DELETE", "/auth/users/dave", e.root, nil).want(t, http.StatusOK)
		e.do(t, "GET", "/auth/users/dave", e.root, nil).wantError(t, http.StatusNotFound, "not_found")
	})
}

func TestLoginOverHTTP(t *testing.T) {
	clock := kmstest.NewClock()
	e := newEnv(t, withClock(clock))
	erin, password := e.createUser(t, "erin")
	_, frankPassword := e.createUser(t, "frank", "users.read")

	var token string
	t.Run("login", func(t *testing.T) {
		token = e.login(t, "erin", password)
		got := decode[kms.User](t, e.do(t, "GET", "/auth/users/erin", token, nil).want(t, http.StatusOK))
		if got.ID != erin.ID {
			t.Fatalf("GET own user = %+v", got)
		}
		r := e.do(t, "POST", "/auth/basic/login?email=true", "", map[string]any{"username": "ERIN@example.com", "password": password}).want(t, http.StatusOK)
		if res := decode[kms.LoginResult](t, r); res.User.ID != erin.ID || res.AccessToken == token {
			t.Fatalf("login by email = %s", r.body)
		}
	})
	t.Run("400 the same for a wrong password and an unknown user", func(t *testing.T) {
		wrong := e.do(t, "POST", "/auth/basic/login", "", map[string]any{"username": "erin", "password": password + "x"})
		wrong.wantError(t, http.StatusBadRequest, "invalid")
		unknown := e.do(t, "POST", "/auth/basic/login", "", map[string]any{"username": "nobody", "password": password})
		unknown.wantError(t, http.StatusBadRequest, "invalid")
		byEmail := e.do(t, "POST", "/auth/basic/login?email=true", "", map[string]any{"username": "erin", "password": password})
		byEmail.wantError(t, http.StatusBadRequest, "invalid")
		if !bytes.Equal(wrong.body, unknown.body) || !bytes.Equal(wrong.body, byEmail.body) {
			t.Errorf("bodies differ: %s, %s and %s", wrong.body, unknown.body, byEmail.body)
		}
		e.do(t, "POST", "/auth/basic/login", "", map[string]any{"username": "erin"}).wantErrorBody(t, http.StatusBadRequest, "invalid")
		e.do(t, "POST", "/auth/basic/login", "", "").wantError(t, http.StatusBadRequest, "invalid")
	})
	t.Run("self access", func(t *testing.T) {
		e.do(t, "GET", "/auth/users/frank", token, nil).wantError(t, http.StatusForbidden, "permission_denied")
		e.do(t, "GET", "/auth/users", token, nil).wantError(t, http.StatusForbidden, "permission_denied")
		got := decode[kms.User](t, e.do(t, "PATCH", "/auth/users/erin", token, map[string]any{"lastName": "Self"}).want(t, http.StatusOK))
		if got.LastName != "Self" {
			t.Errorf("PATCH own user = %+v", got)
		}
		e.do(t, "PATCH", "/auth/users/erin", token, map[string]any{"flags": map[string]bool{"users.read": true}}).
			wantError(t, http.StatusForbidden, "permission_denied")
		e.do(t, "PATCH", "/auth/users/frank", token, map[string]any{"lastName": "X"}).wantError(t, http.StatusForbidden, "permission_denied")
		e.do(t, "DELETE", "/auth/users/erin", token, nil).wantError(t, http.StatusForbidden, "permission_denied")
		// A User's token acts with the User's flags.
		frank := e.login(t, "frank", frankPassword)
		e.do(t, "GET", "/auth/users/erin", frank, nil).want(t, http.StatusOK)
	})
	t.Run("refresh", func(t *testing.T) {
		r := e.do(t, "GET", "/auth/basic/refresh", token, nil).want(t, http.StatusOK)
		res := decode[kms.LoginResult](t, r)
		if res.User == nil || res.User.ID != erin.ID || !strings.HasPrefix(res.AccessToken, "rkt_") || res.AccessToken == token {
			t.Fatalf("refresh = %s", r.body)
		}
		e.do(t, "GET", "/auth/users/erin", token, nil).wantError(t, http.StatusUnauthorized, "unauthenticated")
		e.do(t, "GET", "/auth/basic/refresh", token, nil).wantError(t, http.StatusUnauthorized, "unauthenticated")
		token = res.AccessToken
		e.do(t, "GET", "/auth/users/erin", token, nil).want(t, http.StatusOK)
		e.do(t, "GET", "/auth/basic/refresh", e.root, nil).wantError(t, http.StatusBadRequest, "invalid")
		for _, c := range authCases {
			e.send(t, "GET", "/auth/basic/refresh", req{auth: c.auth}).wantError(t, http.StatusUnauthorized, "unauthenticated")
		}
	})
	t.Run("logout", func(t *testing.T) {
		other := e.login(t, "erin", password)
		body := e.do(t, "POST", "/auth/basic/logout", token, nil).want(t, http.StatusOK).object(t)
		if msg, _ := body["message"].(string); msg == "" || len(body) != 1 {
			t.Errorf("logout = %v, want {message}", body)
		}
		e.do(t, "GET", "/auth/users/erin", token, nil).wantError(t, http.StatusUnauthorized, "unauthenticated")
		e.do(t, "POST", "/auth/basic/logout", token, nil).wantError(t, http.StatusUnauthorized, "unauthenticated")
		e.do(t, "GET", "/auth/users/erin", other, nil).want(t, http.StatusOK) // other sessions stay
		e.do(t, "POST", "/auth/basic/logout", e.root, nil).wantError(t, http.StatusBadRequest, "invalid")
		for _, c := range authCases {
			e.send(t, "POST", "/auth/basic/logout", req{auth: c.auth}).wantError(t, http.StatusUnauthorized, "unauthenticated")
		}
		token = other
	})
	t.Run("401 expired token", func(t *testing.T) {
		clock.Advance(time.Hour + time.Second)
		e.do(t, "GET", "/auth/users/erin", token, nil).wantError(t, http.StatusUnauthorized, "unauthenticated")
	})
	t.Run("429 after repeated failures", func(t *testing.T) {
		for i := range 5 {
			e.do(t, "POST", "/auth/basic/login", "", map[string]any{"username": "erin", "password": "Wrong-Pass-" + string(rune('0'+i))}).
				wantError(t, http.StatusBadRequest, "invalid")
		}
		// Locked: even the right password is refused, without a check.
		msg := e.do(t, "POST", "/auth/basic/login", "", map[string]any{"username": "erin", "password": password}).
			wantError(t, http.StatusTooManyRequests, "rate_limited")
		if !strings.Contains(msg, "try again") {
			t.Errorf("429 message = %q", msg)
		}
		clock.Advance(16 * time.Minute)
		e.login(t, "erin", password)
	})
}

func TestInviteOverHTTP(t *testing.T) {
	e, clock, mail := newMailEnv(t)
	const linkPrefix = testBaseURL + "/auth/user/invite-validate?token="

	invite := func(t *testing.T, name string) string {
		t.Helper()
		body := e.userBody(name)
		delete(body, "props")
		r := e.do(t, "POST", "/auth/user/invite", e.root, body).want(t, http.StatusOK)
		res := decode[map[string]string](t, r)
		token := linkToken(t, res["loginUrl"], linkPrefix)
		msg := mail.Next(t)
		if msg.To != name+"@example.com" || mailedLink(t, msg, linkPrefix) != res["loginUrl"] {
			t.Fatalf("mail to %s does not carry the link %s:\n%s", msg.To, res["loginUrl"], msg.Body)
		}
		return token
	}
	validate := func(token string) reply {
		return e.do(t, "GET", "/auth/user/invite-validate?token="+url.QueryEscape(token), "", nil)
	}
	complete := func(token, password string) reply {
		return e.do(t, "POST", "/auth/user/invite-complete", "", map[string]any{"token": token, "password": password})
	}
	wantState := func(t *testing.T, r reply, status int, state string) map[string]any {
		t.Helper()
		code := map[int]string{400: "invalid", 401: "unauthenticated"}[status]
		body := r.wantErrorBody(t, status, code)
		if body["state"] != state {
			t.Fatalf("%s %s: state = %v, want %q; body %s", r.method, r.path, body["state"], state, r.body)
		}
		return body
	}

	token := invite(t, "gina")
	t.Run("invite", func(t *testing.T) {
		e.checkAuth(t, "POST", "/auth/user/invite", e.userBody("nobody"))
		errs, _ := e.do(t, "POST", "/auth/user/invite", e.root, e.userBody("GINA")).
			wantErrorBody(t, http.StatusBadRequest, "conflict")["errors"].(map[string]any)
		if errs["username"] == nil {
			t.Errorf("errors = %v, want username", errs)
		}
		e.do(t, "POST", "/auth/user/invite", e.root, map[string]any{"username": "x"}).wantErrorBody(t, http.StatusBadRequest, "invalid")
		// An invited User cannot log in yet.
		e.do(t, "POST", "/auth/basic/login", "", map[string]any{"username": "gina", "password": strongPassword}).
			wantError(t, http.StatusBadRequest, "invalid")
	})
	t.Run("validate", func(t *testing.T) {
		body := validate(token).want(t, http.StatusOK).object(t)
		user, _ := body["user"].(map[string]any)
		if body["state"] != "success" || user == nil || user["username"] != "gina" || user["status"] != "invited" {
			t.Fatalf("invite-validate = %v", body)
		}
		wantState(t, validate(token+"x"), 401, "invalid")
		wantState(t, validate("rki_unknown"), 401, "invalid")
		wantState(t, e.do(t, "GET", "/auth/user/invite-validate", "", nil), 401, "invalid")
	})
	t.Run("400 malformed password", func(t *testing.T) {
		body := wantState(t, complete(token, "short"), 400, "malformed-password")
		results, _ := body["results"].(map[string]any)
		details, _ := results["details"].(map[string]any)
		if results["isValid"] != false || details == nil {
			t.Fatalf("results = %v", body["results"])
		}
		want := map[string]any{"minLength": 8.0, "newPasswordLength": 5.0, "minUppercase": 0.0, "newPasswordUppercase": 0.0,
			"minLowercase": 0.0, "newPasswordLowercase": 5.0, "minSpecialChar": 0.0, "newPasswordSpecialChar": 0.0, "minNumber": 0.0, "newPasswordNumber": 0.0,
			"commonPassword": false}
		for k, v := range want {
			if details[k] != v {
				t.Errorf("details.%s = %v, want %v", k, details[k], v)
			}
		}
		body = wantState(t, complete(token, "Password123"), 400, "malformed-password")
		if results, _ := body["results"].(map[string]any); results["details"].(map[string]any)["commonPassword"] != true {
			t.Errorf("a common password: results = %v, want commonPassword true", body["results"])
		}
		e.do(t, "POST", "/auth/user/invite-complete", "", `{"token": 5}`).wantError(t, http.StatusBadRequest, "invalid")
	})
	t.Run("401 bad token", func(t *testing.T) {
		wantState(t, complete("rki_unknown", strongPassword), 401, "invalid")
	})
	t.Run("complete", func(t *testing.T) {
		r := complete(token, strongPassword).want(t, http.StatusOK)
		res := decode[kms.InviteCompletion](t, r)
		if res.User == nil || res.User.Username != "gina" || res.User.Status != "active" || !strings.HasPrefix(res.AccessToken, "rkt_") {
			t.Fatalf("invite-complete = %s", r.body)
		}
		if !bytes.Contains(r.body, []byte(`"accesstoken"`)) {
			t.Errorf("invite-complete body %s has no member accesstoken", r.body)
		}
		e.do(t, "GET", "/auth/users/gina", res.AccessToken, nil).want(t, http.StatusOK)
		e.login(t, "gina", strongPassword)
		// The token is used up.
		wantState(t, complete(token, strongPassword), 401, "invalid")
		wantState(t, validate(token), 401, "invalid")
	})
	t.Run("401 expired", func(t *testing.T) {
		late := invite(t, "hank")
		clock.Advance(7*24*time.Hour + time.Second)
		wantState(t, validate(late), 401, "expired")
		wantState(t, complete(late, strongPassword), 401, "expired")
	})
	t.Run("without a mailer", func(t *testing.T) {
		e := newEnv(t)
		res := decode[map[string]string](t, e.do(t, "POST", "/auth/user/invite", e.root, e.userBody("ivy")).want(t, http.StatusOK))
		tok := linkToken(t, res["loginUrl"], linkPrefix)
		e.do(t, "GET", "/auth/user/invite-validate?token="+url.QueryEscape(tok), "", nil).want(t, http.StatusOK)
	})
}

func TestPasswordResetOverHTTP(t *testing.T) {
	e, clock, mail := newMailEnv(t)
	_, old := e.createUser(t, "jill")
	session := e.login(t, "jill", old)
	const linkPrefix = testBaseURL + "/auth/basic/reset-password-complete?token="

	start := func(email string) reply {
		return e.do(t, "POST", "/auth/basic/reset-password-start", "", map[string]any{"email": email})
	}
	complete := func(token, password string) reply {
		return e.do(t, "POST", "/auth/basic/reset-password-complete", "", map[string]any{"token": token, "password": password})
	}

	var token string
	t.Run("start", func(t *testing.T) {
		known := start("jill@example.com").want(t, http.StatusOK)
		msg := mail.Next(t)
		if msg.To != "jill@example.com" {
			t.Fatalf("mail to %s", msg.To)
		}
		token = linkToken(t, mailedLink(t, msg, linkPrefix), linkPrefix)
		unknown := start("nobody@example.com").want(t, http.StatusOK)
		if !bytes.Equal(known.body, unknown.body) {
			t.Errorf("answers differ: %s and %s", known.body, unknown.body)
		}
		if body := known.object(t); body["message"] == "" || len(body) != 1 {
			t.Errorf("reset-password-start = %s, want {message}", known.body)
		}
		errs, _ := start("not an address").wantErrorBody(t, http.StatusBadRequest, "invalid")["errors"].(map[string]any)
		if errs["email"] == nil {
			t.Errorf("errors = %v, want email", errs)
		}
		e.do(t, "POST", "/auth/basic/reset-password-start", "", nil).wantError(t, http.StatusBadRequest, "invalid")
		mail.None(t)
	})
	t.Run("400 {}", func(t *testing.T) {
		complete(token, "weak").wantEmpty(t, http.StatusBadRequest)
		complete("rkr_unknown", strongPassword).wantEmpty(t, http.StatusBadRequest)
		complete("", "").wantEmpty(t, http.StatusBadRequest)
		e.do(t, "POST", "/auth/basic/reset-password-complete", "", `{"token":`).wantEmpty(t, http.StatusBadRequest)
		e.send(t, "POST", "/auth/basic/reset-password-complete", req{body: `{}`, contentType: "text/plain"}).wantEmpty(t, http.StatusBadRequest)
	})
	t.Run("GET checks the token without using it", func(t *testing.T) {
		for range 2 {
			body := e.do(t, "GET", "/auth/basic/reset-password-complete?token="+url.QueryEscape(token), "", nil).want(t, http.StatusOK).object(t)
			if body["state"] != "valid" || len(body) != 1 {
				t.Fatalf("GET reset-password-complete = %v, want {state: valid}", body)
			}
		}
		e.do(t, "GET", "/auth/basic/reset-password-complete?token=rkr_unknown", "", nil).wantEmpty(t, http.StatusBadRequest)
		e.do(t, "GET", "/auth/basic/reset-password-complete", "", nil).wantEmpty(t, http.StatusBadRequest)
	})
	t.Run("200 {}", func(t *testing.T) {
		complete(token, strongPassword).wantEmpty(t, http.StatusOK)
		e.do(t, "GET", "/auth/basic/reset-password-complete?token="+url.QueryEscape(token), "", nil).wantEmpty(t, http.StatusBadRequest)
		e.do(t, "POST", "/auth/basic/login", "", map[string]any{"username": "jill", "password": old}).wantError(t, http.StatusBadRequest, "invalid")
		e.login(t, "jill", strongPassword)
		// Access tokens from before the reset are revoked.
		e.do(t, "GET", "/auth/users/jill", session, nil).wantError(t, http.StatusUnauthorized, "unauthenticated")
		// The token is used up.
		complete(token, strongPassword+"2").wantEmpty(t, http.StatusBadRequest)
	})
	t.Run("400 {} expired", func(t *testing.T) {
		clock.Advance(2 * time.Minute) // one mail a minute per User
		start("jill@example.com").want(t, http.StatusOK)
		late := linkToken(t, mailedLink(t, mail.Next(t), linkPrefix), linkPrefix)
		clock.Advance(time.Hour + time.Second)
		complete(late, strongPassword+"3").wantEmpty(t, http.StatusBadRequest)
	})
	t.Run("without a mailer", func(t *testing.T) {
		e := newEnv(t)
		e.do(t, "POST", "/auth/basic/reset-password-start", "", map[string]any{"email": "jill@example.com"}).
			wantError(t, http.StatusBadRequest, "invalid")
	})
}

// TestPasswordResetStartThrottle: reset requests are throttled per
// address, known or not, and answer 429 past it.
func TestPasswordResetStartThrottle(t *testing.T) {
	clock := kmstest.NewClock()
	e := newEnv(t, withClock(clock), withMailer(kmstest.NewMailbox()))
	e.createUser(t, "ruth")
	start := func(email string) reply {
		return e.do(t, "POST", "/auth/basic/reset-password-start", "", map[string]any{"email": email})
	}
	var limited [][]byte
	for _, email := range []string{"ruth@example.com", "nobody@example.com"} {
		for range 5 {
			start(email).want(t, http.StatusOK)
		}
		r := start(email)
		if msg := r.wantError(t, http.StatusTooManyRequests, "rate_limited"); !strings.Contains(msg, "try again after") {
			t.Errorf("429 message = %q, want when to retry", msg)
		}
		limited = append(limited, r.body)
	}
	if !bytes.Equal(limited[0], limited[1]) {
		t.Errorf("429 answers differ for a known and an unknown address: %s and %s", limited[0], limited[1])
	}
	clock.Advance(16 * time.Minute)
	start("ruth@example.com").want(t, http.StatusOK)
}

// flushMailer is a Mailer that tells whether the answer of the request
// had been flushed when the mail went out.
type flushMailer struct {
	rec     *httptest.ResponseRecorder
	flushed chan bool
}

func (m *flushMailer) Send(_ context.Context, _ kms.Message) error {
	m.flushed <- m.rec.Flushed
	return nil
}

// TestPasswordResetStartFlushesFirst: the answer of a reset request, with
// its Content-Length, is flushed to the connection before the work behind
// it (the look-up and the mail) starts, even when the call is long over.
func TestPasswordResetStartFlushesFirst(t *testing.T) {
	m := &flushMailer{rec: httptest.NewRecorder(), flushed: make(chan bool, 1)}
	e := newEnv(t, withMailer(m))
	e.createUser(t, "ruth")
	r := httptest.NewRequest("POST", "/auth/basic/reset-password-start", strings.NewReader(`{"email":"ruth@example.com"}`))
	r.Header.Set("Content-Type", "application/json")
	e.srv.Config.Handler.ServeHTTP(m.rec, r)
	if m.rec.Code != http.StatusOK {
		t.Fatalf("reset-password-start = %d %s", m.rec.Code, m.rec.Body)
	}
	if got, want := m.rec.Header().Get("Content-Length"), strconv.Itoa(m.rec.Body.Len()); got != want {
		t.Errorf("Content-Length %q, want %s: a flushed answer without it is not whole", got, want)
	}
	select {
	case flushed := <-m.flushed:
		if !flushed {
			t.Error("the reset mail went out before the answer was flushed")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no mail was sent")
	}
}
