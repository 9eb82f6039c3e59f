package e2e

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/promtest"
)

// TestPlanLimits starts kmsd with plan limits and checks that creating past
// one answers 403 naming the maximum.
func TestPlanLimits(t *testing.T) {
	_, p, _, root := serve(t, "-max-keyrings", "1", "-max-accounts", "2", "-max-apikeys-per-account", "2", "-max-users", "1")
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

// TestRateLimit: with -rate-limit-apikey, an API key's calls past its
// burst answer 429 with Retry-After, another key and /healthz are not
// held back, and the metrics count the refusals: the second, in the
// same second as the first, is only counted in memory, and its count is
// recorded (and measured) once the second has ended.
func TestRateLimit(t *testing.T) {
	_, p, v, root := serve(t, "-rate-limit-apikey", "1:3", "-rate-limit-addr", "1000", "-metrics")
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
	var f promtest.Families
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get(p.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		f, err = promtest.Parse(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got := f.Value("kms_throttled_total", "kind=ratelimit_apikey"); got == 2 {
			break
		} else if got > 2 || time.Now().After(deadline) {
			t.Fatalf("kms_throttled_total{ratelimit_apikey} = %v, want 2", got)
		}
	}
	if got := f.Value("kms_denied_total", "action=ratelimit", "reason=rate_limited"); got != 2 {
		t.Fatalf("kms_denied_total{ratelimit} = %v, want 2", got)
	}
}

// TestRateLimitBatch: with -rate-limit-apikey, each item of a batch is a
// call of the key's limit: a batch past the burst is 400 naming it, one
// the bucket cannot cover is 429 with Retry-After and makes no item, one
// it covers passes and uses its calls up. The rate is low (a call every
// 20 s) so that the bucket does not refill while the test runs.
func TestRateLimitBatch(t *testing.T) {
	_, p, v, root := serve(t, "-rate-limit-apikey", "0.05:5")
	must[*kms.CreateKeyRingResult](t, "CreateKeyRing")(root.CreateKeyRing(bg, kms.CreateKeyRingInput{Name: "bulk", KEM: "x25519"}))
	key := must[*kms.APIKey](t, "CreateAPIKey")(root.CreateAPIKey(bg, kms.APIKeyInput{AccountID: kms.BootstrapAccountUID, AccountByUID: true,
		Flags: kms.Flags{"keyring.bulk.encrypt": true}}))
	limited := clientOf(p, t, v, key.Key)

	_, err := limited.EncryptBatch(bg, kms.EncryptBatchInput{RingName: "bulk", Count: 50})
	if e := wantKind(t, "a batch of 50 under a burst of 5", err, kms.KindInvalid); !strings.Contains(e.Message, "burst of 5") {
		t.Fatalf("a batch of 50 under a burst of 5: %q, want a message naming the burst", e.Message)
	}
	must[*kms.EncryptResult](t, "Encrypt")(limited.Encrypt(bg, kms.EncryptInput{RingName: "bulk"})) // 4 left
	req, _ := http.NewRequest("POST", p.URL+"/ks/encrypt/batch", strings.NewReader(`{"ringname":"bulk","count":5}`))
	req.Header.Set("Authorization", "Bearer "+key.Key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); resp.StatusCode != http.StatusTooManyRequests || err != nil || secs < 1 || secs > 20 {
		t.Fatalf("a batch of 5 with 4 calls left = %d, Retry-After %q; want 429 and 1 to 20 seconds", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	res := must[*kms.EncryptBatchResult](t, "EncryptBatch(4)")(limited.EncryptBatch(bg, kms.EncryptBatchInput{RingName: "bulk", Count: 4}))
	if len(res.Items) != 4 {
		t.Fatalf("a batch of 4 answered %d items", len(res.Items))
	}
	_, err = limited.Encrypt(bg, kms.EncryptInput{RingName: "bulk"})
	wantKind(t, "a call after the batch used the bucket up", err, kms.KindRateLimited)

	l := must[*kms.List[*kms.Activity]](t, "SearchActivity")(root.SearchActivity(bg, kms.ActivityFilter{KeyID: key.KeyID, Action: "encrypt"}, kms.PageRequest{}))
	if len(l.Data) != 5 {
		t.Fatalf("%d encrypt calls of the limited key, want 5 (a single call, the batch of 4)", len(l.Data))
	}
}

// TestRateLimitIPv6Prefix: kmsd counts an IPv6 client by the prefix of
// -ipv6-prefix bits: with 48, two addresses of one /48 (named by a
// trusted proxy's header) share the address's bucket, and another /48
// has its own.
func TestRateLimitIPv6Prefix(t *testing.T) {
	in := newInstance(t)
	p := in.start(t, "-rate-limit-addr", "0.001:1", "-client-ip-header", "X-Real-IP", "-ipv6-prefix", "48")
	list := func(addr string) int {
		t.Helper()
		req, _ := http.NewRequest("GET", p.URL+"/ks/keyrings", nil)
		req.Header.Set("Authorization", "Bearer "+in.bootstrap)
		req.Header.Set("X-Real-IP", addr)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		addr string
		want int
	}{
		{"2001:db8:1:2::1", http.StatusOK},
		{"2001:db8:1:ffff::1", http.StatusTooManyRequests},
		{"2001:db8:2::1", http.StatusOK},
	} {
		if got := list(c.addr); got != c.want {
			t.Errorf("GET /ks/keyrings from %s = %d, want %d", c.addr, got, c.want)
		}
	}
}
