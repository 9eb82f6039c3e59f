package kms_test

import (
	"context"
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
