package kms_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/kmstest"
)

// userEnv is an env with a settable clock, a fake mailer and its store.
type userEnv struct {
	*env
	st    kms.Store
	clock *kmstest.Clock
	mail  *kmstest.Mailbox
}

const testBaseURL = "https://kms.example.com/"

func newUserEnv(tb testing.TB, change ...func(*kms.Options)) *userEnv {
	tb.Helper()
	clock := kmstest.ClockAt(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
	mail := kmstest.NewMailbox()
	opts := kms.Options{MasterKey: kms.GenerateMasterKey(), Now: clock.Now, Mailer: mail, BaseURL: testBaseURL}
	for _, c := range change {
		c(&opts)
	}
	st := kmstest.MemoryStore(tb)
	return &userEnv{env: newEnvOn(tb, st, opts), st: st, clock: clock, mail: mail}
}

func (e *userEnv) advance(d time.Duration) { e.clock.Advance(d) }

// userInput is a valid UserInput for name.
func userInput(name string, flags kms.Flags) kms.UserInput {
	return kms.UserInput{Username: name, Email: name + "@example.com", FirstName: "First " + name, LastName: "Last", Flags: flags}
}

// createUser creates an active User in the root Account and returns it
// with its generated password.
func (e *userEnv) createUser(tb testing.TB, name string, flags kms.Flags) (*kms.User, string) {
	tb.Helper()
	res, err := e.svc.CreateUser(e.root, userInput(name, flags))
	if err != nil {
		tb.Fatalf("CreateUser(%q) = %v", name, err)
	}
	return res.User, res.Password
}

// signIn logs in and returns a context acting with the access token, and
// the token.
func (e *userEnv) signIn(tb testing.TB, name, password string) (context.Context, string) {
	tb.Helper()
	res, err := e.svc.Login(context.Background(), kms.LoginInput{Username: name, Password: password})
	if err != nil {
		tb.Fatalf("Login(%q) = %v", name, err)
	}
	return e.actingWith(tb, res.AccessToken), res.AccessToken
}

// actingWith authenticates a secret and returns a context that carries its
// principal.
func (e *userEnv) actingWith(tb testing.TB, secret string) context.Context {
	tb.Helper()
	p, err := e.svc.Authenticate(context.Background(), secret)
	if err != nil {
		tb.Fatalf("Authenticate(token) = %v", err)
	}
	return kms.WithPrincipal(context.Background(), p)
}

// storeHolds reports whether any key or value of the store contains s.
func storeHolds(tb testing.TB, st kms.Store, s string) bool {
	tb.Helper()
	found := false
	err := st.View(context.Background(), func(tx kms.Txn) error {
		return tx.Scan(kms.ScanOptions{}, func(k, v []byte) (bool, error) {
			found = bytes.Contains(k, []byte(s)) || bytes.Contains(v, []byte(s))
			return !found, nil
		})
	})
	if err != nil {
		tb.Fatal(err)
	}
	return found
}

// wantError checks the kind, and the state when given, of an error.
func wantError(tb testing.TB, what string, err error, kind kms.Kind, state string) *kms.Error {
	tb.Helper()
	wantKind(tb, what, err, kind)
	e := kms.AsError(err)
	if e == nil || e.State != state {
		tb.Fatalf("%s = %#v, want state %q", what, e, state)
	}
	return e
}
