package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/ringkms/kms"
)

// TestInviteLinkInBrowser: the link that an invitation's mail carries,
// opened by a browser, answers kmsd's invitation page (not JSON), whose
// form's target, relative to the page, sets the User's password (a
// passphrase of lower-case words) and makes it active; opened again, the
// used link answers a page that says it cannot be used.
func TestInviteLinkInBrowser(t *testing.T) {
	in, _, _, root := serve(t)
	must[*kms.InviteResult](t, "Invite")(root.Invite(bg, kms.InviteInput{Username: "kit", Email: "kit@example.com", FirstName: "Kit", LastName: "Marlowe"}))
	link, token := in.waitMail(t, "kit@example.com", map[string]bool{}).link(t, "/auth/user/invite-validate")

	open := func() (int, string, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", link, nil)
		req.Header.Set("Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
	}
	status, ct, page := open()
	if status != http.StatusOK || ct != "text/html; charset=utf-8" || !strings.Contains(page, "Kit Marlowe") {
		t.Fatalf("the mailed link in a browser = %d %s:\n%s", status, ct, page)
	}
	m := regexp.MustCompile(`data-complete="([^"]+)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("the page has no form target:\n%s", page)
	}
	base, _ := url.Parse(link)
	target, err := base.Parse(m[1])
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]string{"token": token, "password": "kit has a passphrase"})
	resp, err := http.Post(target.String(), "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s (the page's form) = %d, want 200", target, resp.StatusCode)
	}
	if u := must[*kms.User](t, "GetUser")(root.GetUser(bg, kms.UserRef{Value: "kit"})); u.Status != kms.UserActive {
		t.Fatalf("the User after the page's form: %s, want active", u.Status)
	}
	if status, ct, page := open(); status != http.StatusUnauthorized || ct != "text/html; charset=utf-8" || !strings.Contains(page, "cannot be used") {
		t.Fatalf("the used link in a browser = %d %s:\n%s", status, ct, page)
	}
}
