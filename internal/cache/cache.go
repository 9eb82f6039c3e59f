package cache

import (
	"errors"
	"sync"
	"sync/atomic"
)

// Cache is a small read-through cache with generation-checked fills: a
// reader notes the generation before it reads the store and fills only if no
// invalidation happened since, so a fill can never bring back a value that a
// concurrent write replaced.
type Cache[K comparable, V any] struct {
	mu      sync.RWMutex
	m       map[K]V
	gen     uint64
	max     int
	flights map[K]*flight[V] // the reads under way in Load
	counts  counts           // look-ups that found their entry (Get, Load) and that read it (Load)
}

// errNoRead is a flight's error until its read returns: if the read
// panics, the loads waiting for it read on their own.
var errNoRead = errors.New("cache: the shared read did not finish")

// counts are a cache's hits and misses.
type counts struct {
	hits, misses atomic.Uint64
}

// flight is one read of load, which the concurrent loads of its key, in
// its generation, wait for.
type flight[V any] struct {
	done    chan struct{} // closed once v and err are set
	gen     uint64
	waiters int // the loads waiting for it, c.mu held
	v       V
	err     error
}

// New returns an empty cache of at most max entries.
func New[K comparable, V any](max int) *Cache[K, V] {
	return &Cache[K, V]{m: make(map[K]V), max: max, flights: make(map[K]*flight[V])}
}

// Load returns k's value from the cache or, on a miss, from read, and
// fills the cache with it unless an invalidation came meanwhile. The
// loads of one key that miss together share one read: after the cache
// was emptied, the calls under way read the store once, not each. A load
// that joins a read begun before an invalidation does not share it, and
// one whose shared read failed (its reader's context ended, say) reads
// on its own: an error is never handed to a caller it was not its own.
func (c *Cache[K, V]) Load(k K, read func() (V, error)) (V, error) {
	if v, ok := c.Get(k); ok {
		return v, nil
	}
	c.mu.Lock()
	if v, ok := c.m[k]; ok {
		c.mu.Unlock()
		c.counts.hits.Add(1)
		return v, nil
	}
	c.counts.misses.Add(1)
	if f, ok := c.flights[k]; ok && f.gen == c.gen {
		f.waiters++
		c.mu.Unlock()
		<-f.done
		if f.err == nil {
			return f.v, nil
		}
		return read()
	}
	f := &flight[V]{done: make(chan struct{}), gen: c.gen}
	c.flights[k] = f
	c.mu.Unlock()
	defer close(f.done)
	f.err = errNoRead // until read returns: if it panics, the waiters read
	f.v, f.err = read()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.flights[k] == f {
		delete(c.flights, k)
	}
	if f.err == nil && c.gen == f.gen {
		c.put(k, f.v)
	}
	return f.v, f.err
}

// Get returns k's value when the cache has it, and counts the hit. (A
// miss is counted by the load that follows it.)
func (c *Cache[K, V]) Get(k K) (V, bool) {
	c.mu.RLock()
	v, ok := c.m[k]
	c.mu.RUnlock()
	if ok {
		c.counts.hits.Add(1)
	}
	return v, ok
}

// Counts returns the look-ups that found their entry and those that read
// the store (or waited for a concurrent read of the same entry).
func (c *Cache[K, V]) Counts() (hits, misses uint64) {
	return c.counts.hits.Load(), c.counts.misses.Load()
}

// Generation returns the cache's generation, for a Fill after a read of
// the store.
func (c *Cache[K, V]) Generation() uint64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.gen
}

// Fill stores v under k unless the cache was invalidated since gen was
// taken.
func (c *Cache[K, V]) Fill(k K, v V, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen {
		return
	}
	c.put(k, v)
}

// put stores v under k, c.mu held.
func (c *Cache[K, V]) put(k K, v V) {
	if len(c.m) >= c.max {
		clear(c.m) // crude but bounded; the working set refills on demand
	}
	c.m[k] = v
}

// Set stores a value known to be current (written by the caller's own commit).
func (c *Cache[K, V]) Set(k K, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.put(k, v)
}

// Remove drops k.
func (c *Cache[K, V]) Remove(k K) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	delete(c.m, k)
}

// Reset empties the cache.
func (c *Cache[K, V]) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	clear(c.m)
}
