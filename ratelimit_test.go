package kms_test

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/kmstest"
)

// TestRateLimits: each credential, client address and Account has a
// token bucket; a call that finds it empty is RateLimited with a
// RetryAfter, recorded as a refusal; it refills with time; buckets are
// separate.
func TestRateLimits(t *testing.T) {
	ctx := context.Background()
	clock := kmstest.ClockAt(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	st := kmstest.MemoryStore(t)
	var acct string
	e := newEnvOn(t, st, kms.Options{MasterKey: kms.GenerateMasterKey(), Now: clock.Now,
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
	clock.Advance(time.Second)
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
	acctRes := e.account(t, "limited")
	acct = acctRes.ID
	clock.Advance(time.Hour)
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

// BenchmarkAdmit is the cost the rate limits add to a call that passes,
// from an IPv4 client and from an IPv6 one (counted by its /64).
func BenchmarkAdmit(b *testing.B) {
	e := newEnvOn(b, kmstest.MemoryStore(b), kms.Options{MasterKey: kms.GenerateMasterKey(),
		RateLimits: kms.RateLimits{PerAPIKey: kms.Rate{PerSecond: 1e12}, PerAddr: kms.Rate{PerSecond: 1e12}}})
	p := kms.PrincipalFrom(e.root)
	for _, addr := range []string{"192.0.2.1", "2001:db8:1:2::1"} {
		b.Run(addr, func(b *testing.B) {
			ctx := kms.WithClientAddr(context.Background(), addr)
			b.ReportAllocs()
			for b.Loop() {
				if err := e.svc.Admit(ctx, nil); err != nil {
					b.Fatal(err)
				}
				if err := e.svc.Admit(ctx, p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestAdmitN: the n calls of a batch take n calls of every bucket that
// applies (credential, Account, and the client address past the one
// Admit(ctx, nil) took), all together or not at all: a refusal, by the
// credential, the address or the Account, takes nothing from any bucket.
// A batch past a burst is Invalid, naming the burst. Each refusal is a
// record, or a count in one when its bucket refused another for the same
// reason less than a second before (TestRateLimitRecords).
func TestAdmitN(t *testing.T) {
	ctx := context.Background()
	clock := kmstest.ClockAt(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	var acct string
	st := kmstest.MemoryStore(t)
	e := newEnvOn(t, st, kms.Options{MasterKey: kms.GenerateMasterKey(), Now: clock.Now,
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
	clock.Advance(600 * time.Millisecond) // 3 calls
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
	clock.Advance(time.Second)                          // b's bucket is full again
	admit("door of batch 2", from, nil, 1, kms.KindNone)
	admit("batch 2, 5 calls", from, b, 5, kms.KindNone) // address 7 -> 2
	clock.Advance(time.Second)
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
	clock.Advance(2 * time.Second)                                      // account 2, c2 full (5)
	admit("c2, 5 calls with 2 of the Account", ctx, c2, 5, kms.KindRateLimited)
	clock.Advance(3 * time.Second) // account 5
	admit("c2, 5 calls with 5 of the Account", ctx, c2, 5, kms.KindNone)

	if err := e.svc.Close(); err != nil { // records the counts left
		t.Fatal(err)
	}
	type rec struct {
		limit, result            string
		calls, burst, suppressed float64
	}
	var got, counts []rec
	err2 = kms.ExportActivity(ctx, st, 1, func(r *kms.Activity) error {
		if r.Action != "ratelimit" {
			return nil
		}
		calls, _ := r.Props["calls"].(float64)
		burst, _ := r.Props["burst"].(float64)
		suppressed, _ := r.Props["suppressed"].(float64)
		limit, _ := r.Props["limit"].(string)
		result, _ := r.Props["result"].(string)
		if r.Valid {
			t.Errorf("a ratelimit record is valid: %+v", r)
		}
		if r.Props["flush"] == true {
			counts = append(counts, rec{limit, result, calls, burst, suppressed})
		} else {
			got = append(got, rec{limit, result, calls, burst, suppressed})
		}
		return nil
	})
	if err2 != nil {
		t.Fatal(err2)
	}
	want := []rec{
		{"apikey", "invalid", 50, 5, 0},
		{"apikey", "rate_limited", 0, 0, 0},
		// a's 4 calls and its call after 3, refused 0.6s later: counted
		{"address", "rate_limited", 5, 0, 0},
		{"address", "invalid", 13, 12, 0},
		{"account", "rate_limited", 4, 0, 0},
		{"account", "rate_limited", 5, 0, 0}, // 2s after the Account's first
	}
	if !slices.Equal(got, want) {
		t.Fatalf("ratelimit records = %+v\nwant %+v", got, want)
	}
	if want := []rec{{"apikey", "rate_limited", 0, 0, 2}}; !slices.Equal(counts, want) {
		t.Fatalf("ratelimit records of counts alone = %+v\nwant %+v", counts, want)
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

// TestRateLimitRecords: a flood of refusals is recorded once an interval
// (a second) per bucket and reason: the first refusal is a record, the
// others in the second are counted without a journal job, and their
// count goes in the bucket's next record, or a record of its own
// ("flush") once the second has ended or at Close. Every refused call
// answers as before; the records and counts add up to every refusal;
// buckets and reasons are counted apart.
func TestRateLimitRecords(t *testing.T) {
	ctx := context.Background()
	clock := kmstest.ClockAt(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	st := kmstest.MemoryStore(t)
	obs := &recordingObserver{actions: map[string]int{}}
	e := newEnvOn(t, st, kms.Options{MasterKey: kms.GenerateMasterKey(), Now: clock.Now, Observer: obs,
		RateLimits: kms.RateLimits{PerAPIKey: kms.Rate{PerSecond: 0.1, Burst: 2}}})
	a, b := kms.PrincipalFrom(e.as(t, kms.Flags{"*": true})), kms.PrincipalFrom(e.as(t, kms.Flags{"*": true}))
	refusals := map[string]int{} // key ID/result -> refused calls
	admit := func(p *kms.Principal, n int, want kms.Kind) {
		t.Helper()
		err := e.svc.AdmitN(ctx, p, n)
		if got := kms.ErrorKind(err); got != want {
			t.Fatalf("AdmitN(%s, %d) = %v, want %v", p.ID, n, err, want)
		}
		switch want {
		case kms.KindRateLimited:
			if e := kms.AsError(err); e.RetryAfter < time.Second || e.RetryAfter%time.Second != 0 {
				t.Fatalf("AdmitN(%s, %d): RetryAfter = %v, want whole seconds, at least one", p.ID, n, e.RetryAfter)
			}
		case kms.KindNone:
			return
		}
		refusals[p.ID+"/"+want.String()]++
	}
	committed := func() int { // ratelimit records, reported before their calls are answered
		obs.mu.Lock()
		defer obs.mu.Unlock()
		return obs.actions["ratelimit/rate_limited"] + obs.actions["ratelimit/invalid"]
	}
	records := func(p *kms.Principal) int {
		t.Helper()
		l, err := e.svc.SearchActivity(e.root, kms.ActivityFilter{KeyID: p.ID, Action: "ratelimit"}, kms.PageRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return len(l.Data)
	}

	admit(a, 2, kms.KindNone)
	admit(a, 1, kms.KindRateLimited) // recorded
	calls := committed()
	for i := range 20 { // within the second: counted, no journal job
		clock.Advance(40 * time.Millisecond)
		admit(a, 1, kms.KindRateLimited)
		if i == 0 {
			admit(a, 3, kms.KindInvalid) // past the burst: a reason of its own, recorded
			calls++
		}
		admit(a, 3, kms.KindInvalid)
	}
	admit(b, 2, kms.KindNone)
	for range 5 {
		admit(b, 1, kms.KindRateLimited) // another bucket: its first is recorded
	}
	calls++
	if got := committed(); got != calls {
		t.Fatalf("%d ratelimit records committed after the refusals of two buckets in a second, want %d: the first of each (and of each reason)", got, calls)
	}
	if n := records(a); n != 2 {
		t.Fatalf("%d ratelimit records of a after 42 refusals in a second, want 2 (one rate limited, one batch past the burst)", n)
	}
	if n := records(b); n != 1 {
		t.Fatalf("%d ratelimit records of b after 5 refusals in a second, want 1", n)
	}

	// After the second: a's next refusal is recorded, and its count is in
	// that record (or in a record of its own, if the tick came first).
	clock.Advance(time.Second)
	admit(a, 1, kms.KindRateLimited)
	admit(a, 1, kms.KindRateLimited) // counted: it waits for Close
	if n := records(a); n < 3 || n > 4 {
		t.Fatalf("%d ratelimit records of a after the second, want 3 or 4", n)
	}

	// Close records what is left; the trail adds up.
	if err := e.svc.Close(); err != nil {
		t.Fatal(err)
	}
	got := map[string]int{} // key ID/result -> refusals in the trail
	flushes := map[string]int{}
	err := kms.ExportActivity(ctx, st, 1, func(r *kms.Activity) error {
		if r.Action != "ratelimit" {
			return nil
		}
		if r.Valid || r.Props["limit"] != "apikey" {
			t.Errorf("a ratelimit record: %+v", r)
		}
		k := r.KeyID + "/" + r.Props["result"].(string)
		suppressed, _ := r.Props["suppressed"].(float64)
		if r.Props["flush"] == true {
			if suppressed < 1 {
				t.Errorf("a flush record without a count: %+v", r)
			}
			flushes[k]++
		} else {
			got[k]++
		}
		got[k] += int(suppressed)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got, refusals) {
		t.Fatalf("refusals in the trail (records and counts) = %v, want %v", got, refusals)
	}
	// Pending at Close at least: a's last refused call, b's 4, a's 20
	// batches but the first.
	for _, k := range []string{a.ID + "/rate_limited", a.ID + "/invalid", b.ID + "/rate_limited"} {
		if flushes[k] < 1 {
			t.Errorf("no flush record of %s: %v", k, flushes)
		}
	}
}

// TestAdmitRest: a request admitted for one call before its body was
// read (Admit) and found to make n calls takes the n-1 others of every
// bucket (AdmitRest), all together or not at all; past a burst it is
// Invalid, counting the call already taken; n of 1 takes nothing more.
func TestAdmitRest(t *testing.T) {
	ctx := context.Background()
	clock := kmstest.ClockAt(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	e := newEnvOn(t, kmstest.MemoryStore(t), kms.Options{MasterKey: kms.GenerateMasterKey(), Now: clock.Now,
		RateLimits: kms.RateLimits{
			PerAPIKey: kms.Rate{PerSecond: 5, Burst: 5},
			PerAddr:   kms.Rate{PerSecond: 0.001, Burst: 12},
		}})
	check := func(what string, err error, want kms.Kind) *kms.Error {
		t.Helper()
		if got := kms.ErrorKind(err); got != want {
			t.Fatalf("%s = %v, want %v", what, err, want)
		}
		return kms.AsError(err)
	}
	a := kms.PrincipalFrom(e.as(t, kms.Flags{"*": true}))
	from := kms.WithClientAddr(ctx, "192.0.2.7")

	// A request of 5 calls: the address's first before the credential is
	// known, the credential's first before the body is read, the rest.
	check("the address's first", e.svc.Admit(from, nil), kms.KindNone)    // address 11
	check("the credential's first", e.svc.Admit(from, a), kms.KindNone)   // key 4, address 11
	check("the 4 others of 5", e.svc.AdmitRest(from, a, 5), kms.KindNone) // key 0, address 7
	check("a call of the empty credential", e.svc.Admit(ctx, a), kms.KindRateLimited)
	check("one call: nothing more", e.svc.AdmitRest(ctx, a, 1), kms.KindNone)
	for i := range 7 {
		check("the address's call "+string(rune('1'+i))+" of 7 left", e.svc.Admit(from, nil), kms.KindNone)
	}
	check("the address's call past 5 of the request and 7", e.svc.Admit(from, nil), kms.KindRateLimited)

	// Past the burst, the first call counted: Invalid, and the rest of
	// the bucket untouched.
	clock.Advance(time.Second)                                 // key 5
	check("the first of 6", e.svc.Admit(ctx, a), kms.KindNone) // key 4
	if err := check("the 5 others of 6, burst 5", e.svc.AdmitRest(ctx, a, 6), kms.KindInvalid); !strings.Contains(err.Message, "burst of 5") {
		t.Fatalf("6 calls, burst 5: %q, want the burst named", err.Message)
	}
	check("the 4 others of 5 after 6 were refused", e.svc.AdmitRest(ctx, a, 5), kms.KindNone) // key 0

	// Short: RateLimited until the bucket holds the whole request again,
	// and nothing taken.
	clock.Advance(600 * time.Millisecond)                      // key 3
	check("the first of 4", e.svc.Admit(ctx, a), kms.KindNone) // key 2
	if err := check("the 3 others of 4 with 2 in the bucket", e.svc.AdmitRest(ctx, a, 4), kms.KindRateLimited); err.RetryAfter != time.Second {
		t.Fatalf("3 others of 4 with 2: RetryAfter = %v, want 1s", err.RetryAfter)
	}
	check("the 2 others of 3 after 4 were refused", e.svc.AdmitRest(ctx, a, 3), kms.KindNone) // key 0
	check("a call after", e.svc.Admit(ctx, a), kms.KindRateLimited)
}
