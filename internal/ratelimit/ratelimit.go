// Package ratelimit keeps token buckets by name: a bucket of burst calls
// fills at a rate of calls a second, and each call takes one; a call that
// finds its bucket empty is told how long until it has one.
package ratelimit

import (
	"hash/maphash"
	"math"
	"sync"
	"time"
)

// MaxBuckets bounds the buckets of a Set kept in memory: past it, the
// full ones (idle long enough to have refilled) are dropped, and if none
// is, the oldest half.
const MaxBuckets = 1 << 16

// Set is the buckets of one kind, by name, in shards. The zero Set is not
// ready: call New. It is safe for concurrent use.
type Set struct {
	seed   maphash.Seed
	shards [16]shard
}

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
	bs := &Set{seed: maphash.MakeSeed()}
	for i := range bs.shards {
		bs.shards[i].buckets = map[string]*bucket{}
	}
	return bs
}

// Take takes a call from the bucket of name, which holds up to burst
// calls (at least 1) and fills at perSecond (above 0), and returns zero,
// or how long until the bucket has a call.
func (bs *Set) Take(name string, perSecond, burst float64, now time.Time) time.Duration {
	sh := &bs.shards[maphash.String(bs.seed, name)%uint64(len(bs.shards))]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	b := sh.buckets[name]
	if b == nil {
		if limit := MaxBuckets / len(bs.shards); len(sh.buckets) >= limit {
			sh.prune(now, perSecond, burst, limit)
		}
		b = &bucket{tokens: burst, last: now}
		sh.buckets[name] = b
	}
	if d := now.Sub(b.last); d > 0 {
		b.tokens = math.Min(burst, b.tokens+d.Seconds()*perSecond)
		b.last = now
	}
	if b.tokens >= 1 {
		b.tokens--
		return 0
	}
	return time.Duration((1 - b.tokens) / perSecond * float64(time.Second))
}

// Len returns how many buckets the Set holds.
func (bs *Set) Len() int {
	n := 0
	for i := range bs.shards {
		sh := &bs.shards[i]
		sh.mu.Lock()
		n += len(sh.buckets)
		sh.mu.Unlock()
	}
	return n
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
