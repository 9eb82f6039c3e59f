package kms

import (
	"time"

	"github.com/ringkms/kms/internal/cache"
)

// Observer receives measurements of a Service, for a metrics system
// (package metrics implements it with Prometheus). Its methods run on the
// journal's goroutine, once per batch of calls, and hold up every call of
// the next batch while they run: they must be quick and must not block.
type Observer interface {
	// ObserveBatch reports a journal batch: how many calls it held, how
	// long it took from its first call's turn to its answers, how long
	// the trail's append with its sync took within that (zero when the
	// batch appended nothing, or the store appends in its own commit),
	// and the error that failed the whole batch (nil when it committed,
	// whatever the calls' own outcomes).
	ObserveBatch(calls int, commit, appendTime time.Duration, err error)
	// ObserveRecords reports the activity records of a committed batch,
	// in chain order, before the callers are answered. It must neither
	// keep nor change them.
	ObserveRecords(recs []*Activity)
}

// CacheStat counts the look-ups of one of a Service's caches since it
// started: a hit found the entry, a miss read the store (or waited for a
// concurrent read of the same entry).
type CacheStat struct {
	Name   string // rings, ring_names, keys, credentials
	Hits   uint64
	Misses uint64
}

// CacheStats returns the counts of the Service's caches, for metrics.
func (s *Service) CacheStats() []CacheStat {
	return []CacheStat{
		cacheStat("rings", s.rings),
		cacheStat("ring_names", s.ringNames),
		cacheStat("keys", s.keys),
		cacheStat("credentials", s.principals),
	}
}

func cacheStat[K comparable, V any](name string, c *cache.Cache[K, V]) CacheStat {
	hits, misses := c.Counts()
	return CacheStat{Name: name, Hits: hits, Misses: misses}
}
