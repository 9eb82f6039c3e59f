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

// TestMetrics: requests, journal batches, records, per-ring calls (with
// the ring cap), denials and caches are counted, and the text parses.
func TestMetrics(t *testing.T) {
	m := metrics.New(metrics.Options{MaxRings: 2})
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
	ctx := context.Background()
	b, err := svc.Bootstrap(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.New(svc, httpapi.Options{Requests: m}))
	defer srv.Close()
	call := func(method, path, body string, secret string) int {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if secret != "" {
			req.Header.Set("Authorization", "Bearer "+secret)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, ring := range []string{"r1", "r2", "r3"} {
		if code := call("POST", "/ks/keyrings", `{"name":"`+ring+`","kem":"x25519"}`, b.Secret); code != 200 {
			t.Fatalf("create %s = %d", ring, code)
		}
	}
	for i, ring := range []string{"r1", "r1", "r1", "r2", "r3", "r3"} {
		if code := call("POST", "/ks/encrypt", `{"ringname":"`+ring+`"}`, b.Secret); code != 200 {
			t.Fatalf("encrypt %d = %d", i, code)
		}
	}
	if code := call("POST", "/ks/encrypt", `{"ringname":"r1"}`, "rk_not_a_key_at_all_0000000000000000"); code != 401 {
		t.Fatalf("encrypt with a bad key = %d", code)
	}
	weak, err := svc.CreateAPIKey(kms.WithPrincipal(ctx, mustAuth(t, svc, b.Secret)), kms.APIKeyInput{AccountID: b.AccountID, Flags: kms.Flags{"keyring.r1.read": true}})
	if err != nil {
		t.Fatal(err)
	}
	if code := call("POST", "/ks/encrypt", `{"ringname":"r1"}`, weak.Key); code != 403 {
		t.Fatalf("encrypt without the flag = %d", code)
	}
	if code := call("GET", "/no/such/route", "", ""); code != 404 {
		t.Fatalf("unknown route = %d", code)
	}

	f := scrape(t, m.Handler())
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"kms_http_requests_total", []string{"method=POST", "route=/ks/encrypt", "code=200"}, 6},
		{"kms_http_requests_total", []string{"method=POST", "route=/ks/encrypt", "code=403"}, 1},
		{"kms_http_requests_total", []string{"method=GET", "route=unmatched", "code=404"}, 1},
		{"kms_http_request_duration_seconds", []string{"method=POST", "route=/ks/encrypt"}, 8},
		{"kms_key_operations_total", []string{"operation=encrypt", "ring=r1"}, 3},
		{"kms_key_operations_total", []string{"operation=encrypt", "ring=r2"}, 1},
		{"kms_key_operations_total", []string{"operation=encrypt", "ring=other"}, 2}, // r3: past the cap of 2
		{"kms_activity_records_total", []string{"action=encrypt", "result=ok"}, 6},
		{"kms_denied_total", []string{"action=encrypt", "reason=permission_denied"}, 1},
	} {
		if got := f.Value(c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
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

func mustAuth(t *testing.T, svc *kms.Service, secret string) *kms.Principal {
	t.Helper()
	p, err := svc.Authenticate(context.Background(), secret)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
