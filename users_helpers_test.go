package kms_test

import (
	"bytes"
	"context"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/kmstest"
)

// fakeMailer captures the messages it is asked to send.
type fakeMailer struct {
	mu   sync.Mutex
	msgs []kms.Message
	sent chan kms.Message // every message, also; buffered
}

func newFakeMailer() *fakeMailer { return &fakeMailer{sent: make(chan kms.Message, 100)} }

func (m *fakeMailer) Send(_ context.Context, msg kms.Message) error {
	m.mu.Lock()
	m.msgs = append(m.msgs, msg)
	m.mu.Unlock()
	m.sent <- msg
	return nil
}

func (m *fakeMailer) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.msgs)
}

// wait returns the next message, failing the test when none comes (the
// reset mail is sent in the background).
func (m *fakeMailer) wait(tb testing.TB) kms.Message {
	tb.Helper()
	select {
	case msg := <-m.sent:
		return msg
	case <-time.After(30 * time.Second):
		tb.Fatal("no mail was sent")
		return kms.Message{}
	}
}

// userEnv is an env with a settable clock, a fake mailer and its store.
type userEnv struct {
	*env
	st    kms.Store
	clock *kmstest.Clock
	mail  *fakeMailer
}

const testBaseURL = "https://kms.example.com/"

func newUserEnv(tb testing.TB, change ...func(*kms.Options)) *userEnv {
	tb.Helper()
	clock := kmstest.ClockAt(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
	mail := newFakeMailer()
	opts := kms.Options{MasterKey: kms.GenerateMasterKey(), Now: clock.Now, Mailer: mail, BaseURL: testBaseURL}
	for _, c := range change {
		c(&opts)
	}
	st := newMemStore(tb)
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

// tokenOf returns the token query parameter of a link.
func tokenOf(tb testing.TB, link string) string {
	tb.Helper()
	u, err := url.Parse(link)
	if err != nil {
		tb.Fatalf("link %q: %v", link, err)
	}
	tok := u.Query().Get("token")
	if tok == "" {
		tb.Fatalf("link %q has no token", link)
	}
	return tok
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
