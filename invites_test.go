package kms_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/kmstest"
)

func TestInvite(t *testing.T) {
	e := newUserEnv(t)
	bg := context.Background()
	in := kms.InviteInput(userInput("Olga", kms.Flags{"keyring.x.read": true}))
	res, err := e.svc.Invite(e.root, in)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.LoginURL, "https://kms.example.com/auth/user/invite-validate?token=rki_") {
		t.Fatalf("loginUrl = %q", res.LoginURL)
	}
	msg := e.mail.Next(t)
	if msg.To != "Olga@example.com" || !strings.Contains(msg.Body, res.LoginURL+"\n") {
		t.Fatalf("mail = %+v, want one to Olga@example.com with the link %s", msg, res.LoginURL)
	}
	token := kmstest.LinkToken(t, res.LoginURL)

	v, err := e.svc.ValidateInvite(bg, token)
	if err != nil || v.State != "success" || v.User.Username != "Olga" || v.User.Status != kms.UserInvited {
		t.Fatalf("ValidateInvite = %+v, %v", v, err)
	}
	got, err := e.svc.GetUser(e.root, kms.UserRef{Value: "olga"})
	if err != nil || got.Status != kms.UserInvited {
		t.Fatalf("GetUser of the invitee = %+v, %v", got, err)
	}

	_, err = e.svc.CompleteInvite(bg, token, "weak")
	ke := wantError(t, "CompleteInvite with a weak password", err, kms.KindInvalid, "malformed-password")
	if check, ok := ke.Details.(kms.PasswordCheck); !ok || check.IsValid || check.Details.NewPasswordLength != 4 {
		t.Fatalf("CompleteInvite details = %#v, want the PasswordCheck", ke.Details)
	}
	_, err = e.svc.CompleteInvite(bg, "rki_nope", "weak")
	wantError(t, "CompleteInvite with a bad token and a weak password", err, kms.KindInvalid, "malformed-password")

	const pw = "Olga-pass1"
	done, err := e.svc.CompleteInvite(bg, token, pw)
	if err != nil || done.User.Status != kms.UserActive || done.User.Username != "Olga" || !strings.HasPrefix(done.AccessToken, "rkt_") {
		t.Fatalf("CompleteInvite = %+v, %v", done, err)
	}
	if p := kms.PrincipalFrom(e.actingWith(t, done.AccessToken)); p.ID != done.User.ID || !p.Can("keyring.x.read") {
		t.Fatalf("principal of the access token = %+v", p)
	}
	e.signIn(t, "olga", pw)

	// The token is single-use.
	_, err = e.svc.CompleteInvite(bg, token, pw)
	wantError(t, "CompleteInvite again", err, kms.KindUnauthenticated, "invalid")
	_, err = e.svc.ValidateInvite(bg, token)
	wantError(t, "ValidateInvite after completion", err, kms.KindUnauthenticated, "invalid")

	for _, bad := range []string{"", "rki_unknown", "rk_" + token[4:], token + "x"} {
		_, err := e.svc.ValidateInvite(bg, bad)
		wantError(t, "ValidateInvite("+bad+")", err, kms.KindUnauthenticated, "invalid")
	}

	t.Run("expired", func(t *testing.T) {
		res, err := e.svc.Invite(e.root, kms.InviteInput(userInput("pat", nil)))
		if err != nil {
			t.Fatal(err)
		}
		token := kmstest.LinkToken(t, res.LoginURL)
		e.advance(7*24*time.Hour - time.Second)
		if _, err := e.svc.ValidateInvite(bg, token); err != nil {
			t.Fatalf("ValidateInvite before expiry = %v", err)
		}
		e.advance(time.Second)
		_, err = e.svc.ValidateInvite(bg, token)
		wantError(t, "ValidateInvite after expiry", err, kms.KindUnauthenticated, "expired")
		_, err = e.svc.CompleteInvite(bg, token, pw)
		wantError(t, "CompleteInvite after expiry", err, kms.KindUnauthenticated, "expired")
	})

	t.Run("taken and denied", func(t *testing.T) {
		_, err := e.svc.Invite(e.root, kms.InviteInput(userInput("OLGA", nil)))
		if ke := wantError(t, "Invite of a taken username", err, kms.KindConflict, ""); ke.Fields["username"] == "" {
			t.Fatalf("fields = %v", ke.Fields)
		}
		_, err = e.svc.Invite(e.as(t, kms.Flags{kms.FlagUsersRead: true}), kms.InviteInput(userInput("quinn", nil)))
		wantKind(t, "Invite without users.write", err, kms.KindPermissionDenied)
		_, err = e.svc.Invite(e.root, kms.InviteInput{Username: "quinn", Email: "quinn@example.com"})
		wantKind(t, "Invite without names", err, kms.KindInvalid)
	})
}

func TestInviteWithoutMailer(t *testing.T) {
	e := newUserEnv(t, func(o *kms.Options) { o.Mailer = nil })
	res, err := e.svc.Invite(e.root, kms.InviteInput(userInput("rob", nil)))
	if err != nil || !strings.Contains(res.LoginURL, "token=rki_") {
		t.Fatalf("Invite = %+v, %v", res, err)
	}
	var mailed any = "no record"
	for _, a := range records(t, e.st) {
		if a.Action == "user.invite" {
			mailed = a.Props["mailed"]
		}
	}
	if mailed != false {
		t.Fatalf("user.invite record says mailed = %v, want false", mailed)
	}
	_, err = e.svc.StartPasswordReset(context.Background(), "rob@example.com")
	wantKind(t, "StartPasswordReset without a mailer", err, kms.KindInvalid)
}

func TestPasswordReset(t *testing.T) {
	e := newUserEnv(t)
	bg := context.Background()
	_, oldPw := e.createUser(t, "sam", nil)
	_, oldToken := e.signIn(t, "sam", oldPw)

	unknown, err := e.svc.StartPasswordReset(bg, "nobody@example.com")
	if err != nil {
		t.Fatal(err)
	}
	known, err := e.svc.StartPasswordReset(bg, "SAM@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if known != unknown || known != "if the address is known, a reset link has been sent" {
		t.Fatalf("StartPasswordReset = %q (known), %q (unknown); want the same", known, unknown)
	}
	msg := e.mail.Next(t)
	if msg.To != "sam@example.com" {
		t.Fatalf("mail = %+v, want one to sam@example.com", msg)
	}
	e.mail.None(t)
	token := resetToken(t, msg)

	const newPw = "sam has a new passphrase" // no upper-case letter, digit or special character: none is required
	err = e.svc.CompletePasswordReset(bg, "rkr_unknown", newPw)
	wantError(t, "CompletePasswordReset with a bad token", err, kms.KindInvalid, "")
	err = e.svc.CompletePasswordReset(bg, token, "Password1") // a common password
	wantError(t, "CompletePasswordReset with a weak password", err, kms.KindInvalid, "malformed-password")
	if err := e.svc.CompletePasswordReset(bg, token, newPw); err != nil {
		t.Fatalf("CompletePasswordReset = %v", err)
	}
	_, err = e.svc.Authenticate(bg, oldToken)
	wantKind(t, "Authenticate with a token from before the reset", err, kms.KindUnauthenticated)
	_, err = e.svc.Login(bg, kms.LoginInput{Username: "sam", Password: oldPw})
	wantKind(t, "Login with the old password", err, kms.KindInvalid)
	e.signIn(t, "sam", newPw)
	err = e.svc.CompletePasswordReset(bg, token, "Sam-other-pass2")
	wantKind(t, "CompletePasswordReset again", err, kms.KindInvalid)

	t.Run("expired", func(t *testing.T) {
		if _, err := e.svc.StartPasswordReset(bg, "sam@example.com"); err != nil {
			t.Fatal(err)
		}
		e.advance(2 * time.Minute) // past the least time between two mails
		if _, err := e.svc.StartPasswordReset(bg, "sam@example.com"); err != nil {
			t.Fatal(err)
		}
		token := resetToken(t, e.mail.Next(t))
		e.mail.None(t) // none within a minute of the last

		e.advance(time.Hour)
		err := e.svc.CompletePasswordReset(bg, token, newPw)
		wantError(t, "CompletePasswordReset after expiry", err, kms.KindInvalid, "")
	})
}

// resetToken returns the token of the link in a reset mail.
func resetToken(tb testing.TB, msg kms.Message) string {
	tb.Helper()
	for _, f := range strings.Fields(msg.Body) {
		if strings.HasPrefix(f, testBaseURL+"auth/basic/reset-password-complete?token=rkr_") {
			return kmstest.LinkToken(tb, f)
		}
	}
	tb.Fatalf("reset mail has no link: %q", msg.Body)
	return ""
}

func TestPasswordResetThrottle(t *testing.T) {
	e := newUserEnv(t)
	e.createUser(t, "sam", nil)
	start := func(ctx context.Context, email string) error {
		_, err := e.svc.StartPasswordReset(ctx, email)
		return err
	}
	bg := context.Background()

	t.Run("per address, known or not", func(t *testing.T) {
		for _, email := range []string{"sam@example.com", "nobody@example.com"} {
			for i := range 5 {
				if err := start(kms.WithClientAddr(bg, fmt.Sprintf("192.0.2.%d", i)), email); err != nil {
					t.Fatalf("StartPasswordReset(%s) #%d = %v", email, i+1, err)
				}
			}
			err := start(kms.WithClientAddr(bg, "192.0.2.99"), strings.ToUpper(email))
			wantKind(t, "StartPasswordReset after 5 requests for "+email, err, kms.KindRateLimited)
			if !strings.Contains(err.Error(), "try again after") {
				t.Fatalf("StartPasswordReset = %q, want when to retry", err)
			}
		}
		e.advance(16 * time.Minute)
		if err := start(bg, "sam@example.com"); err != nil {
			t.Fatalf("StartPasswordReset after the lockout = %v", err)
		}
	})

	t.Run("per client address", func(t *testing.T) {
		asker := kms.WithClientAddr(bg, "198.51.100.7")
		for i := range 20 {
			if err := start(asker, fmt.Sprintf("guess%d@example.com", i)); err != nil {
				t.Fatalf("StartPasswordReset #%d = %v", i+1, err)
			}
		}
		wantKind(t, "StartPasswordReset from the address after 20 requests", start(asker, "other@example.com"), kms.KindRateLimited)
		if err := start(kms.WithClientAddr(bg, "198.51.100.8"), "other@example.com"); err != nil {
			t.Fatalf("StartPasswordReset from another address = %v", err)
		}
		e.advance(16 * time.Minute)
		if err := start(asker, "other@example.com"); err != nil {
			t.Fatalf("StartPasswordReset from the address after its lockout = %v", err)
		}
	})

	t.Run("logins are not throttled by resets", func(t *testing.T) {
		e.advance(time.Hour)
		asker := kms.WithClientAddr(bg, "203.0.113.5")
		for i := range 20 {
			start(asker, fmt.Sprintf("again%d@example.com", i))
		}
		_, pw := e.createUser(t, "tia", nil)
		if _, err := e.svc.Login(asker, kms.LoginInput{Username: "tia", Password: pw}); err != nil {
			t.Fatalf("Login from an address that asked 20 resets = %v", err)
		}
	})
}

// TestPasswordResetWaitsForTheAnswer: with WithAnswerNotice, the work
// behind a reset request (look-up, token, mail) starts once the caller
// says the answer is sent, not when the call ends: an HTTP answer may
// still wait for a processor after its handler returned.
func TestPasswordResetWaitsForTheAnswer(t *testing.T) {
	e := newUserEnv(t)
	e.createUser(t, "sam", nil)
	ctx, cancel := context.WithCancel(context.Background())
	ctx, sent := kms.WithAnswerNotice(ctx)
	if _, err := e.svc.StartPasswordReset(ctx, "sam@example.com"); err != nil {
		t.Fatal(err)
	}
	cancel() // the call is over; its answer is not sent yet
	time.Sleep(40 * time.Millisecond)
	e.mail.None(t) // before the answer was sent
	sent()
	sent() // harmless twice
	if msg := e.mail.Next(t); msg.To != "sam@example.com" {
		t.Fatalf("mail to %s, want sam@example.com", msg.To)
	}
}
