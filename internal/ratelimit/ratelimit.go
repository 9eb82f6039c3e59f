// Package ratelimit keeps token buckets by name: a bucket of burst calls
// fills at a rate of calls a second, and each call takes one; a call that
// finds its bucket empty is told how long until it has one. Calls made at
// once (the items of a batch) are taken all or none, from one bucket
// (TakeN) or from buckets of several Sets (TakeAll). Refusals thins out
// the records of the calls refused: one a key an interval, and a count
// of the rest.
package ratelimit

import (
	"hash/maphash"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Never is the wait of calls that a bucket cannot hold at all: more than
// its burst.
const Never = time.Duration(math.MaxInt64)

// MaxBuckets bounds the buckets of a Set kept in memory: past it, the
// full ones (idle long enough to have refilled) are dropped, and if none
// is, the oldest half.
const MaxBuckets = 1 << 16

// Set is the buckets of one kind, by name, in shards. The zero Set is not
// ready: call New. It is safe for concurrent use.
type Set struct {
	id     uint64 // the order in which TakeAll locks Sets
	seed   maphash.Seed
	shards [shardCount]shard
}

const shardCount = 16

// setIDs numbers the Sets.
var setIDs atomic.Uint64

type shard struct {
	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

// New returns an empty Set.
func New() *Set {
	bs := &Set{id: setIDs.Add(1), seed: maphash.MakeSeed()}
	for i := range bs.shards {
		bs.shards[i].buckets = map[string]*bucket{}
	}
	return bs
}

// Take takes a call from the bucket of name, which holds up to burst
// calls (at least 1) and fills at perSecond (above 0), and returns zero,
// or how long until the bucket has a call.
func (bs *Set) Take(name string, perSecond, burst float64, now time.Time) time.Duration {
	return bs.TakeN(name, 1, perSecond, burst, now)
}

// TakeN takes n calls (above 0) from the bucket of name, or none: it
// returns zero when the bucket held n calls and they are taken, or else
// how long until it holds n (Never when n is more than burst), and takes
// nothing.
func (bs *Set) TakeN(name string, n, perSecond, burst float64, now time.Time) time.Duration {
	sh := bs.shard(name)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	b := sh.fill(name, perSecond, burst, now)
	if b.tokens >= n {
		b.tokens -= n
		return 0
	}
	return waitFor(b.tokens, n, perSecond, burst)
}

// Claim is calls to take from one bucket: the bucket of Name in Set, of
// burst Burst, filled at PerSecond.
type Claim struct {
	Set              *Set
	Name             string
	PerSecond, Burst float64
	// N is the calls to take; a claim of none is left out.
	N float64
	// Before is the calls that another attempt will take from this
	// bucket ahead of this claim, elsewhere (one already taken for the
	// request before the claim could be made, say): a wait is counted
	// until the bucket holds Before+N, so that the attempt, after it,
	// finds its calls.
	Before float64
}

// TakeAll takes the calls of every claim, or, when a bucket does not hold
// the calls of its claim, takes nothing from any bucket: a refusal leaves
// no bucket short of what it held. It returns which = -1 and zero when the
// calls are taken, or else the wait until every bucket holds its claim's
// (Never when a claim asks for more than its burst) and which claim's
// bucket takes longest to (the first of them in claims on a tie). The
// claims name buckets of distinct Sets (else TakeAll panics), whose
// shards it holds together, locked in one order that every caller
// follows.
func TakeAll(now time.Time, claims []Claim) (which int, wait time.Duration) {
	const inline = 4
	var buf [inline]held
	hs := buf[:0]
	if len(claims) > inline {
		hs = make([]held, 0, len(claims))
	}
	for i := range claims {
		if c := &claims[i]; c.N > 0 {
			hs = append(hs, held{i: i, set: c.Set, sh: c.Set.shard(c.Name)})
		}
	}
	if len(hs) == 1 { // a single call's usual case: one lock, as Take
		return hs[0].take(now, &claims[hs[0].i])
	}
	// Sort by Set (insertion sort: a claim per bucket kind, three at most
	// in practice), so that two TakeAll never wait on each other's locks.
	for i := 1; i < len(hs); i++ {
		for j := i; j > 0 && hs[j].set.id < hs[j-1].set.id; j-- {
			hs[j], hs[j-1] = hs[j-1], hs[j]
		}
	}
	for k := 1; k < len(hs); k++ {
		if hs[k].set == hs[k-1].set {
			panic("ratelimit: TakeAll with two claims on one Set")
		}
	}
	for k := range hs {
		hs[k].sh.mu.Lock()
	}
	defer func() {
		for k := range hs {
			hs[k].sh.mu.Unlock()
		}
	}()
	short := false
	for k := range hs {
		h, c := &hs[k], &claims[hs[k].i]
		h.b = h.sh.fill(c.Name, c.PerSecond, c.Burst, now)
		short = short || h.b.tokens < c.N
	}
	if !short {
		for k := range hs {
			hs[k].b.tokens -= claims[hs[k].i].N
		}
		return -1, 0
	}
	which = -1
	for k := range hs {
		h, c := &hs[k], &claims[hs[k].i]
		w := waitFor(h.b.tokens, c.Before+c.N, c.PerSecond, c.Burst)
		if w > wait || w == wait && w > 0 && h.i < which {
			which, wait = h.i, w
		}
	}
	return which, wait
}

// take is TakeAll of the one claim c.
func (h *held) take(now time.Time, c *Claim) (which int, wait time.Duration) {
	h.sh.mu.Lock()
	defer h.sh.mu.Unlock()
	b := h.sh.fill(c.Name, c.PerSecond, c.Burst, now)
	if b.tokens >= c.N {
		b.tokens -= c.N
		return -1, 0
	}
	return h.i, waitFor(b.tokens, c.Before+c.N, c.PerSecond, c.Burst)
}

// held is a claim of TakeAll, with its shard and bucket.
type held struct {
	i   int // in claims
	set *Set
	sh  *shard
	b   *bucket
}

// shard returns the shard of name.
func (bs *Set) shard(name string) *shard {
	return &bs.shards[maphash.String(bs.seed, name)%uint64(len(bs.shards))]
}

// fill returns the bucket of name, made full if there was none, filled
// for the time since it was last, sh.mu held.
func (sh *shard) fill(name string, perSecond, burst float64, now time.Time) *bucket {
	b := sh.buckets[name]
	if b == nil {
		if limit := MaxBuckets / shardCount; len(sh.buckets) >= limit {
			sh.prune(now, perSecond, burst, limit)
		}
		b = &bucket{tokens: burst, last: now}
		sh.buckets[name] = b
	}
	if d := now.Sub(b.last); d > 0 {
		b.tokens = math.Min(burst, b.tokens+d.Seconds()*perSecond)
		b.last = now
	}
	return b
}

// waitFor is how long until a bucket of tokens holds need, filled at
// perSecond: Never when need is more than burst.
func waitFor(tokens, need, perSecond, burst float64) time.Duration {
	switch {
	case need > burst:
		return Never
	case tokens >= need:
		return 0
	}
	// At least a nanosecond: a wait of zero would read as calls taken.
	return max(1, time.Duration((need-tokens)/perSecond*float64(time.Second)))
}

// Len returns how many buckets the Set holds.
func (bs *Set) Len() int { return sumShards(bs.shards[:], (*shard).len) }

// len returns how many buckets the shard holds.
func (sh *shard) len() int {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return len(sh.buckets)
}

// sumShards sums n, which locks its shard, over shards.
func sumShards[S any](shards []S, n func(*S) int) int {
	sum := 0
	for i := range shards {
		sum += n(&shards[i])
	}
	return sum
}

// prune drops the buckets that have refilled (a new one is the same),
// and if that leaves more than half of limit, those used longer ago than
// the mean.
func (sh *shard) prune(now time.Time, perSecond, burst float64, limit int) {
	var sum float64
	for name, b := range sh.buckets {
		if b.tokens+now.Sub(b.last).Seconds()*perSecond >= burst {
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
