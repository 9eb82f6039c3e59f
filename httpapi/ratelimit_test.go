package httpapi_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/kmstest"
)

// TestBatchRateLimits: each item of POST /ks/encrypt/batch and
// /ks/decrypt/batch takes a call of the credential's, the client
// address's and the Account's rate limits. A batch the buckets cannot
// cover is 429 with Retry-After and does nothing (no item made, no call
// taken from any bucket); one past a burst is 400 naming the burst; one
// they cover passes and uses its calls up. Each refusal is a record, or
// a count in one when its bucket refused another for the same reason
// less than a second before.
func TestBatchRateLimits(t *testing.T) {
	clock := kmstest.NewClock()
	var limited string // the ID of an Account with a limit of its own
	e := newEnv(t, withClock(clock), withRateLimits(kms.RateLimits{
		PerAPIKey: kms.Rate{PerSecond: 5, Burst: 5},
		PerAddr:   kms.Rate{PerSecond: 0.001, Burst: 8},
		PerAccount: func(id string) kms.Rate {
			if id == limited {
				return kms.Rate{PerSecond: 1, Burst: 8}
			}
			return kms.Rate{}
		},
	}))
	if _, err := e.svc.CreateKeyRing(e.rootCtx, kms.CreateKeyRingInput{Name: "bulk", KEM: "x25519"}); err != nil {
		t.Fatal(err)
	}
	flags := []string{"keyring.bulk.encrypt", "keyring.bulk.decrypt"}
	addrs := 0
	from := func() http.Header { // an address of its own for each part
		addrs++
		return http.Header{"X-Real-Ip": {"192.0.2." + strconv.Itoa(addrs)}}
	}
	call := func(t *testing.T, secret, path string, body any, ip http.Header) reply {
		t.Helper()
		return e.send(t, http.MethodPost, path, req{body: body, auth: []string{"Bearer " + secret}, header: ip})
	}
	encryptBatch := func(t *testing.T, secret string, n int, ip http.Header) reply {
		t.Helper()
		return call(t, secret, "/ks/encrypt/batch", map[string]any{"ringname": "bulk", "count": n}, ip)
	}
	wantRetry := func(t *testing.T, r reply, want string) {
		t.Helper()
		r.wantError(t, http.StatusTooManyRequests, "rate_limited")
		if got := r.header.Get("Retry-After"); got != want {
			t.Fatalf("%s: Retry-After = %q, want %q", r.path, got, want)
		}
	}
	records := func(t *testing.T, keyID, action string) int {
		t.Helper()
		return len(e.activity(t, func(a *kms.Activity) bool { return a.KeyID == keyID && a.Action == action }))
	}
	// refusals counts the refusals in ratelimit records of keyID: one
	// a record, but for a count alone, and its count of others.
	refusals := func(t *testing.T, keyID string) int {
		t.Helper()
		n := 0
		for _, a := range e.activity(t, func(a *kms.Activity) bool { return a.KeyID == keyID && a.Action == "ratelimit" }) {
			if a.Props["flush"] != true {
				n++
			}
			suppressed, _ := a.Props["suppressed"].(float64)
			n += int(suppressed)
		}
		return n
	}

	t.Run("credential", func(t *testing.T) {
		key, keyID := e.apiKey(t, flags...)
		// Past the burst: no wait would admit it, so no Retry-After.
		r := encryptBatch(t, key, 50, from())
		msg := r.wantError(t, http.StatusBadRequest, "invalid")
		if !strings.Contains(msg, "burst of 5") || !strings.Contains(msg, "at most 5") || r.header.Get("Retry-After") != "" {
			t.Fatalf("a batch of 50 under 5:5: %q, Retry-After %q; want a message naming the burst of 5, no Retry-After", msg, r.header.Get("Retry-After"))
		}
		if n := records(t, keyID, "encrypt"); n != 0 {
			t.Fatalf("a refused batch made %d encrypt calls", n)
		}
		call(t, key, "/ks/encrypt", map[string]any{"ringname": "bulk"}, from()).want(t, http.StatusOK) // 4 left
		wantRetry(t, encryptBatch(t, key, 5, from()), "1")
		if n := records(t, keyID, "encrypt"); n != 1 {
			t.Fatalf("%d encrypt calls after a batch of 5 was refused, want the 1 single call", n)
		}
		res := decode[kms.EncryptBatchResult](t, encryptBatch(t, key, 4, from()).want(t, http.StatusOK))
		if len(res.Items) != 4 || res.Items[3].EncryptResult == nil {
			t.Fatalf("a batch of 4 with 4 calls left = %+v", res.Items)
		}
		wantRetry(t, call(t, key, "/ks/encrypt", map[string]any{"ringname": "bulk"}, from()), "1")

		clock.Advance(time.Second) // 5 calls again
		items := make([]map[string]string, 0, 6)
		for _, it := range res.Items {
			items = append(items, map[string]string{"hash": it.Hash, "header": it.Header})
		}
		items = append(items, items[0], items[1])
		call(t, key, "/ks/decrypt/batch", map[string]any{"items": items[:6]}, from()).wantError(t, http.StatusBadRequest, "invalid")
		call(t, key, "/ks/decrypt/batch", map[string]any{"items": items[:5]}, from()).want(t, http.StatusOK)
		wantRetry(t, call(t, key, "/ks/decrypt", items[0], from()), "1")
		if n := records(t, keyID, "decrypt"); n != 5 {
			t.Fatalf("%d decrypt calls, want the 5 of the batch that passed", n)
		}
		// The 429s of the encrypt batch and the single encrypt came
		// together: the second is a count, in the decrypt's 429 a second
		// later (or in a record of its own if the count was written first).
		if n := refusals(t, keyID); n != 5 {
			t.Fatalf("%d refusals in the ratelimit records, want the 5", n)
		}
		if n := records(t, keyID, "ratelimit"); n != 4 && n != 5 {
			t.Fatalf("%d ratelimit records, want 4 (or 5 with a count alone)", n)
		}
	})

	t.Run("address", func(t *testing.T) {
		key, keyID := e.apiKey(t, flags...)
		ip := from()
		encryptBatch(t, key, 5, ip).want(t, http.StatusOK) // the address: 8 -> 3
		clock.Advance(time.Second)                         // the key's bucket is full again
		// 1 call for the request before the credential is known, 2 left
		// (and a thousandth): 4 more are refused, and the Retry-After is
		// until the address holds all 5 of the request again, 3 calls at
		// 0.001 a second.
		wantRetry(t, encryptBatch(t, key, 5, ip), "2999")
		if n := records(t, keyID, "encrypt"); n != 5 {
			t.Fatalf("%d encrypt calls, want the 5 of the batch that passed", n)
		}
		// Nothing of the credential was taken: 5 calls from elsewhere pass.
		encryptBatch(t, key, 5, from()).want(t, http.StatusOK)
		// Nothing more of the address either: its 2 calls are left.
		other, _ := e.apiKey(t, flags...)
		call(t, other, "/ks/encrypt", map[string]any{"ringname": "bulk"}, ip).want(t, http.StatusOK)
		call(t, other, "/ks/encrypt", map[string]any{"ringname": "bulk"}, ip).want(t, http.StatusOK)
		clock.Advance(time.Second) // a refusal of the address a second after the batch's is a record
		call(t, other, "/ks/encrypt", map[string]any{"ringname": "bulk"}, ip).wantError(t, http.StatusTooManyRequests, "rate_limited")
		if n := len(e.activity(t, func(a *kms.Activity) bool { return a.Action == "ratelimit" && a.Props["limit"] == "address" })); n != 2 {
			t.Fatalf("%d ratelimit records of the address, want 2 (the batch, the single call)", n)
		}
	})

	t.Run("account", func(t *testing.T) {
		acct, err := e.svc.CreateAccount(e.rootCtx, kms.AccountInput{UID: "limited"})
		if err != nil {
			t.Fatal(err)
		}
		limited = acct.ID
		clock.Advance(time.Hour)
		c1, _ := e.apiKeyIn(t, limited, flags...)
		c2, c2ID := e.apiKeyIn(t, limited, flags...)
		encryptBatch(t, c1, 5, from()).want(t, http.StatusOK) // the Account: 8 -> 3
		wantRetry(t, encryptBatch(t, c2, 4, from()), "1")
		if n := records(t, c2ID, "encrypt"); n != 0 {
			t.Fatalf("a refused batch made %d encrypt calls", n)
		}
		encryptBatch(t, c2, 3, from()).want(t, http.StatusOK)
		if rs := e.activity(t, func(a *kms.Activity) bool { return a.KeyID == c2ID && a.Action == "ratelimit" }); len(rs) != 1 || rs[0].Props["limit"] != "account" {
			t.Fatalf("ratelimit records of c2 = %v, want one of the account's limit", rs)
		}
	})
}

// TestRateLimitIPv6Prefix: over HTTP, the client addresses of one IPv6
// /64 share the rate limit of one address, and another /64 has its own.
func TestRateLimitIPv6Prefix(t *testing.T) {
	e := newEnv(t, withClock(kmstest.NewClock()), withRateLimits(kms.RateLimits{PerAddr: kms.Rate{PerSecond: 0.001, Burst: 1}}))
	list := func(addr string) reply {
		t.Helper()
		return e.send(t, http.MethodGet, "/ks/keyrings", req{auth: []string{"Bearer " + e.root}, header: http.Header{"X-Real-Ip": {addr}}})
	}
	list("2001:db8:5:5::1").want(t, http.StatusOK)
	list("2001:db8:5:5:8000::2").wantError(t, http.StatusTooManyRequests, "rate_limited")
	list("2001:db8:5:6::1").want(t, http.StatusOK)
}
