package httpapi_test

import (
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/kmstest"
)

// browserAccept is what a browser sends when it opens a link, and
// htmlType the Content-Type of a page.
const (
	browserAccept = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
	htmlType      = "text/html; charset=utf-8"
)

// linkPage is a link of a mail (its path and query, and its token), as
// the tests open it.
type linkPage struct {
	e           *env
	path, token string
}

// openLink parses the link of a mail, on the test server.
func (e *env) openLink(t *testing.T, link string) linkPage {
	t.Helper()
	u, err := url.Parse(link)
	if err != nil || u.Query().Get("token") == "" {
		t.Fatalf("link %q: want one with a token", link)
	}
	return linkPage{e, u.Path + "?" + u.RawQuery, u.Query().Get("token")}
}

// get opens the link with accept as its Accept header (none when empty).
func (l linkPage) get(t *testing.T, accept string) reply {
	t.Helper()
	rq := req{}
	if accept != "" {
		rq.header = http.Header{"Accept": {accept}}
	}
	return l.e.send(t, http.MethodGet, l.path, rq)
}

// page opens the link as a browser does, wants a page of status, and
// checks what every page of a link holds: no token, no script but its
// own (whose hash the Content-Security-Policy names), the headers that
// keep it out of caches and frames.
func (l linkPage) page(t *testing.T, status int) string {
	t.Helper()
	r := l.get(t, browserAccept).wantType(t, status, htmlType)
	page := string(r.body)
	if strings.Contains(page, l.token) {
		t.Errorf("the page holds the token:\n%s", page)
	}
	scripts := regexp.MustCompile(`(?s)<script>(.*?)</script>`).FindAllStringSubmatch(page, -1)
	csp := r.header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "connect-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("Content-Security-Policy %q lacks %s", csp, want)
		}
	}
	for _, s := range scripts {
		sum := sha256.Sum256([]byte(s[1]))
		if !strings.Contains(csp, "script-src 'sha256-"+base64.StdEncoding.EncodeToString(sum[:])+"'") {
			t.Errorf("Content-Security-Policy %q does not allow the page's script", csp)
		}
	}
	if strings.Contains(page, "<form") != (len(scripts) == 1) || len(scripts) > 1 {
		t.Errorf("the page has %d scripts: want its own with its form, none without", len(scripts))
	}
	for name, want := range map[string]string{"Cache-Control": "no-store", "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer", "X-Content-Type-Options": "nosniff"} {
		if got := r.header.Get(name); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
	return page
}

// submit does what the script of the page does on submit: it posts the
// token and password as JSON to the form's target, resolved against the
// page's address.
func (l linkPage) submit(t *testing.T, page, password string) reply {
	t.Helper()
	m := regexp.MustCompile(`data-complete="([^"]+)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("the page's form names no target:\n%s", page)
	}
	pageURL, _ := url.Parse(l.e.srv.URL + l.path)
	target, err := pageURL.Parse(m[1])
	if err != nil || target.Host != pageURL.Host {
		t.Fatalf("the form's target %q resolves to %v, %v; want a path of the service", m[1], target, err)
	}
	return l.e.do(t, http.MethodPost, target.Path, "", map[string]any{"token": l.token, "password": password})
}

// TestInvitePage: the invitation link of a mail, opened in a browser (an
// Accept that prefers text/html), answers a page, not JSON: the invited
// User, every value escaped, and a form whose target, relative to the
// page, completes the invitation through the interface (here with a
// passphrase of lower-case words). A program's Accept, or none, still
// gets JSON. Once used, the link answers a page that says it cannot be
// used, with the status of the JSON answer.
func TestInvitePage(t *testing.T) {
	e := newEnv(t)
	user := e.userBody("lee")
	user["firstName"], user["lastName"] = `<script>alert("first")</script>`, `O'Brien & "Co"`
	inv := decode[map[string]string](t, e.do(t, "POST", "/auth/user/invite", e.root, user).want(t, http.StatusOK))
	l := e.openLink(t, inv["loginUrl"])
	if !strings.HasPrefix(l.path, "/auth/user/invite-validate?") {
		t.Fatalf("loginUrl %q: want the invite-validate link", inv["loginUrl"])
	}
	for _, accept := range []string{"", "application/json", "*/*", "application/json, text/html;q=0.9", "text/html;q=0.5, application/*", "text/plain"} {
		l.get(t, accept).want(t, http.StatusOK) // JSON
	}

	page := l.page(t, http.StatusOK)
	for _, want := range []string{`<form id="password"`, "lee", "lee@example.com", "&lt;script&gt;alert(&#34;first&#34;)&lt;/script&gt;", "O&#39;Brien &amp; &#34;Co&#34;"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s:\n%s", want, page)
		}
	}
	if strings.Contains(page, `<script>alert`) {
		t.Errorf("the page holds a value unescaped:\n%s", page)
	}
	done := decode[kms.InviteCompletion](t, l.submit(t, page, "correct horse battery staple").want(t, http.StatusOK))
	if done.User == nil || done.User.Username != "lee" || done.User.Status != kms.UserActive {
		t.Fatalf("completing through the form's target = %+v", done)
	}
	e.do(t, "POST", "/auth/basic/login", "", map[string]any{"username": "lee", "password": "correct horse battery staple"}).want(t, http.StatusOK)

	if page := l.page(t, http.StatusUnauthorized); !strings.Contains(page, "cannot be used") || !strings.Contains(page, "Ask whoever invited you") {
		t.Errorf("a used link in a browser = %s, want a page saying it cannot be used", page)
	}
	if body := l.get(t, "application/json").wantErrorBody(t, http.StatusUnauthorized, "unauthenticated"); body["state"] != "invalid" {
		t.Errorf("a used link, as JSON: %v, want state invalid", body)
	}
}

// TestResetPage: the link of a password reset's mail, opened in a
// browser, answers a page whose form sets the new password through the
// interface; a program still gets JSON; once used, the link answers a
// page that says it cannot be used, with the 400 of the JSON answer.
func TestResetPage(t *testing.T) {
	mail := kmstest.NewMailbox()
	e := newEnv(t, withMailer(mail))
	e.do(t, "POST", "/auth/users", e.root, e.userBody("sam")).want(t, http.StatusOK)
	e.do(t, "POST", "/auth/basic/reset-password-start", "", map[string]any{"email": "sam@example.com"}).want(t, http.StatusOK)
	l := e.openLink(t, mailedLink(t, mail.Next(t), testBaseURL+"/auth/basic/reset-password-complete?token="))
	l.get(t, "").want(t, http.StatusOK) // JSON

	page := l.page(t, http.StatusOK)
	l.submit(t, page, "sam chose a passphrase").want(t, http.StatusOK)
	e.do(t, "POST", "/auth/basic/login", "", map[string]any{"username": "sam", "password": "sam chose a passphrase"}).want(t, http.StatusOK)

	if page := l.page(t, http.StatusBadRequest); !strings.Contains(page, "cannot be used") || !strings.Contains(page, "Ask for a new password reset") {
		t.Errorf("a used link in a browser = %s, want a page saying it cannot be used", page)
	}
	if body := l.get(t, "application/json").want(t, http.StatusBadRequest); string(body.body) != "{}\n" {
		t.Errorf("a used link, as JSON: %s, want {}", body.body)
	}
}
