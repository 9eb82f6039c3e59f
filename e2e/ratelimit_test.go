package e2e

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/promtest"
)

// TestRateLimit: with -rate-limit-apikey, an API key's calls past its
// burst answer 429 with Retry-After, another key and /healthz are not
// held back, and the metrics count the refusals.
func TestRateLimit(t *testing.T) {
	in := newInstance(t)
	p := in.start(t, "-rate-limit-apikey", "1:3", "-rate-limit-addr", "1000", "-metrics")
	v := newValidator(t)
	root := clientOf(p, t, v, in.bootstrap)
	key := must[*kms.APIKey](t, "CreateAPIKey")(root.CreateAPIKey(bg, kms.APIKeyInput{AccountID: kms.BootstrapAccountUID, AccountByUID: true,
		Flags: kms.Flags{"keyring.*.read": true}}))
	limited := clientOf(p, t, v, key.Key)
	for i := range 3 {
		if _, err := limited.ListKeyRings(bg, kms.PageRequest{}); err != nil {
			t.Fatalf("call %d of 3: %v", i+1, err)
		}
	}
	req, _ := http.NewRequest("GET", p.URL+"/ks/keyrings", nil)
	req.Header.Set("Authorization", "Bearer "+key.Key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); resp.StatusCode != http.StatusTooManyRequests || err != nil || secs < 1 {
		t.Fatalf("call 4 = %d, Retry-After %q; want 429 and a number of seconds", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	_, err = limited.ListKeyRings(bg, kms.PageRequest{})
	wantKind(t, "call 5", err, kms.KindRateLimited)
	if _, err := root.ListKeyRings(bg, kms.PageRequest{}); err != nil {
		t.Fatalf("another key: %v", err)
	}
	for range 20 {
		if resp, err := http.Get(p.URL + "/healthz"); err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET /healthz = %v, %v", resp, err)
		} else {
			resp.Body.Close()
		}
	}
	req, _ = http.NewRequest("GET", p.URL+"/metrics", nil)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	f, err := promtest.Parse(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Value("kms_throttled_total", "kind=ratelimit_apikey"); got != 2 {
		t.Fatalf("kms_throttled_total{ratelimit_apikey} = %v, want 2", got)
	}
	if got := f.Value("kms_denied_total", "action=ratelimit", "reason=rate_limited"); got != 2 {
		t.Fatalf("kms_denied_total{ratelimit} = %v, want 2", got)
	}
}
