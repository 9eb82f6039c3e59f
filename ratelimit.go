package kms

import (
	"context"
	"fmt"
	"hash/maphash"
	"math"
	"sync"
	"time"
)

// Rate is a token-bucket limit: a bucket of Burst calls fills at
// PerSecond calls a second, and each call takes one; a call that finds
// it empty is refused. The zero Rate is no limit.
type Rate struct {
	PerSecond float64
	Burst     int // at least 1 when PerSecond is set; zero means one second's worth
}

func (r Rate) on() bool { return r.PerSecond > 0 }

func (r Rate) burst() float64 {
	if r.Burst > 0 {
		return float64(r.Burst)
	}
	return math.Max(1, math.Ceil(r.PerSecond))
}

// RateLimits keep one client from starving the others (Service.Admit).
// The buckets are each process's own: behind a load balancer that
// spreads a client's calls over n nodes, a client gets up to n times the
// rate.
type RateLimits struct {
	// PerAPIKey limits each credential: an API key, or a User's access
	// tokens (all of one User's together).
	PerAPIKey Rate
	// PerAddr limits each client address, before its credential is
	// checked (so that guessing credentials is limited too).
	PerAddr Rate
	// PerAccount, when set, gives the limit of all the credentials of an
	// Account together; the zero Rate for none.
	PerAccount func(accountID string) Rate
}

// Which limit refused a call, in the "limit" prop of its record.
const (
	limitAddr    = "address"
	limitAPIKey  = "apikey"
	limitAccount = "account"
)

// maxBuckets bounds the buckets of one kind kept in memory: past it, the
// full ones (idle long enough to have refilled) are dropped, and if none
// is, the oldest half.
const maxBuckets = 1 << 16

// Admit applies the rate limits (Options.RateLimits) to one call. With p
// nil, it takes a call from the client address in ctx (WithClientAddr);
// with p, a call of p's credential and of its Account. httpapi calls it
// twice per request: before it checks the credential, and after. A call
// refused is an error of kind RateLimited whose RetryAfter says when the
// bucket has a call again, and an activity record (action "ratelimit",
// valid false, the limit in its props), as every refusal is. In-process
// callers are not limited unless they call Admit.
func (s *Service) Admit(ctx context.Context, p *Principal) error {
	l := s.limits
	if l == nil {
		return nil
	}
	now := s.now()
	if p == nil {
		if addr := clientAddr(ctx); addr != "" && l.addr.rate.on() {
			if wait := l.addr.take(addr, now); wait > 0 {
				return s.rateLimited(anonymous, limitAddr, wait)
			}
		}
		return nil
	}
	if l.key.rate.on() {
		if wait := l.key.take(p.ID, now); wait > 0 {
			return s.rateLimited(p, limitAPIKey, wait)
		}
	}
	if l.perAccount != nil && p.AccountID != "" {
		if r := l.perAccount(p.AccountID); r.on() {
			if wait := l.account.takeAt(p.AccountID, r, now); wait > 0 {
				return s.rateLimited(p, limitAccount, wait)
			}
		}
	}
	return nil
}

// rateLimited records the refusal and returns its error.
func (s *Service) rateLimited(p *Principal, limit string, wait time.Duration) error {
	// Retry-After counts whole seconds: round up, at least one.
	wait = time.Duration(max(1, int64(math.Ceil(wait.Seconds())))) * time.Second
	err := &Error{Kind: KindRateLimited, RetryAfter: wait,
		Message: fmt.Sprintf("too many calls (the %s's rate limit): try again in %s", limitName(limit), wait)}
	return s.refuse(p, "ratelimit", "", map[string]any{"limit": limit}, err)
}

func limitName(limit string) string {
	switch limit {
	case limitAddr:
		return "client address"
	case limitAPIKey:
		return "credential"
	}
	return limit
}

// rateLimiter holds the buckets of a Service.
type rateLimiter struct {
	addr, key, account bucketSet
	perAccount         func(string) Rate
}

func newRateLimiter(l RateLimits) *rateLimiter {
	if !l.PerAddr.on() && !l.PerAPIKey.on() && l.PerAccount == nil {
		return nil
	}
	rl := &rateLimiter{perAccount: l.PerAccount}
	rl.addr.init(l.PerAddr)
	rl.key.init(l.PerAPIKey)
	rl.account.init(Rate{})
	return rl
}

// bucketSet is the buckets of one kind, by name, in shards.
type bucketSet struct {
	rate   Rate
	seed   maphash.Seed
	shards [16]bucketShard
}

type bucketShard struct {
	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

func (bs *bucketSet) init(r Rate) {
	bs.rate, bs.seed = r, maphash.MakeSeed()
	for i := range bs.shards {
		bs.shards[i].buckets = map[string]*bucket{}
	}
}

func (bs *bucketSet) take(name string, now time.Time) time.Duration {
	return bs.takeAt(name, bs.rate, now)
}

// takeAt takes a call from the bucket of name under rate r, and returns
// zero, or how long until the bucket has a call.
func (bs *bucketSet) takeAt(name string, r Rate, now time.Time) time.Duration {
	sh := &bs.shards[maphash.String(bs.seed, name)%uint64(len(bs.shards))]
	burst := r.burst()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	b := sh.buckets[name]
	if b == nil {
		if limit := maxBuckets / len(bs.shards); len(sh.buckets) >= limit {
			sh.prune(now, r, limit)
		}
		b = &bucket{tokens: burst, last: now}
		sh.buckets[name] = b
	}
	if d := now.Sub(b.last); d > 0 {
		b.tokens = math.Min(burst, b.tokens+d.Seconds()*r.PerSecond)
		b.last = now
	}
	if b.tokens >= 1 {
		b.tokens--
		return 0
	}
	return time.Duration((1 - b.tokens) / r.PerSecond * float64(time.Second))
}

// prune drops the buckets that have refilled (a new one is the same),
// and if that leaves more than half of limit, those used longer ago than
// the mean.
func (sh *bucketShard) prune(now time.Time, r Rate, limit int) {
	burst := r.burst()
	var sum float64
	for name, b := range sh.buckets {
		if b.tokens+now.Sub(b.last).Seconds()*r.PerSecond >= burst {
			delete(sh.buckets, name)
			continue
		}
		sum += float64(b.last.UnixNano())
	}
	if len(sh.buckets) <= limit/2 {
		return
	}
	mean := time.Unix(0, int64(sum/float64(len(sh.buckets))))
	for name, b := range sh.buckets {
		if !b.last.After(mean) {
			delete(sh.buckets, name)
		}
	}
}
