package kms

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/ringkms/kms/internal/ratelimit"
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
		if addr := clientAddr(ctx); addr != "" && l.addrRate.on() {
			if wait := take(l.addr, addr, l.addrRate, now); wait > 0 {
				return s.rateLimited(anonymous, limitAddr, wait)
			}
		}
		return nil
	}
	if l.keyRate.on() {
		if wait := take(l.key, p.ID, l.keyRate, now); wait > 0 {
			return s.rateLimited(p, limitAPIKey, wait)
		}
	}
	if l.perAccount != nil && p.AccountID != "" {
		if r := l.perAccount(p.AccountID); r.on() {
			if wait := take(l.account, p.AccountID, r, now); wait > 0 {
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
	addr, key, account *ratelimit.Set
	addrRate, keyRate  Rate
	perAccount         func(string) Rate
}

func newRateLimiter(l RateLimits) *rateLimiter {
	if !l.PerAddr.on() && !l.PerAPIKey.on() && l.PerAccount == nil {
		return nil
	}
	return &rateLimiter{
		addr: ratelimit.New(), key: ratelimit.New(), account: ratelimit.New(),
		addrRate: l.PerAddr, keyRate: l.PerAPIKey, perAccount: l.PerAccount,
	}
}

// take takes a call from the bucket of name in bs under r, and returns
// zero, or how long until the bucket has a call.
func take(bs *ratelimit.Set, name string, r Rate, now time.Time) time.Duration {
	return bs.Take(name, r.PerSecond, r.burst(), now)
}
