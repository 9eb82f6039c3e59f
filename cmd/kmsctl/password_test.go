package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/kmstest"
)

// linkRE finds the link of an invitation or reset mail.
var linkRE = regexp.MustCompile(`\S+\?token=\S+`)

// mailedLink returns the link of the next mail, which must go to to.
func mailedLink(t testing.TB, mb *kmstest.Mailbox, to string) string {
	t.Helper()
	msg := mb.Next(t)
	link := linkRE.FindString(msg.Body)
	if msg.To != to || link == "" {
		t.Fatalf("mail to %s, want %s, with a link:\n%s", msg.To, to, msg.Body)
	}
	return link
}

// TestInviteAndReset: a User accepts its invitation and resets its
// password with kmsctl, the link and the password read from standard
// input (never argv), and then signs in.
func TestInviteAndReset(t *testing.T) {
	mb := kmstest.NewMailbox()
	s := newServer(t, kms.Options{Mailer: mb})
	kmsctl(t, s.env, "", "user", "invite", "-email", "grace@example.com", "-first-name", "Grace", "-last-name", "Hopper",
		"-flag", "keyring.*.read", "grace").want(t, 0, "user invite")
	invite := mailedLink(t, mb, "grace@example.com")
	e := s.env.without("KMS_API_KEY") // no credential: the link is the proof

	// A password that breaks the rules is refused before any call, and
	// the invitation stands.
	r := kmsctl(t, e, invite+"\nweak\n", "user", "accept-invite").want(t, 1, "accept-invite with a weak password")
	if !strings.Contains(r.stderr, "the password has 4 characters: it needs at least 8") {
		t.Errorf("weak password: stderr %q", r.stderr)
	}
	r = kmsctl(t, e, invite+"\n", "user", "reset-password").want(t, 1, "reset-password with an invitation link")
	if !strings.Contains(r.stderr, "kmsctl user accept-invite") {
		t.Errorf("reset-password with an invitation link: stderr %q", r.stderr)
	}
	const first = "Grace-Hopper-1906"
	r = kmsctl(t, e, invite+"\n"+first+"\n", "user", "accept-invite").want(t, 0, "accept-invite")
	if !strings.Contains(r.stdout, "invitation accepted by:  grace") {
		t.Errorf("accept-invite printed:\n%s", r.stdout)
	}
	// Signed in, as after kmsctl login.
	r = kmsctl(t, e, "", "status").want(t, 0, "status after accept-invite")
	if !strings.Contains(r.stdout, "access token of grace") {
		t.Errorf("status after accept-invite:\n%s", r.stdout)
	}
	kmsctl(t, e, "", "ring", "list").want(t, 0, "ring list as grace")
	r = kmsctl(t, e, invite+"\n"+first+"\n", "user", "accept-invite").want(t, 1, "accept-invite twice")
	if !strings.Contains(r.stderr, "invalid invitation token (unauthenticated)") {
		t.Errorf("accept-invite twice: stderr %q", r.stderr)
	}

	// The reset: requested by address, completed with the mailed link.
	r = kmsctl(t, e, "", "user", "forgot-password", "grace@example.com").want(t, 0, "forgot-password")
	if !strings.Contains(r.stdout, "if the address is known, a reset link has been sent") {
		t.Errorf("forgot-password printed:\n%s", r.stdout)
	}
	reset := mailedLink(t, mb, "grace@example.com")
	r = kmsctl(t, e, reset+"\n", "user", "accept-invite").want(t, 1, "accept-invite with a reset link")
	if !strings.Contains(r.stderr, "kmsctl user reset-password") {
		t.Errorf("accept-invite with a reset link: stderr %q", r.stderr)
	}
	const second = "Amazing-Grace-1952"
	_, token, _ := strings.Cut(reset, "token=")
	r = kmsctl(t, e, token+"\n"+second+"\n", "user", "reset-password").want(t, 0, "reset-password with the token alone")
	if !strings.Contains(r.stdout, "password changed") {
		t.Errorf("reset-password printed:\n%s", r.stdout)
	}
	r = kmsctl(t, e, reset+"\n"+second+"\n", "user", "reset-password").want(t, 1, "reset-password twice")
	if !strings.Contains(r.stderr, "the reset link cannot be used") {
		t.Errorf("reset-password twice: stderr %q", r.stderr)
	}
	// The reset revoked the token accept-invite saved; the new password
	// signs in, the first no longer does.
	kmsctl(t, e, "", "ring", "list").want(t, 1, "ring list with the revoked token")
	kmsctl(t, e, first+"\n", "login", "-user", "grace").want(t, 1, "login with the first password")
	kmsctl(t, e, second+"\n", "login", "-user", "grace").want(t, 0, "login with the new password")
	kmsctl(t, e, "", "ring", "list").want(t, 0, "ring list after login")

	// Without a link on standard input, a usage of its own.
	r = kmsctl(t, e, "", "user", "accept-invite").want(t, 1, "accept-invite without input")
	if !strings.Contains(r.stderr, "no invitation link on standard input") {
		t.Errorf("accept-invite without input: stderr %q", r.stderr)
	}
}
