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
//
// A refusal is an activity record (action "ratelimit", valid false),
// except that a flood is recorded once a second: of the refusals of one
// bucket for one reason (rate limited, or a batch past the burst), the
// first in a second is recorded, and the others are counted in memory,
// costing no write. The count is the "suppressed" prop of the bucket's
// next record: its first refusal after the second, or, when none comes,
// a record of the count alone ("flush": true, by the credential of the
// bucket's last record), written once the second has ended, or by Close.
// Every refusal is so in the trail, on its own or counted.
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

// Admit applies the rate limits (Options.RateLimits) to one call: it is
// AdmitN(ctx, p, 1). With p nil, it takes a call from the client address
// in ctx (WithClientAddr); with p, a call of p's credential and of its
// Account. httpapi calls it twice per request: before it checks the
// credential, and after (AdmitN, for a batch). A call refused is an error of kind RateLimited
// whose RetryAfter says when the buckets have a call again, and an
// activity record (action "ratelimit", valid false, the limit in its
// props), or a count in one (RateLimits). In-process callers are not
// limited unless they call Admit.
func (s *Service) Admit(ctx context.Context, p *Principal) error {
	return s.AdmitN(ctx, p, 1)
}

// AdmitN applies the rate limits to n calls made at once: the items of a
// batch, which count as the calls of their own they are
// (EncryptBatchInput.Calls, DecryptBatchInput.Calls). Each of the n takes
// a call from every bucket that applies: with p nil, the client address
// in ctx; with p, p's credential, its Account, and the client address for
// the n-1 calls past the first, whose call of the address Admit(ctx, nil)
// took before the credential was known (httpapi admits a batch request so:
// Admit(ctx, nil) before it checks the credential, AdmitN(ctx, p, n) once
// the body says how many calls it makes).
//
// The n calls are admitted all together or not at all: when a bucket does
// not hold its share, the error is RateLimited, its RetryAfter the time
// until every bucket holds the calls of the request again (its call of
// the address before the credential included), and nothing is taken from
// any bucket. More calls than a bucket's burst can never be admitted:
// that error is of kind Invalid, and its message names the burst, the
// largest batch the caller may send. Either refusal is an activity
// record (action "ratelimit", valid false, the limit and the calls in its
// props), or a count in one (RateLimits). n below 1 counts as 1.
func (s *Service) AdmitN(ctx context.Context, p *Principal, n int) error {
	return s.admit(ctx, p, max(n, 1), 0)
}

// AdmitRest applies the rate limits to the calls past the first of a
// request of n calls whose first Admit(ctx, p) took before its body was
// read: a handler that admits a request so charges the caller for the
// body it reads and parses, and refuses a caller whose buckets are empty
// before reading it. The n-1 calls are admitted as AdmitN admits n: all
// together or not at all (the first stays taken), refused with kind
// Invalid when n is more than a bucket's burst, the refusal an activity
// record or a count in one. n of 1 or less admits nothing more.
func (s *Service) AdmitRest(ctx context.Context, p *Principal, n int) error {
	if n <= 1 {
		return nil
	}
	return s.admit(ctx, p, n, 1)
}

// admit is AdmitN of n calls, of which Admit took taken (0 or 1) already
// from the buckets of p (or of the client address, p nil).
func (s *Service) admit(ctx context.Context, p *Principal, n, taken int) error {
	l := s.limits
	if l == nil {
		return nil
	}
	var claims [3]ratelimit.Claim
	var limits [3]string
	k := 0
	claim := func(limit string, bs *ratelimit.Set, name string, r Rate, calls, before int) {
		if calls > 0 {
			claims[k] = ratelimit.Claim{Set: bs, Name: name, PerSecond: r.PerSecond, Burst: r.burst(),
				N: float64(calls), Before: float64(before)}
			limits[k] = limit
			k++
		}
	}
	if l.addrRate.on() && (p == nil || n > 1) { // with p, the address has a call to give for n-1 only
		if addr := s.clientAddr(ctx); addr != "" {
			if p == nil {
				claim(limitAddr, l.addr, addr, l.addrRate, n-taken, taken)
			} else {
				claim(limitAddr, l.addr, addr, l.addrRate, n-1, 1)
			}
		}
	}
	if p != nil {
		if l.keyRate.on() {
			claim(limitAPIKey, l.key, p.ID, l.keyRate, n-taken, taken)
		}
		if l.perAccount != nil && p.AccountID != "" {
			if r := l.perAccount(p.AccountID); r.on() {
				claim(limitAccount, l.account, p.AccountID, r, n-taken, taken)
			}
		}
	}
	if k == 0 {
		return nil
	}
	if p == nil {
		p = anonymous
	}
	if n > 1 { // one call fits every bucket: a burst is at least 1
		// The smallest burst the batch goes past, if any: no wait admits it.
		over := -1
		for i := range k {
			if c := &claims[i]; float64(n) > c.Burst && (over < 0 || c.Burst < claims[over].Burst) {
				over = i
			}
		}
		if over >= 0 {
			return s.batchTooLarge(p, limits[over], claims[over].Name, n, int(claims[over].Burst))
		}
	}
	if which, wait := ratelimit.TakeAll(s.now(), claims[:k]); which >= 0 {
		return s.rateLimited(p, limits[which], claims[which].Name, n, wait)
	}
	return nil
}

// rateLimited records the refusal of n calls by the bucket name of limit
// and returns its error.
func (s *Service) rateLimited(p *Principal, limit, name string, n int, wait time.Duration) error {
	// Retry-After counts whole seconds: round up, at least one.
	wait = time.Duration(max(1, int64(math.Ceil(wait.Seconds())))) * time.Second
	err := &Error{Kind: KindRateLimited, RetryAfter: wait,
		Message: fmt.Sprintf("too many calls (the %s's rate limit): try again in %s", limitName(limit), wait)}
	if n > 1 {
		err.Message = fmt.Sprintf("too many calls (the %s's rate limit) for a batch of %d: try again in %s", limitName(limit), n, wait)
	}
	return s.refuseLimited(p, limit, name, limitProps(limit, n), err)
}

// batchTooLarge records the refusal of a batch of n calls, more than the
// burst of the bucket name of limit, and returns its error.
func (s *Service) batchTooLarge(p *Principal, limit, name string, n, burst int) error {
	err := Errorf(KindInvalid, "a batch of %d calls is more than the %s's rate limit admits at once (a burst of %d): send batches of at most %d items",
		n, limitName(limit), burst, burst)
	props := limitProps(limit, n)
	props["burst"] = burst
	return s.refuseLimited(p, limit, name, props, err)
}

// refusalInterval is the interval of the records of refusals
// (RateLimits): a second, as Retry-After's unit, so that the trail is a
// second at most behind a flood, which costs a record a second a bucket.
const refusalInterval = time.Second

// refusal is what a rate-limit refusal's record says, kept with the
// interval that it opens (rateLimiter.refusals) for a record of its count.
type refusal struct {
	p     *Principal
	limit string
	err   error
}

// refuseLimited records the refusal err by the bucket name of limit, with
// props, unless one of the same bucket and reason was recorded less than
// refusalInterval ago: then it only counts it. It returns err, or the
// journal's error.
func (s *Service) refuseLimited(p *Principal, limit, name string, props map[string]any, err error) error {
	key := limit + "\x00" + ErrorKind(err).String() + "\x00" + name
	rf := refusal{p, limit, err}
	record, carried := s.limits.refusals.Refuse(key, rf, s.now())
	if !record {
		return err
	}
	if carried > 0 {
		props["suppressed"] = carried
	}
	if jerr := s.recordRefusal(p, props, err); jerr != nil {
		s.limits.refusals.Requeue(key, rf, carried)
		return jerr
	}
	return err
}

// recordRefusal writes a ratelimit record of p with props and the result
// of fail, and returns the journal's error, nil when it is written.
func (s *Service) recordRefusal(p *Principal, props map[string]any, fail error) error {
	if err := s.journal.Submit(&activityJob{Rec: s.newActivity(p, "ratelimit", "", false, props), Fail: fail}); err != fail {
		return err
	}
	return nil
}

// recordCount writes the record of a count of refusals that no record
// of a refusal carried.
func (s *Service) recordCount(c ratelimit.Pending[refusal]) error {
	return s.recordRefusal(c.V.p, map[string]any{"limit": c.V.limit, "suppressed": c.N, "flush": true}, c.V.err)
}

// limitProps are the props of a refusal's record: the limit, and the
// calls of a batch.
func limitProps(limit string, n int) map[string]any {
	props := map[string]any{"limit": limit}
	if n > 1 {
		props["calls"] = n
	}
	return props
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

// rateLimiter holds the buckets of a Service, and the counts of the
// refusals not recorded on their own.
type rateLimiter struct {
	addr, key, account *ratelimit.Set
	addrRate, keyRate  Rate
	perAccount         func(string) Rate
	refusals           *ratelimit.Refusals[refusal]
}

func newRateLimiter(l RateLimits) *rateLimiter {
	if !l.PerAddr.on() && !l.PerAPIKey.on() && l.PerAccount == nil {
		return nil
	}
	return &rateLimiter{
		addr: ratelimit.New(), key: ratelimit.New(), account: ratelimit.New(),
		addrRate: l.PerAddr, keyRate: l.PerAPIKey, perAccount: l.PerAccount,
		refusals: ratelimit.NewRefusals[refusal](refusalInterval),
	}
}

// startRateLimits starts the tick that records the counts of refusals
// whose interval ended with no further refusal.
func (s *Service) startRateLimits() {
	if s.limits != nil {
		s.limits.refusals.Start(s.now, s.recordCount, func(err error) {
			s.log.Error().Err(err).Msg("recording the counts of rate-limit refusals failed; trying again")
		})
	}
}
