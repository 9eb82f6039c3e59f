package metrics_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/httpapi"
	"github.com/ringkms/kms/internal/promtest"
	"github.com/ringkms/kms/metrics"
	"github.com/ringkms/kms/store/badgerstore"
)

// scrape reads h's metrics with the Prometheus text parser.
// series is a series of the metric name, with labels, and the value it
// should have: -1 for no such series.
type series struct {
	name   string
	labels []string
	want   float64
}

// wantSeries checks the value of each series of want in f.
func wantSeries(t *testing.T, f promtest.Families, want []series) {
	t.Helper()
	for _, c := range want {
		if got := f.Value(c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
}

func scrape(t *testing.T, h http.Handler) promtest.Families {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics = %d", rec.Code)
	}
	f, err := promtest.Parse(rec.Body)
	if err != nil {
		t.Fatalf("parse the metrics: %v", err)
	}
	return f
}

// fixture is a Service measured by m and served over HTTP at url, with
// the root API key's secret and Account.
type fixture struct {
	m         *metrics.Metrics
	svc       *kms.Service
	url       string
	root      string
	accountID string
}

func newFixture(t *testing.T, opts metrics.Options) *fixture {
	t.Helper()
	m := metrics.New(opts)
	st, err := badgerstore.OpenInMemory()
	if err != nil {
		t.Fatal(err)
	}
	svc, err := kms.New(st, kms.Options{MasterKey: kms.GenerateMasterKey(), Observer: m})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		svc.Close()
		st.Close()
	})
	m.Watch(svc)
	b, err := svc.Bootstrap(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.New(svc, httpapi.Options{Requests: m}))
	t.Cleanup(srv.Close)
	return &fixture{m: m, svc: svc, url: srv.URL, root: b.Secret, accountID: b.AccountID}
}

// call sends a request with the given Authorization header ("" for
// none) and returns its status.
func (f *fixture) call(t *testing.T, method, path, body, authorization string) int {
	t.Helper()
	req, _ := http.NewRequest(method, f.url+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// apiKey makes an API key of the root Account with flags and returns its
// secret.
func (f *fixture) apiKey(t *testing.T, flags kms.Flags) string {
	t.Helper()
	ctx := kms.WithPrincipal(context.Background(), mustAuth(t, f.svc, f.root))
	k, err := f.svc.CreateAPIKey(ctx, kms.APIKeyInput{AccountID: f.accountID, Flags: flags})
	if err != nil {
		t.Fatal(err)
	}
	return k.Key
}

// TestMetrics: requests, journal batches, records, per-ring calls (with
// the ring cap), denials and caches are counted, and the text parses.
func TestMetrics(t *testing.T) {
	fx := newFixture(t, metrics.Options{MaxRings: 2})
	m := fx.m
	call := func(method, path, body string, secret string) int {
		t.Helper()
		if secret != "" {
			secret = "Bearer " + secret
		}
		return fx.call(t, method, path, body, secret)
	}
	for _, ring := range []string{"r1", "r2", "r3"} {
		if code := call("POST", "/ks/keyrings", `{"name":"`+ring+`","kem":"x25519"}`, fx.root); code != 200 {
			t.Fatalf("create %s = %d", ring, code)
		}
	}
	for i, ring := range []string{"r1", "r1", "r1", "r2", "r3", "r3"} {
		if code := call("POST", "/ks/encrypt", `{"ringname":"`+ring+`"}`, fx.root); code != 200 {
			t.Fatalf("encrypt %d = %d", i, code)
		}
	}
	if code := call("POST", "/ks/encrypt", `{"ringname":"r1"}`, "rk_not_a_key_at_all_0000000000000000"); code != 401 {
		t.Fatalf("encrypt with a bad key = %d", code)
	}
	weak := fx.apiKey(t, kms.Flags{"keyring.r1.read": true})
	if code := call("POST", "/ks/encrypt", `{"ringname":"r1"}`, weak); code != 403 {
		t.Fatalf("encrypt without the flag = %d", code)
	}
	if code := call("GET", "/no/such/route", "", ""); code != 404 {
		t.Fatalf("unknown route = %d", code)
	}

	f := scrape(t, m.Handler())
	wantSeries(t, f, []series{
		{"kms_http_requests_total", []string{"method=POST", "route=/ks/encrypt", "code=200"}, 6},
		{"kms_http_requests_total", []string{"method=POST", "route=/ks/encrypt", "code=403"}, 1},
		{"kms_http_requests_total", []string{"method=GET", "route=unmatched", "code=404"}, 1},
		{"kms_http_request_duration_seconds", []string{"method=POST", "route=/ks/encrypt"}, 8},
		{"kms_key_operations_total", []string{"operation=encrypt", "ring=r1"}, 3},
		{"kms_key_operations_total", []string{"operation=encrypt", "ring=r2"}, 1},
		{"kms_key_operations_total", []string{"operation=encrypt", "ring=other"}, 2}, // r3: past the cap of 2
		{"kms_activity_records_total", []string{"action=encrypt", "result=ok"}, 6},
		{"kms_denied_total", []string{"action=encrypt", "reason=permission_denied"}, 1},
		{"kms_denied_total", []string{"action=authenticate", "reason=unauthenticated"}, 1},
	})
	if got := f.Value("kms_key_operations_total", "ring=r3"); got != -1 {
		t.Errorf("ring r3, past the cap, has a series of its own: %v", got)
	}
	for _, name := range []string{"kms_journal_batch_calls", "kms_journal_commit_seconds", "kms_trail_append_seconds"} {
		if got := f.Value(name); got <= 0 {
			t.Errorf("%s: %v observations, want some", name, got)
		}
	}
	if got := f.Value("kms_cache_hits_total", "cache=credentials"); got <= 0 {
		t.Errorf("kms_cache_hits_total{cache=credentials} = %v, want hits", got)
	}
	for _, name := range []string{"go_goroutines", "process_resident_memory_bytes"} {
		if f.Value(name) < 0 {
			t.Errorf("%s missing", name)
		}
	}
}

// TestRequestSeriesBounded: made-up methods fold into one label.
func TestRequestSeriesBounded(t *testing.T) {
	m := metrics.New(metrics.Options{})
	for i := range 50 {
		m.ObserveRequest(fmt.Sprintf("X%d", i), "", 405, 0)
	}
	if got := scrape(t, m.Handler()).Value("kms_http_requests_total", "method=other", "code=405"); got != 50 {
		t.Fatalf("requests of made-up methods under method=other: %v, want 50", got)
	}
}

// validate reports, through POST /auth/validate with the root key, that
// key is about to do action (on ring, when set).
func (f *fixture) validate(t *testing.T, key, action, ring string) {
	t.Helper()
	body := fmt.Sprintf(`{"key":%q,"activity":{"action":%q,"ringname":%q}}`, key, action, ring)
	if code := f.call(t, "POST", "/auth/validate", body, "Bearer "+f.root); code != 200 {
		t.Fatalf("validate %q on %q = %d", action, ring, code)
	}
}

// seriesOf counts the series of each family of f whose name starts
// with kms_.
func seriesOf(f promtest.Families) map[string]int {
	n := map[string]int{}
	for name, fam := range f {
		if strings.HasPrefix(name, "kms_") {
			n[name] = len(fam.Metric)
		}
	}
	return n
}

// TestMadeUpActionsBounded: the actions that callers of POST
// /auth/validate make up, granted, denied or for a key that is not valid,
// add no series to any metric: they count under action "other", and the
// rings they name get no series of key operations.
func TestMadeUpActionsBounded(t *testing.T) {
	fx := newFixture(t, metrics.Options{})
	allowed := fx.apiKey(t, kms.Flags{"*": true})
	refused := fx.apiKey(t, kms.Flags{})
	const invalid = "rk_not_a_key_at_all_0000000000000000"
	send := func(from, n int) {
		t.Helper()
		for i := from; i < from+n; i++ {
			action := fmt.Sprintf("made.up.%d", i)
			fx.validate(t, allowed, action, "")
			fx.validate(t, refused, action, "")
			fx.validate(t, invalid, action, "")
			fx.validate(t, allowed, action, fmt.Sprintf("ghost%d", i))
		}
	}
	send(0, 40)
	first := scrape(t, fx.m.Handler())
	send(40, 40)
	f := scrape(t, fx.m.Handler())

	before, after := seriesOf(first), seriesOf(f)
	for name, n := range after {
		if n != before[name] {
			t.Errorf("%s: %d series after 40 made-up actions, %d after 40 more", name, before[name], n)
		}
	}
	for _, name := range []string{"kms_activity_records_total", "kms_denied_total"} {
		// validate and apikey.create (the keys made above) by result,
		// and authenticate: a handful whatever the callers send.
		if n := after[name]; n > 5 {
			t.Errorf("%s has %d series after 80 made-up actions", name, n)
		}
	}
	for name, fam := range f {
		for _, m := range fam.Metric {
			for _, l := range m.Label {
				if v := l.GetValue(); strings.HasPrefix(v, "made.up") || strings.HasPrefix(v, "ghost") {
					t.Errorf("%s has a series labelled %s=%q", name, l.GetName(), v)
				}
			}
		}
	}
	wantSeries(t, f, []series{
		// The service records every validation as action validate, the
		// action reported being a claim in its props.
		{"kms_activity_records_total", []string{"action=validate", "result=ok"}, 160},
		{"kms_activity_records_total", []string{"action=validate", "result=permission_denied"}, 80},
		{"kms_activity_records_total", []string{"action=validate", "result=unauthenticated"}, 80},
		{"kms_denied_total", []string{"action=validate", "reason=permission_denied"}, 80},
		{"kms_denied_total", []string{"action=validate", "reason=unauthenticated"}, 80},
		{"kms_key_operations_total", nil, -1}, // no series: no key was used
	})
}

// TestActionsKeepTheirLabels: the service's own actions are labelled as
// they are; a validation is labelled validate whatever it reports, and a
// reported encrypt is no key operation.
func TestActionsKeepTheirLabels(t *testing.T) {
	fx := newFixture(t, metrics.Options{})
	if code := fx.call(t, "POST", "/ks/keyrings", `{"name":"r1","kem":"x25519"}`, "Bearer "+fx.root); code != 200 {
		t.Fatalf("create r1 = %d", code)
	}
	if code := fx.call(t, "POST", "/ks/encrypt", `{"ringname":"r1"}`, "Bearer "+fx.root); code != 200 {
		t.Fatalf("encrypt = %d", code)
	}
	encrypter := fx.apiKey(t, kms.Flags{"keyring.r1.encrypt": true})
	reader := fx.apiKey(t, kms.Flags{"keyring.r1.read": true})
	fx.validate(t, encrypter, "encrypt", "r1")
	fx.validate(t, reader, "encrypt", "r1")
	fx.validate(t, reader, "decrypt", "r1")

	f := scrape(t, fx.m.Handler())
	wantSeries(t, f, []series{
		{"kms_activity_records_total", []string{"action=keyring.create", "result=ok"}, 1},
		{"kms_activity_records_total", []string{"action=apikey.create", "result=ok"}, 2},
		{"kms_activity_records_total", []string{"action=encrypt", "result=ok"}, 1}, // the call
		{"kms_activity_records_total", []string{"action=validate", "result=ok"}, 1},
		{"kms_activity_records_total", []string{"action=validate", "result=permission_denied"}, 2},
		{"kms_denied_total", []string{"action=validate", "reason=permission_denied"}, 2},
		{"kms_denied_total", []string{"action=encrypt"}, -1},
		{"kms_denied_total", []string{"action=decrypt"}, -1},
		{"kms_key_operations_total", []string{"operation=encrypt", "ring=r1"}, 1}, // the call only
		{"kms_activity_records_total", []string{"action=other"}, -1},
	})
}

// TestRefusedCredentialsDenied: a request refused for its credential (no
// Authorization header, a malformed one, a key the Service does not know)
// counts in kms_denied_total, though it leaves no activity record; a
// refusal that is recorded (an invitation token) counts once.
func TestRefusedCredentialsDenied(t *testing.T) {
	fx := newFixture(t, metrics.Options{})
	for _, auth := range []string{"", "Basic cm9vdDpyb290", "Bearer rk_not_a_key_at_all_0000000000000000"} {
		if code := fx.call(t, "GET", "/ks/keyrings", "", auth); code != 401 {
			t.Fatalf("GET /ks/keyrings with Authorization %q = %d, want 401", auth, code)
		}
	}
	if code := fx.call(t, "GET", "/auth/user/invite-validate?token=not-a-token", "", ""); code != 401 {
		t.Fatalf("invite-validate with a bad token = %d, want 401", code)
	}

	f := scrape(t, fx.m.Handler())
	wantSeries(t, f, []series{
		{"kms_denied_total", []string{"action=" + metrics.CredentialAction, "reason=unauthenticated"}, 3},
		{"kms_denied_total", []string{"action=user.invite.validate", "reason=unauthenticated"}, 1},
		{"kms_activity_records_total", []string{"action=" + metrics.CredentialAction}, -1},
		{"kms_http_requests_total", []string{"route=/ks/keyrings", "code=401"}, 3},
	})
}

func mustAuth(t *testing.T, svc *kms.Service, secret string) *kms.Principal {
	t.Helper()
	p, err := svc.Authenticate(context.Background(), secret)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRateLimitCounts: a ratelimit record counts its own refusal and the
// ones of its bucket it carries ("suppressed"); a record of a count
// alone ("flush") counts only those.
func TestRateLimitCounts(t *testing.T) {
	m := metrics.New(metrics.Options{})
	rec := func(result string, props map[string]any) *kms.Activity {
		props["limit"], props["result"] = "apikey", result
		return &kms.Activity{Action: "ratelimit", Props: props}
	}
	m.ObserveRecords([]*kms.Activity{
		rec("rate_limited", map[string]any{}),                                    // 1
		rec("rate_limited", map[string]any{"suppressed": 3}),                     // 4
		rec("rate_limited", map[string]any{"suppressed": 2, "flush": true}),      // 2
		rec("invalid", map[string]any{"calls": 50, "burst": 5, "suppressed": 1}), // 2, not throttled
	})
	f := scrape(t, m.Handler())
	wantSeries(t, f, []series{
		{"kms_throttled_total", []string{"kind=ratelimit_apikey"}, 7},
		{"kms_denied_total", []string{"action=ratelimit", "reason=rate_limited"}, 7},
		{"kms_denied_total", []string{"action=ratelimit", "reason=invalid"}, 2},
		{"kms_activity_records_total", []string{"action=ratelimit", "result=rate_limited"}, 3},
	})
}
