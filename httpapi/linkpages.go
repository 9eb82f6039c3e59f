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
	"github.com/ringkms/kms/internal/httpedge"
)

// The pages of the links that mails carry. An invitation's link is GET
// /auth/user/invite-validate?token=..., a password reset's GET
// /auth/basic/reset-password-complete?token=...; both answer JSON to a
// program. Opened in a browser (a request whose Accept prefers
// text/html), they answer a small page instead, with the status of the
// JSON answer: a form that sets the password through the interface
// itself (POST invite-complete or reset-password-complete, a path
// relative to the page, so that it works where the handler is mounted),
// or why the link cannot be used. The page's script reads the token from
// the page's own address: the page holds no token. Every value from the
// store is escaped by html/template; the page loads nothing, runs only
// its own script (a Content-Security-Policy with the script's hash), and
// may not be framed.

// linkPageScript sets the password from the form: it posts the token
// and the password as JSON to the form's data-complete, and shows the
// form's data-done when that answers 200, else the answer's message, or
// data-failed for an answer without one (a reset's, which tells nothing).
// It is static: its hash is in the page's Content-Security-Policy.
const linkPageScript = `
(() => {
  const form = document.getElementById("password");
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
    if (answer.ok) {
      form.hidden = true;
      note.textContent = form.dataset.done;
      return;
    }
    note.textContent = body.message || form.dataset.failed;
  });
})();
`

const linkPageStyle = `body{font-family:system-ui,sans-serif;max-width:34em;margin:3em auto;padding:0 1em;line-height:1.5}` +
	`label{display:block;margin:.8em 0}input{display:block;width:100%;padding:.4em;font:inherit}` +
	`button{padding:.5em 1.2em;font:inherit}#note{font-weight:bold}`

var linkPageTemplate = template.Must(template.New("link").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>{{.Title}}</title>
<style>` + linkPageStyle + `</style>
</head>
<body>
<h1>{{.Title}}</h1>
<p>{{.Message}}</p>
{{if .Form}}<form id="password" data-complete="{{.Form.Complete}}" data-done="{{.Form.Done}}" data-failed="{{.Form.Failed}}">
{{with .Form.Username}}<input type="text" name="username" value="{{.}}" autocomplete="username" hidden>
{{end}}<label>New password <input type="password" name="password" autocomplete="new-password" minlength="{{.Form.MinLength}}" required></label>
<label>The same password again <input type="password" name="again" autocomplete="new-password" minlength="{{.Form.MinLength}}" required></label>
<p>At least {{.Form.MinLength}} characters, and not a common password. No kind of character is required: a few words of your own make a good one.</p>
<button type="submit">Set my password</button>
</form>
<p id="note" role="status" aria-live="polite"></p>
<script>` + linkPageScript + `</script>
{{end}}</body>
</html>
`))

// linkPageCSP allows the page its own style and script, by hash, and
// calls to its own origin; nothing else.
var linkPageCSP = "default-src 'none'; style-src " + cspHash(linkPageStyle) + "; script-src " + cspHash(linkPageScript) +
	"; connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'"

func cspHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}

// linkPageData is what a link's page shows: a title, a message, and the
// form that sets the password, or none when the link cannot be used.
type linkPageData struct {
	Title, Message string
	Form           *passwordForm
}

// passwordForm is the form of a link's page: where it posts (relative to
// the page), what it says once done or refused without a message, and
// the User's name, for password managers.
type passwordForm struct {
	Complete, Done, Failed string
	Username               string
	MinLength              int
}

// page is an answer that is an HTML page rather than JSON, and its
// status; err, for a status that is an error, is the error it shows (for
// the request log).
type page struct {
	status int
	body   []byte
	err    error
}

// writePage writes p.
func (a *api) writePage(w http.ResponseWriter, r *http.Request, p *page) {
	if p.err != nil {
		_, code := statusOf(p.err)
		httpedge.NoteError(r, p.err, code)
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", linkPageCSP)
	h.Set("Vary", "Accept")
	h.Set("Content-Length", strconv.Itoa(len(p.body)))
	w.WriteHeader(p.status)
	w.Write(p.body)
}

// linkPage renders data as a page of status (err for an error's).
func linkPage(status int, err error, data linkPageData) *page {
	var buf bytes.Buffer
	if terr := linkPageTemplate.Execute(&buf, data); terr != nil {
		// Only a programming error gets here: the template is fixed.
		return &page{status: http.StatusInternalServerError, body: []byte("internal error\n"), err: terr}
	}
	return &page{status: status, body: buf.Bytes(), err: err}
}

// unusableLink is the page of a link that cannot be used (err), with the
// status of the JSON answer and hint, what to do then.
func unusableLink(err error, hint string) *page {
	status, _ := statusOf(err)
	msg := httpedge.Message(err, status)
	if status < 500 && status != http.StatusTooManyRequests {
		msg += ". " + hint
	}
	return linkPage(status, err, linkPageData{Title: "This link cannot be used", Message: msg})
}

// invitePage is the page of GET /auth/user/invite-validate for a browser:
// the invited User and the form that accepts the invitation.
func (a *api) invitePage(r *http.Request) *page {
	v, err := a.svc.ValidateInvite(r.Context(), r.URL.Query().Get("token"))
	if err != nil {
		return unusableLink(err, "Ask whoever invited you for a new invitation.")
	}
	u := v.User
	return linkPage(http.StatusOK, nil, linkPageData{
		Title:   "Accept your invitation",
		Message: "You are invited to ringkms as " + u.Username + " (" + u.DisplayName + ", " + u.Email + "). Choose your password to accept.",
		Form: &passwordForm{Complete: "invite-complete", Username: u.Username, MinLength: kms.PasswordMinLength,
			Done: "Your password is set. Sign in as " + u.Username + " (kmsctl login -user " + u.Username + ")."},
	})
}

// resetPage is the page of GET /auth/basic/reset-password-complete for a
// browser: the form that sets the new password.
func (a *api) resetPage(r *http.Request) *page {
	if err := a.svc.ValidatePasswordReset(r.Context(), r.URL.Query().Get("token")); err != nil {
		return unusableLink(err, "Ask for a new password reset.")
	}
	return linkPage(http.StatusOK, nil, linkPageData{
		Title:   "Choose a new password",
		Message: "Choose the new password of your ringkms account. It signs you out everywhere.",
		Form: &passwordForm{Complete: "reset-password-complete", MinLength: kms.PasswordMinLength,
			Done:   "Your password is set. Sign in with it.",
			Failed: "The password was not set: the link has expired or was used (ask for a new reset), or the password breaks the rules."},
	})
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
