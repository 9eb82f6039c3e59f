package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/httpapi"
	"github.com/ringkms/kms/kmstest"
)

// env is a Service on an in-memory store, served by httpapi over a real
// HTTP server, with a root API key.
type env struct {
	store   *downStore
	svc     *kms.Service
	srv     *httptest.Server
	root    string             // secret of the root API key (flag "*")
	rootCtx context.Context    // carries the root principal, for direct Service calls
	account string             // ID of the Account that test API keys belong to
	logs    *kmstest.LogBuffer // the handler's log
}

type envOptions struct {
	maxBody int64
	clock   *kmstest.Clock // the Service's clock; nil: time.Now
	mailer  kms.Mailer     // the Service's Mailer; nil: none
	svcLog  bool           // the Service logs to e.logs too
	limits  kms.Limits     // plan limits
	rates   kms.RateLimits // rate limits
	// ipHeader is the handler's ClientIPHeader: requests that set it come
	// from the address they name (req.header).
	ipHeader string
}

// withClock gives the Service a settable clock, which starts at a fixed
// time and moves only when the test advances it.
func withClock(c *kmstest.Clock) func(*envOptions) { return func(o *envOptions) { o.clock = c } }

// withMailer gives the Service a Mailer (for example a kmstest.Mailbox).
func withMailer(m kms.Mailer) func(*envOptions) { return func(o *envOptions) { o.mailer = m } }

// withServiceLog sends the Service's own log to e.logs, beside the
// handler's.
func withServiceLog(o *envOptions) { o.svcLog = true }

// withRateLimits gives the Service rate limits, and the handler
// X-Real-IP as the header of the client's address.
func withRateLimits(l kms.RateLimits) func(*envOptions) {
	return func(o *envOptions) { o.rates, o.ipHeader = l, "X-Real-IP" }
}

// testBaseURL is the BaseURL of the Service, on which mailed links are
// built.
const testBaseURL = "https://kms.example.com"

// newMailEnv starts an env whose Service has a settable clock and a
// Mailbox, and returns them with it.
func newMailEnv(t testing.TB, opts ...func(*envOptions)) (*env, *kmstest.Clock, *kmstest.Mailbox) {
	t.Helper()
	clock, mail := kmstest.NewClock(), kmstest.NewMailbox()
	return newEnv(t, append([]func(*envOptions){withClock(clock), withMailer(mail)}, opts...)...), clock, mail
}

// newEnv starts an env; everything stops at the end of the test.
func newEnv(t testing.TB, opts ...func(*envOptions)) *env {
	t.Helper()
	var o envOptions
	for _, f := range opts {
		f(&o)
	}
	ds := &downStore{Store: kmstest.MemoryStore(t)}
	logs := &kmstest.LogBuffer{}
	logger := zerolog.New(logs)
	kopts := kms.Options{Mailer: o.mailer, BaseURL: testBaseURL, Limits: o.limits, RateLimits: o.rates}
	if o.clock != nil {
		kopts.Now = o.clock.Now
	}
	if o.svcLog {
		kopts.Logger = &logger
	}
	k := kmstest.New(t, ds, kopts)
	acct, err := k.Service.CreateAccount(k.RootCtx, kms.AccountInput{UID: "tests"})
	if err != nil {
		t.Fatalf("CreateAccount() = %v", err)
	}
	srv, _ := kmstest.Serve(t, httpapi.New(k.Service, httpapi.Options{Logger: &logger, MaxBodyBytes: o.maxBody, ClientIPHeader: o.ipHeader}), "")
	return &env{store: ds, svc: k.Service, srv: srv, root: k.RootKey, rootCtx: k.RootCtx, account: acct.ID, logs: logs}
}

// downStore is a kms.Store that can be made to fail reads (down), for
// /healthz, or writes (readOnly), for the 500 answers.
type downStore struct {
	kms.Store
	down     atomic.Bool
	readOnly atomic.Bool
	full     atomic.Bool // Writable answers NoSpace, as on a full disk
}

func (s *downStore) Writable(ctx context.Context) error {
	if s.full.Load() {
		return &kms.Error{Kind: kms.KindNoSpace, Message: "insufficient storage: the service's disk is full; writes are refused until space is freed",
			Err: fmt.Errorf("file system of /var/lib/secret-path has 0 bytes free")}
	}
	return s.Store.Writable(ctx)
}

func (s *downStore) Update(ctx context.Context, fn func(kms.Txn) error) error {
	if s.readOnly.Load() {
		return fmt.Errorf("write failed: disk on fire at /var/lib/secret-path")
	}
	return s.Store.Update(ctx, fn)
}

func (s *downStore) UpdateNoSync(ctx context.Context, fn func(kms.Txn) error) error {
	if s.readOnly.Load() {
		return fmt.Errorf("write failed: disk on fire at /var/lib/secret-path")
	}
	return s.Store.UpdateNoSync(ctx, fn)
}

// Trail fails appends while the store is read-only.
func (s *downStore) Trail() kms.Trail { return downTrail{s.Store.Trail(), s} }

type downTrail struct {
	kms.Trail
	s *downStore
}

func (t downTrail) Append(recs [][]byte) error {
	if t.s.readOnly.Load() {
		return fmt.Errorf("write failed: disk on fire at /var/lib/secret-path")
	}
	return t.Trail.Append(recs)
}

func (s *downStore) View(ctx context.Context, fn func(kms.Txn) error) error {
	if s.down.Load() {
		return fmt.Errorf("disk on fire at /var/lib/secret-path")
	}
	return s.Store.View(ctx, fn)
}

// apiKey creates an API key of the test Account with the given flags (all
// granted) and returns its secret and ID.
func (e *env) apiKey(t testing.TB, flags ...string) (secret, id string) {
	t.Helper()
	return e.apiKeyIn(t, e.account, flags...)
}

// keyInSecret is apiKeyIn without the ID.
func (e *env) keyInSecret(t testing.TB, account string, flags ...string) string {
	t.Helper()
	secret, _ := e.apiKeyIn(t, account, flags...)
	return secret
}

// apiKeyIn is apiKey for the Account with ID account.
func (e *env) apiKeyIn(t testing.TB, account string, flags ...string) (secret, id string) {
	t.Helper()
	f := kms.Flags{}
	for _, name := range flags {
		f[name] = true
	}
	k, err := e.svc.CreateAPIKey(e.rootCtx, kms.APIKeyInput{AccountID: account, Flags: f})
	if err != nil {
		t.Fatalf("CreateAPIKey(%v) = %v", flags, err)
	}
	return k.Key, k.KeyID
}

// reply is an HTTP answer.
type reply struct {
	method, path string
	status       int
	header       http.Header
	body         []byte
}

// req describes a request beyond method, path and credential.
type req struct {
	body        any    // nil: no body; string or []byte: sent as is; else JSON-encoded
	contentType string // default application/json when there is a body; "-" for none
	auth        []string
	chunked     bool // send the body without Content-Length
	header      http.Header
}

// do sends method path with the credential secret ("" for none) and body
// (see req.body), and reads the answer.
func (e *env) do(t testing.TB, method, path, secret string, body any) reply {
	t.Helper()
	var auth []string
	if secret != "" {
		auth = []string{"Bearer " + secret}
	}
	return e.send(t, method, path, req{body: body, auth: auth})
}

func (e *env) send(t testing.TB, method, path string, rq req) reply {
	t.Helper()
	return send(t, e.srv.URL, method, path, rq)
}

func send(t testing.TB, base, method, path string, rq req) reply {
	t.Helper()
	var rd io.Reader
	if rq.body != nil {
		var b []byte
		switch v := rq.body.(type) {
		case string:
			b = []byte(v)
		case []byte:
			b = v
		default:
			var err error
			if b, err = json.Marshal(v); err != nil {
				t.Fatalf("encode request body: %v", err)
			}
		}
		rd = bytes.NewReader(b)
		if rq.chunked {
			rd = io.MultiReader(rd) // hides the length
		}
	}
	r, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		t.Fatalf("NewRequest(%s %s) = %v", method, path, err)
	}
	if rq.body != nil {
		switch rq.contentType {
		case "":
			r.Header.Set("Content-Type", "application/json")
		case "-":
		default:
			r.Header.Set("Content-Type", rq.contentType)
		}
	}
	for _, a := range rq.auth {
		r.Header.Add("Authorization", a)
	}
	for name, values := range rq.header {
		r.Header[name] = values
	}
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return reply{method: method, path: path, status: resp.StatusCode, header: resp.Header, body: b}
}

// want fails the test unless the status is status.
func (r reply) want(t testing.TB, status int) reply {
	t.Helper()
	return r.wantType(t, status, "application/json; charset=utf-8")
}

// wantType is want for an answer of the Content-Type contentType.
func (r reply) wantType(t testing.TB, status int, contentType string) reply {
	t.Helper()
	if r.status != status {
		t.Fatalf("%s %s = %d, want %d; body %s", r.method, r.path, r.status, status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != contentType {
		t.Errorf("%s %s: Content-Type = %q, want %s", r.method, r.path, ct, contentType)
	}
	return r
}

// wantError fails the test unless the answer is an error of status and
// code in the error shape, and returns its message.
func (r reply) wantError(t testing.TB, status int, code string) string {
	t.Helper()
	r.want(t, status)
	var body map[string]any
	if err := json.Unmarshal(r.body, &body); err != nil {
		t.Fatalf("%s %s: body %q is not JSON: %v", r.method, r.path, r.body, err)
	}
	msg, _ := body["message"].(string)
	if msg == "" {
		t.Errorf("%s %s: body %s has no message", r.method, r.path, r.body)
	}
	if got, _ := body["code"].(string); got != code {
		t.Errorf("%s %s: code = %q, want %q; body %s", r.method, r.path, got, code, r.body)
	}
	if len(body) != 2 {
		t.Errorf("%s %s: error body %s has members other than message and code", r.method, r.path, r.body)
	}
	return msg
}

// decode decodes the body into a T.
func decode[T any](t testing.TB, r reply) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("%s %s: decode %s: %v", r.method, r.path, r.body, err)
	}
	return v
}

// object decodes the body as a JSON object.
func (r reply) object(t testing.TB) map[string]any {
	t.Helper()
	return decode[map[string]any](t, r)
}

// createRing creates a /ks ring named name with kem x25519 (the quickest)
// and returns the answer.
func (e *env) createRing(t testing.TB, name string) kms.CreateKeyRingResult {
	t.Helper()
	r := e.do(t, "POST", "/ks/keyrings", e.root, map[string]any{"name": name, "kem": "x25519"}).want(t, http.StatusOK)
	return decode[kms.CreateKeyRingResult](t, r)
}

// encrypt calls POST /ks/encrypt on ring as root.
func (e *env) encrypt(t testing.TB, ring string) kms.EncryptResult {
	t.Helper()
	r := e.do(t, "POST", "/ks/encrypt", e.root, map[string]any{"ringname": ring}).want(t, http.StatusOK)
	return decode[kms.EncryptResult](t, r)
}

// flip changes the character in the middle of s to another of the
// URL-safe base64 alphabet.
func flip(s string) string { return flipAt(s, len(s)/2) }

// flipAt changes the character at i of a base64url string.
func flipAt(s string, i int) string {
	c := byte('A')
	if s[i] == 'A' {
		c = 'B'
	}
	return s[:i] + string(c) + s[i+1:]
}

// authCases are the credential failures every protected route answers 401.
var authCases = []struct {
	name string
	auth []string
}{
	{"no Authorization", nil},
	{"wrong secret", []string{"Bearer rk_not-a-real-key-000000000000000000000000"}},
	{"Basic scheme", []string{"Basic dXNlcjpwYXNz"}},
}

// checkAuth checks that method path answers 401 without a valid
// credential and 403 with a credential lacking the flag it needs.
func (e *env) checkAuth(t *testing.T, method, path string, body any) {
	t.Helper()
	for _, c := range authCases {
		t.Run("401 "+c.name, func(t *testing.T) {
			r := e.send(t, method, path, req{body: body, auth: c.auth})
			r.wantError(t, http.StatusUnauthorized, "unauthenticated")
		})
	}
	t.Run("403 no flag", func(t *testing.T) {
		secret, _ := e.apiKey(t, "keyring.unrelated.read")
		e.do(t, method, path, secret, body).wantError(t, http.StatusForbidden, "permission_denied")
	})
}

// activity returns the activity records that match: the IDs come from
// the store's activity trail (kms.Trail, whose records are a 32-byte digest
// and the record's JSON) and each record is read through
// Service.GetActivity.
func (e *env) activity(t testing.TB, match func(*kms.Activity) bool) []*kms.Activity {
	t.Helper()
	ids := trailIDs(t, e.store)
	var out []*kms.Activity
	for _, id := range ids {
		a, err := e.svc.GetActivity(e.rootCtx, id)
		if err != nil {
			t.Fatalf("GetActivity(%s) = %v", id, err)
		}
		if match(a) {
			out = append(out, a)
		}
	}
	return out
}

// wantErrorBody is wantError for the documented exceptions (docs/API.md):
// an error of status and code whose body may also carry errors, state and
// results (and nothing else). It returns the body.
func (r reply) wantErrorBody(t testing.TB, status int, code string) map[string]any {
	t.Helper()
	r.want(t, status)
	body := r.object(t)
	if msg, _ := body["message"].(string); msg == "" {
		t.Errorf("%s %s: body %s has no message", r.method, r.path, r.body)
	}
	if got, _ := body["code"].(string); got != code {
		t.Errorf("%s %s: code = %q, want %q; body %s", r.method, r.path, got, code, r.body)
	}
	for k := range body {
		switch k {
		case "message", "code", "errors", "state", "results":
		default:
			t.Errorf("%s %s: error body %s has member %q", r.method, r.path, r.body, k)
		}
	}
	return body
}

// wantEmpty fails the test unless the answer has status and the body {}.
func (r reply) wantEmpty(t testing.TB, status int) {
	t.Helper()
	r.want(t, status)
	if got := strings.TrimSpace(string(r.body)); got != "{}" {
		t.Fatalf("%s %s: body = %s, want {}", r.method, r.path, got)
	}
}

// trailIDs returns the IDs of the records of st's activity trail, in order.
func trailIDs(t testing.TB, st kms.Store) []string {
	t.Helper()
	var ids []string
	err := st.Trail().Scan(1, func(_ uint64, rec []byte) (bool, error) {
		var a struct{ ID string }
		if len(rec) < 32 || json.Unmarshal(rec[32:], &a) != nil || a.ID == "" {
			return false, fmt.Errorf("activity record %q does not parse: has the trail's format changed?", rec)
		}
		ids = append(ids, a.ID)
		return true, nil
	})
	if err != nil || len(ids) == 0 {
		t.Fatalf("no activity IDs in the trail (%v)", err)
	}
	return ids
}
