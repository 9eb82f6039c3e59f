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
)

// browserAccept is what a browser sends when it opens a link, and
// htmlType the Content-Type of a page.
const (
	browserAccept = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
	htmlType      = "text/html; charset=utf-8"
)

// TestInvitePage: the invitation link of a mail, opened in a browser (an
// Accept that prefers text/html), answers a page, not JSON: the invited
// User, every value escaped, and a form whose target, relative to the
// page, completes the invitation through the interface (here with a
// passphrase of lower-case words); the page holds no token, runs only its
// own script (its hash is in the Content-Security-Policy) and may not be
// framed. A program's Accept, or none, still gets JSON. Once used, the
// link answers a page that says it cannot be used, with the status of
// the JSON answer.
func TestInvitePage(t *testing.T) {
	e := newEnv(t)
	user := e.userBody("lee")
	user["firstName"], user["lastName"] = `<script>alert("first")</script>`, `O'Brien & "Co"`
	inv := decode[map[string]string](t, e.do(t, "POST", "/auth/user/invite", e.root, user).want(t, http.StatusOK))
	link, err := url.Parse(inv["loginUrl"])
	if err != nil || link.Path != "/auth/user/invite-validate" {
		t.Fatalf("loginUrl %q: want the invite-validate link", inv["loginUrl"])
	}
	path, token := link.Path+"?"+link.RawQuery, link.Query().Get("token")
	get := func(accept string) reply {
		t.Helper()
		rq := req{}
		if accept != "" {
			rq.header = http.Header{"Accept": {accept}}
		}
		return e.send(t, http.MethodGet, path, rq)
	}

	for _, accept := range []string{"", "application/json", "*/*", "application/json, text/html;q=0.9", "text/html;q=0.5, application/*", "text/plain"} {
		get(accept).want(t, http.StatusOK) // JSON
	}

	r := get(browserAccept).wantType(t, http.StatusOK, htmlType)
	page := string(r.body)
	for _, want := range []string{`<form id="invite"`, "lee", "lee@example.com", "&lt;script&gt;alert(&#34;first&#34;)&lt;/script&gt;", "O&#39;Brien &amp; &#34;Co&#34;"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s:\n%s", want, page)
		}
	}
	if strings.Contains(page, `<script>alert`) || strings.Contains(page, token) {
		t.Errorf("the page holds a value unescaped, or the token:\n%s", page)
	}
	scripts := regexp.MustCompile(`(?s)<script>(.*?)</script>`).FindAllStringSubmatch(page, -1)
	if len(scripts) != 1 {
		t.Fatalf("the page has %d scripts, want its own", len(scripts))
	}
	sum := sha256.Sum256([]byte(scripts[0][1]))
	csp := r.header.Get("Content-Security-Policy")
	for _, want := range []string{"script-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'", "default-src 'none'", "connect-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("Content-Security-Policy %q lacks %s", csp, want)
		}
	}
	for name, want := range map[string]string{"Cache-Control": "no-store", "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer", "X-Content-Type-Options": "nosniff"} {
		if got := r.header.Get(name); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}

	// What the page's script does on submit: POST {token, password} as
	// JSON to the form's target, resolved against the page's address.
	m := regexp.MustCompile(`data-complete="([^"]+)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("the form names no target:\n%s", page)
	}
	pageURL, _ := url.Parse(e.srv.URL + path)
	target, err := pageURL.Parse(m[1])
	if err != nil || target.Host != pageURL.Host {
		t.Fatalf("the form's target %q resolves to %v, %v; want a path of the service", m[1], target, err)
	}
	done := decode[kms.InviteCompletion](t, e.do(t, http.MethodPost, target.Path, "", map[string]any{"token": token, "password": "correct horse battery staple"}).want(t, http.StatusOK))
	if done.User == nil || done.User.Username != "lee" || done.User.Status != kms.UserActive {
		t.Fatalf("completing through the form's target = %+v", done)
	}
	e.do(t, "POST", "/auth/basic/login", "", map[string]any{"username": "lee", "password": "correct horse battery staple"}).want(t, http.StatusOK)

	r = get(browserAccept).wantType(t, http.StatusUnauthorized, htmlType)
	if !strings.Contains(string(r.body), "cannot be used") || !strings.Contains(string(r.body), "Ask whoever invited you") || strings.Contains(string(r.body), "<form") {
		t.Errorf("a used link in a browser = %s, want a page saying it cannot be used", r.body)
	}
	if body := get("application/json").wantErrorBody(t, http.StatusUnauthorized, "unauthenticated"); body["state"] != "invalid" {
		t.Errorf("a used link, as JSON: %v, want state invalid", body)
	}
}
