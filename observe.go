package kms

import (
	"github.com/ringkms/kms/internal/cache"
)

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
