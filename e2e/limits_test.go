package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/ringkms/kms"
)

// TestPlanLimits starts kmsd with plan limits and checks that creating past
// one answers 403 naming the maximum.
func TestPlanLimits(t *testing.T) {
	in := newInstance(t)
	p := in.start(t, "-max-keyrings", "1", "-max-accounts", "2", "-max-apikeys-per-account", "2", "-max-users", "1")
	v := newValidator(t)
	root := clientOf(p, t, v, in.bootstrap)
	bg := context.Background()
	check := func(what string, err error, max string) {
		t.Helper()
		e := kms.AsError(err)
		if e == nil || e.Kind != kms.KindLimit || !strings.Contains(e.Message, max) {
			t.Fatalf("%s past the limit = %v, want a 403 limit error naming %q", what, err, max)
		}
	}
	if _, err := root.CreateKeyRing(bg, kms.CreateKeyRingInput{Name: "one", KEM: "x25519"}); err != nil {
		t.Fatal(err)
	}
	_, err := root.CreateAsymKeyRing(bg, kms.CreateAsymKeyRingInput{Name: "two"})
	check("CreateAsymKeyRing", err, "at most 1 key rings")

	// The bootstrap Account is the first of two.
	acct, err := root.CreateAccount(bg, kms.AccountInput{UID: "second"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = root.CreateAccount(bg, kms.AccountInput{UID: "third"})
	check("CreateAccount", err, "at most 2 accounts")

	for range 2 {
		if _, err := root.CreateAPIKey(bg, kms.APIKeyInput{AccountID: acct.ID, Flags: kms.Flags{}}); err != nil {
			t.Fatal(err)
		}
	}
	_, err = root.CreateAPIKey(bg, kms.APIKeyInput{AccountID: acct.ID, Flags: kms.Flags{}})
	check("CreateAPIKey", err, "at most 2 API keys")

	if _, err := root.CreateUser(bg, kms.UserInput{Username: "u1", Email: "u1@example.com", FirstName: "U", LastName: "One"}); err != nil {
		t.Fatal(err)
	}
	_, err = root.Invite(bg, kms.InviteInput{Username: "u2", Email: "u2@example.com", FirstName: "U", LastName: "Two"})
	check("Invite", err, "at most 1 users")
	p.Stop(t)
}
