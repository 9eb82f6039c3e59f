package kms_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/store/badgerstore"
)

// TestRateLimits: each credential, client address and Account has a
// token bucket; a call that finds it empty is RateLimited with a
// RetryAfter, recorded as a refusal; it refills with time; buckets are
// separate.
func TestRateLimits(t *testing.T) {
	ctx := context.Background()
	clock := newFixedClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	st, err := badgerstore.OpenInMemory()
	if err != nil {
		t.Fatal(err)
	}
	var acct string
	e := newEnvOn(t, st, kms.Options{MasterKey: kms.GenerateMasterKey(), Now: clock.now,
		RateLimits: kms.RateLimits{
			PerAPIKey: kms.Rate{PerSecond: 1, Burst: 3},
			PerAddr:   kms.Rate{PerSecond: 2},
			PerAccount: func(id string) kms.Rate {
				if id == acct {
					return kms.Rate{PerSecond: 0.5, Burst: 4}
				}
				return kms.Rate{}
			},
		}})
	a, b := kms.PrincipalFrom(e.as(t, kms.Flags{"*": true})), kms.PrincipalFrom(e.as(t, kms.Flags{"*": true}))

	admit := func(what string, p *kms.Principal, c context.Context, want kms.Kind) {
		t.Helper()
		err := e.svc.Admit(c, p)
		if got := kms.ErrorKind(err); got != want {
			t.Fatalf("%s: Admit = %v, want %v", what, err, want)
		}
		if want == kms.KindRateLimited {
			if e := kms.AsError(err); e.RetryAfter < time.Second || e.RetryAfter%time.Second != 0 {
				t.Fatalf("%s: RetryAfter = %v, want whole seconds, at least one", what, e.RetryAfter)
			}
		}
	}
	for i := range 3 {
		admit("key a, call "+string(rune('1'+i)), a, ctx, kms.KindNone)
	}
	admit("key a, call 4", a, ctx, kms.KindRateLimited)
	admit("key b, call 1", b, ctx, kms.KindNone) // its own bucket
	clock.advance(time.Second)
	admit("key a, a second later", a, ctx, kms.KindNone)
	admit("key a, again", a, ctx, kms.KindRateLimited)

	// Addresses: a burst of one second's worth (2).
	from := kms.WithClientAddr(ctx, "192.0.2.7")
	admit("address, call 1", nil, from, kms.KindNone)
	admit("address, call 2", nil, from, kms.KindNone)
	admit("address, call 3", nil, from, kms.KindRateLimited)
	admit("another address", nil, kms.WithClientAddr(ctx, "192.0.2.8"), kms.KindNone)
	admit("no address", nil, ctx, kms.KindNone)

	// An Account: all its keys together.
	acctRes, err := e.svc.CreateAccount(e.root, kms.AccountInput{UID: "limited"})
	if err != nil {
		t.Fatal(err)
	}
	acct = acctRes.ID
	clock.advance(time.Hour)
	c1 := kms.PrincipalFrom(e.asIn(t, acct, kms.Flags{"keyring.*.read": true}))
	c2 := kms.PrincipalFrom(e.asIn(t, acct, kms.Flags{"keyring.*.read": true}))
	for i := range 4 {
		p := c1
		if i%2 == 1 {
			p = c2
		}
		admit("account, call "+string(rune('1'+i)), p, ctx, kms.KindNone)
	}
	admit("account, call 5", c2, ctx, kms.KindRateLimited)
	admit("a key of another Account", a, ctx, kms.KindNone)

	l, err := e.svc.SearchActivity(e.root, kms.ActivityFilter{Action: "ratelimit"}, kms.PageRequest{})
	if err != nil {
		t.Fatal(err)
	}
	limits := map[string]int{}
	for _, r := range l.Data {
		if r.Valid {
			t.Errorf("a ratelimit record is valid: %+v", r)
		}
		limit, _ := r.Props["limit"].(string)
		limits[limit]++
	}
	if limits["apikey"] != 2 || limits["address"] != 1 || limits["account"] != 1 {
		t.Fatalf("ratelimit records by limit = %v, want apikey 2, address 1, account 1", limits)
	}

	if _, err := kms.New(st, kms.Options{MasterKey: kms.GenerateMasterKey(), RateLimits: kms.RateLimits{PerAPIKey: kms.Rate{PerSecond: -1}}}); kms.ErrorKind(err) != kms.KindInvalid {
		t.Errorf("New(negative rate) = %v, want invalid", err)
	}
}

// BenchmarkAdmit is the cost the rate limits add to a call that passes.
func BenchmarkAdmit(b *testing.B) {
	e := newEnvOn(b, mustMemStore(b), kms.Options{MasterKey: kms.GenerateMasterKey(),
		RateLimits: kms.RateLimits{PerAPIKey: kms.Rate{PerSecond: 1e12}, PerAddr: kms.Rate{PerSecond: 1e12}}})
	p := kms.PrincipalFrom(e.root)
	ctx := kms.WithClientAddr(context.Background(), "192.0.2.1")
	b.ReportAllocs()
	for b.Loop() {
		if err := e.svc.Admit(ctx, nil); err != nil {
			b.Fatal(err)
		}
		if err := e.svc.Admit(ctx, p); err != nil {
			b.Fatal(err)
		}
	}
}

func mustMemStore(tb testing.TB) kms.Store {
	tb.Helper()
	st, err := badgerstore.OpenInMemory()
	if err != nil {
		tb.Fatal(err)
	}
	return st
}

// TestAdmitN: the n calls of a batch take n calls of every bucket that
// applies (credential, Account, and the client address past the one
// Admit(ctx, nil) took), all together or not at all: a refusal, by the
// credential, the address or the Account, takes nothing from any bucket.
// A batch past a burst is Invalid, naming the burst. Each refusal is one
// record.
func TestAdmitN(t *testing.T) {
	ctx := context.Background()
	clock := newFixedClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	var acct string
	e := newEnvOn(t, mustMemStore(t), kms.Options{MasterKey: kms.GenerateMasterKey(), Now: clock.now,
		RateLimits: kms.RateLimits{
			PerAPIKey: kms.Rate{PerSecond: 5, Burst: 5},
			PerAddr:   kms.Rate{PerSecond: 0.001, Burst: 12},
			PerAccount: func(id string) kms.Rate {
				if id == acct {
					return kms.Rate{PerSecond: 1, Burst: 8}
				}
				return kms.Rate{}
			},
		}})
	admit := func(what string, c context.Context, p *kms.Principal, n int, want kms.Kind) *kms.Error {
		t.Helper()
		err := e.svc.AdmitN(c, p, n)
		if got := kms.ErrorKind(err); got != want {
			t.Fatalf("%s: AdmitN(%d) = %v, want %v", what, n, err, want)
		}
		return kms.AsError(err)
	}
	a := kms.PrincipalFrom(e.as(t, kms.Flags{"*": true}))

	// Past the credential's burst: never admitted, and nothing taken.
	err := admit("50 calls, burst 5", ctx, a, 50, kms.KindInvalid)
	if !strings.Contains(err.Message, "burst of 5") || err.RetryAfter != 0 {
		t.Fatalf("50 calls, burst 5: %q, RetryAfter %v; want a message naming the burst of 5, no RetryAfter", err.Message, err.RetryAfter)
	}
	admit("5 calls after 50 were refused", ctx, a, 5, kms.KindNone)
	admit("a call after 5", ctx, a, 1, kms.KindRateLimited)

	// Short of the batch: RateLimited until the bucket holds it all, and
	// nothing taken.
	clock.advance(600 * time.Millisecond) // 3 calls
	if err := admit("4 calls with 3 in the bucket", ctx, a, 4, kms.KindRateLimited); err.RetryAfter != time.Second {
		t.Fatalf("4 calls with 3 in the bucket: RetryAfter = %v, want 1s", err.RetryAfter)
	}
	admit("3 calls after 4 were refused", ctx, a, 3, kms.KindNone)
	admit("a call after 3", ctx, a, 1, kms.KindRateLimited)

	// The address: Admit(ctx, nil) took the first call; AdmitN the rest.
	from := kms.WithClientAddr(ctx, "192.0.2.7")
	b := kms.PrincipalFrom(e.as(t, kms.Flags{"*": true}))
	admit("door of batch 1", from, nil, 1, kms.KindNone)
	admit("batch 1, 5 calls", from, b, 5, kms.KindNone) // address 12 -> 7
	clock.advance(time.Second)                          // b's bucket is full again
	admit("door of batch 2", from, nil, 1, kms.KindNone)
	admit("batch 2, 5 calls", from, b, 5, kms.KindNone) // address 7 -> 2
	clock.advance(time.Second)
	admit("door of batch 3", from, nil, 1, kms.KindNone) // address 1
	if err := admit("batch 3, 5 calls with 1 call of the address", from, b, 5, kms.KindRateLimited); !strings.Contains(err.Message, "client address") {
		t.Fatalf("batch 3: %q, want the client address's limit", err.Message)
	}
	admit("b's 5 calls from no address, after batch 3 was refused", ctx, b, 5, kms.KindNone)
	admit("the address's 1 call left, after batch 3 was refused", from, nil, 1, kms.KindNone)
	admit("a batch of 13 from an address of burst 12", kms.WithClientAddr(ctx, "192.0.2.8"), nil, 13, kms.KindInvalid)

	// An Account: all its keys together.
	acctRes, err2 := e.svc.CreateAccount(e.root, kms.AccountInput{UID: "limited"})
	if err2 != nil {
		t.Fatal(err2)
	}
	acct = acctRes.ID
	c1 := kms.PrincipalFrom(e.asIn(t, acct, kms.Flags{"keyring.*.read": true}))
	c2 := kms.PrincipalFrom(e.asIn(t, acct, kms.Flags{"keyring.*.read": true}))
	admit("c1, 5 calls", ctx, c1, 5, kms.KindNone) // account 8 -> 3
	if err := admit("c2, 4 calls with 3 of the Account", ctx, c2, 4, kms.KindRateLimited); err.RetryAfter != time.Second || !strings.Contains(err.Message, "account") {
		t.Fatalf("c2, 4 calls: %q, RetryAfter %v; want the account's limit, 1s", err.Message, err.RetryAfter)
	}
	admit("c2, 3 calls after 4 were refused", ctx, c2, 3, kms.KindNone) // account 0, c2 2
	clock.advance(2 * time.Second)                                      // account 2, c2 full (5)
	admit("c2, 5 calls with 2 of the Account", ctx, c2, 5, kms.KindRateLimited)
	clock.advance(3 * time.Second) // account 5
	admit("c2, 5 calls with 5 of the Account", ctx, c2, 5, kms.KindNone)

	l, err2 := e.svc.SearchActivity(e.root, kms.ActivityFilter{Action: "ratelimit"}, kms.PageRequest{})
	if err2 != nil {
		t.Fatal(err2)
	}
	type rec struct {
		limit, result string
		calls, burst  float64
	}
	var got []rec
	for _, r := range l.Data {
		calls, _ := r.Props["calls"].(float64)
		burst, _ := r.Props["burst"].(float64)
		limit, _ := r.Props["limit"].(string)
		result, _ := r.Props["result"].(string)
		if r.Valid {
			t.Errorf("a ratelimit record is valid: %+v", r)
		}
		got = append(got, rec{limit, result, calls, burst})
	}
	want := []rec{
		{"apikey", "invalid", 50, 5},
		{"apikey", "rate_limited", 0, 0},
		{"apikey", "rate_limited", 4, 0},
		{"apikey", "rate_limited", 0, 0},
		{"address", "rate_limited", 5, 0},
		{"address", "invalid", 13, 12},
		{"account", "rate_limited", 4, 0},
		{"account", "rate_limited", 5, 0},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("ratelimit records = %+v\nwant %+v", got, want)
	}
}

// TestBatchCalls: a batch counts a call per item; one that its method
// refuses as invalid counts one.
func TestBatchCalls(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   interface{ Calls() int }
		want int
	}{
		{"count", kms.EncryptBatchInput{RingName: "r", Count: 50}, 50},
		{"items", kms.EncryptBatchInput{RingName: "r", Items: make([]kms.EncryptBatchItem, 7)}, 7},
		{"count and items", kms.EncryptBatchInput{RingName: "r", Count: 50, Items: make([]kms.EncryptBatchItem, 7)}, 1},
		{"no ring", kms.EncryptBatchInput{Count: 50}, 1},
		{"too many", kms.EncryptBatchInput{RingName: "r", Count: kms.MaxBatchItems + 1}, 1},
		{"decrypt", kms.DecryptBatchInput{Items: make([]kms.DecryptInput, 9)}, 9},
		{"decrypt, none", kms.DecryptBatchInput{}, 1},
	} {
		if got := tc.in.Calls(); got != tc.want {
			t.Errorf("%s: Calls() = %d, want %d", tc.name, got, tc.want)
		}
	}
}
