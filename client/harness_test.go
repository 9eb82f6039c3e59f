package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"sync/atomic"
	"testing"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/client"
	"github.com/ringkms/kms/httpapi"
	"github.com/ringkms/kms/kmstest"
)

// env is a Service on an in-memory Badger store, served by the real
// httpapi handler over a real HTTP server, and a Client of it holding the
// root API key.
type env struct {
	store   kms.Store
	svc     *kms.Service
	srv     *httptest.Server
	c       *client.Client   // with the root API key (flag "*")
	rootCtx context.Context  // the root principal, for direct Service calls
	mail    *kmstest.Mailbox // what the Service mails
}

// newEnv starts an env; everything stops at the end of the test. With
// mount set, the handler is served under that prefix of a mux (as
// "/kms/"), and the client's base URL carries it.
func newEnv(t testing.TB, mount string) *env {
	t.Helper()
	mail := kmstest.NewMailbox()
	k := kmstest.New(t, kmstest.MemoryStore(t), kms.Options{Mailer: mail, BaseURL: "https://kms.example"})
	srv, base := kmstest.Serve(t, httpapi.New(k.Service, httpapi.Options{}), mount)
	c, err := client.New(base, client.WithAPIKey(k.RootKey))
	if err != nil {
		t.Fatalf("client.New(%q) = %v", base, err)
	}
	return &env{store: k.Store, svc: k.Service, srv: srv, c: c, rootCtx: k.RootCtx, mail: mail}
}

// countingTransport counts the requests it sends.
type countingTransport struct{ n atomic.Int32 }

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return http.DefaultTransport.RoundTrip(r)
}

// newCountingEnv starts an env and returns it with a client without a
// credential whose requests the countingTransport counts.
func newCountingEnv(t testing.TB) (*env, *client.Client, *countingTransport) {
	t.Helper()
	e := newEnv(t, "")
	counter := &countingTransport{}
	anon, err := client.New(e.srv.URL, client.WithHTTPClient(&http.Client{Transport: counter}))
	if err != nil {
		t.Fatal(err)
	}
	return e, anon, counter
}

// keyClient creates an API key of the root Account with flags (granted)
// and returns a client that uses it.
func (e *env) keyClient(t testing.TB, flags ...string) *client.Client {
	t.Helper()
	f := kms.Flags{}
	for _, name := range flags {
		f[name] = true
	}
	boot, err := e.svc.ListAccounts(e.rootCtx, kms.PageRequest{Limit: 1})
	if err != nil || len(boot.Data) == 0 {
		t.Fatalf("ListAccounts() = %v, %v", boot, err)
	}
	k, err := e.svc.CreateAPIKey(e.rootCtx, kms.APIKeyInput{AccountID: boot.Data[0].ID, Flags: f})
	if err != nil {
		t.Fatalf("CreateAPIKey(%v) = %v", flags, err)
	}
	return e.c.WithBearer(k.Key)
}

// lastActivityID returns the ID of the last record of the store's
// activity trail (kms.Trail, whose records are a 32-byte digest and the
// record's JSON).
func (e *env) lastActivityID(t testing.TB) string {
	t.Helper()
	var id string
	err := e.store.Trail().Scan(1, func(_ uint64, rec []byte) (bool, error) {
		var a struct{ ID string }
		if len(rec) < 32 || json.Unmarshal(rec[32:], &a) != nil || a.ID == "" {
			return false, fmt.Errorf("activity record %q does not parse: has the trail's format changed?", rec)
		}
		id = a.ID
		return true, nil
	})
	if err != nil || id == "" {
		t.Fatalf("no activity ID in the trail (%v)", err)
	}
	return id
}

var tokenRE = regexp.MustCompile(`token=([^\s&"]+)`)

// tokenOf returns the token of the link in text.
func tokenOf(t testing.TB, text string) string {
	t.Helper()
	sub := tokenRE.FindStringSubmatch(text)
	if sub == nil {
		t.Fatalf("no token in %q", text)
	}
	tok, err := url.QueryUnescape(sub[1])
	if err != nil {
		t.Fatalf("token %q: %v", sub[1], err)
	}
	return tok
}

// check returns v, failing the test (named what) when err is set. Use:
// check(c.GetKeyRing(ctx, ref))(t, "GetKeyRing").
func check[T any](v T, err error) func(t testing.TB, what string) T {
	return func(t testing.TB, what string) T {
		t.Helper()
		if err != nil {
			t.Fatalf("%s = %v", what, err)
		}
		return v
	}
}

// same fails the test unless got and want encode to the same JSON: the
// client's answer carries what the Service returned.
func same(t testing.TB, what string, got, want any) {
	t.Helper()
	g, err := json.Marshal(got)
	if err != nil {
		t.Fatalf("%s: encode the client's answer: %v", what, err)
	}
	w, err := json.Marshal(want)
	if err != nil {
		t.Fatalf("%s: encode the Service's answer: %v", what, err)
	}
	if !bytes.Equal(g, w) {
		t.Errorf("%s via the client = %s\nwant (the Service's) %s", what, g, w)
	}
}

// wantKind fails the test unless err is a *kms.Error of kind that
// errors.Is matches with sentinel, and returns it.
func wantKind(t testing.TB, what string, err error, kind kms.Kind) *kms.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("%s = nil error, want kind %v", what, kind)
	}
	e := kms.AsError(err)
	if e == nil {
		t.Fatalf("%s = %T %v, want a *kms.Error", what, err, err)
	}
	if e.Kind != kind {
		t.Fatalf("%s: kind = %v (%v), want %v", what, e.Kind, err, kind)
	}
	return e
}
