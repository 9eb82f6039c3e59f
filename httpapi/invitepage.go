package httpapi

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"html/template"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/ringkms/kms"
)

// The invitation page. A mail's invitation link is GET
// /auth/user/invite-validate?token=..., which answers JSON to a program;
// opened in a browser (a request whose Accept prefers text/html), it
// answers a small page instead: the invitation's User and a form that
// sets its password through the interface itself (POST invite-complete,
// a path relative to the page, so that it works where the handler is
// mounted). The page's script reads the token from the page's own
// address: the page holds no token. Every value from the store is
// escaped by html/template; the page loads nothing, runs only its own
// script (a Content-Security-Policy with the script's hash), and may not
// be framed.

// invitePageScript completes the invitation from the form. It is static:
// its hash is in the page's Content-Security-Policy.
const invitePageScript = `
(() => {
  const form = document.getElementById("invite");
  const note = document.getElementById("note");
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const password = form.elements.password.value;
    if (password !== form.elements.again.value) {
      note.textContent = "The two passwords differ.";
      return;
    }
    const token = new URLSearchParams(window.location.search).get("token") || "";
    note.textContent = "Setting your password...";
    let answer;
    try {
      answer = await fetch(form.dataset.complete, {
        method: "POST", credentials: "omit", cache: "no-store",
        headers: {"Content-Type": "application/json", "Accept": "application/json"},
        body: JSON.stringify({token: token, password: password}),
      });
    } catch (err) {
      note.textContent = "The service cannot be reached: try again.";
      return;
    }
    const body = await answer.json().catch(() => ({}));
    if (answer.ok && body.user) {
      form.hidden = true;
      note.textContent = "Your password is set. Sign in as " + body.user.username + " (kmsctl login -user " + body.user.username + ").";
      return;
    }
    note.textContent = body.message || ("The service answered " + answer.status + ".");
  });
})();
`

const invitePageStyle = `body{font-family:system-ui,sans-serif;max-width:34em;margin:3em auto;padding:0 1em;line-height:1.5}` +
	`label{display:block;margin:.8em 0}input{display:block;width:100%;padding:.4em;font:inherit}` +
	`button{padding:.5em 1.2em;font:inherit}#note{font-weight:bold}`

var invitePageTemplate = template.Must(template.New("invite").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>{{.Title}}</title>
<style>` + invitePageStyle + `</style>
</head>
<body>
<h1>{{.Title}}</h1>
{{if .User}}<p>You are invited to ringkms as <strong>{{.User.Username}}</strong> ({{.User.DisplayName}}, {{.User.Email}}). Choose your password to accept.</p>
<form id="invite" data-complete="invite-complete">
<input type="text" name="username" value="{{.User.Username}}" autocomplete="username" hidden>
<label>Password <input type="password" name="password" autocomplete="new-password" minlength="{{.MinLength}}" required></label>
<label>The same password again <input type="password" name="again" autocomplete="new-password" minlength="{{.MinLength}}" required></label>
<p>At least {{.MinLength}} characters, and not a common password. No kind of character is required: a few words of your own make a good one.</p>
<button type="submit">Set my password</button>
</form>
<p id="note" role="status" aria-live="polite"></p>
<script>` + invitePageScript + `</script>
{{else}}<p>{{.Message}}</p>
{{with .Hint}}<p>{{.}}</p>
{{end}}{{end}}</body>
</html>
`))

// invitePageCSP allows the page its own style and script, by hash, and
// calls to its own origin; nothing else.
var invitePageCSP = "default-src 'none'; style-src " + cspHash(invitePageStyle) + "; script-src " + cspHash(invitePageScript) +
	"; connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'"

func cspHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}

// invitePageData is what the page shows: the invited User and the form,
// or, with no User, why the link cannot be used.
type invitePageData struct {
	Title     string
	User      *kms.User
	MinLength int
	Message   string
	Hint      string
}

// page is an answer that is an HTML page rather than JSON, and its
// status; err, for a status that is an error, is the error it shows (for
// the request log).
type page struct {
	status int
	body   []byte
	csp    string
	err    error
}

// writePage writes p.
func (a *api) writePage(w http.ResponseWriter, r *http.Request, p *page) {
	if p.err != nil {
		_, code := statusOf(p.err)
		noteError(r, p.err, code)
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", p.csp)
	h.Set("Vary", "Accept")
	h.Set("Content-Length", strconv.Itoa(len(p.body)))
	w.WriteHeader(p.status)
	w.Write(p.body)
}

// invitePage is the page of GET /auth/user/invite-validate for a browser:
// the form of a valid invitation, or why the link cannot be used, with
// the status the JSON answer would have.
func (a *api) invitePage(r *http.Request) *page {
	data := invitePageData{Title: "Accept your invitation", MinLength: kms.PasswordMinLength}
	p := &page{status: http.StatusOK, csp: invitePageCSP}
	v, err := a.svc.ValidateInvite(r.Context(), r.URL.Query().Get("token"))
	if err == nil {
		data.User = v.User
	} else {
		p.err = err
		p.status, _ = statusOf(err)
		data.Title = "This invitation link cannot be used"
		data.Message = messageOf(err, p.status)
		if e := kms.AsError(err); e != nil && (e.State == kms.InviteInvalid || e.State == kms.InviteExpired) {
			data.Hint = "Ask whoever invited you for a new invitation."
		}
	}
	var buf bytes.Buffer
	if err := invitePageTemplate.Execute(&buf, data); err != nil {
		// Only a programming error gets here: the template is fixed.
		p.err, p.status = err, http.StatusInternalServerError
		buf.Reset()
		buf.WriteString("internal error\n")
	}
	p.body = buf.Bytes()
	return p
}

// prefersHTML reports whether the request's Accept header ranks
// text/html above application/json, as a browser's does
// ("text/html,...,*/*;q=0.8"); with no Accept, or a tie (curl's "*/*"),
// the answer is JSON.
func prefersHTML(r *http.Request) bool {
	html, json := acceptQ(r, "text", "html"), acceptQ(r, "application", "json")
	return html > json
}

// acceptQ is the quality the Accept header gives the media type
// typ/sub: that of its most specific matching range, 0 for none.
func acceptQ(r *http.Request, typ, sub string) float64 {
	best, q := -1, 0.0
	for _, line := range r.Header.Values("Accept") {
		for _, part := range strings.Split(line, ",") {
			mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err != nil {
				continue
			}
			t, s, _ := strings.Cut(mt, "/")
			rank := -1
			switch {
			case t == typ && s == sub:
				rank = 2
			case t == typ && s == "*":
				rank = 1
			case t == "*" && s == "*":
				rank = 0
			}
			if rank <= best {
				continue
			}
			v := 1.0
			if qs, ok := params["q"]; ok {
				if v, err = strconv.ParseFloat(qs, 64); err != nil || v < 0 || v > 1 {
					continue
				}
			}
			best, q = rank, v
		}
	}
	return q
}
