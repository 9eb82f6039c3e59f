package kms

import "sync"

// cache is a small read-through cache with generation-checked fills: a
// reader notes the generation before it reads the store and fills only if no
// invalidation happened since, so a fill can never bring back a value that a
// concurrent write replaced.
type cache[K comparable, V any] struct {
	mu      sync.RWMutex
	m       map[K]V
	gen     uint64
	max     int
	flights map[K]*flight[V] // the reads under way in load
	counts  cacheCounts      // look-ups that found their entry (get, load) and that read it (load)
}

var errNoRead = Errorf(KindInternal, "the shared read did not finish")

// flight is one read of load, which the concurrent loads of its key, in
// its generation, wait for.
type flight[V any] struct {
	done    chan struct{} // closed once v and err are set
	gen     uint64
	waiters int // the loads waiting for it, c.mu held
	v       V
	err     error
}

func newCache[K comparable, V any](max int) *cache[K, V] {
	return &cache[K, V]{m: make(map[K]V), max: max, flights: make(map[K]*flight[V])}
}

// load returns k's value from the cache or, on a miss, from read, and
// fills the cache with it unless an invalidation came meanwhile. The
// loads of one key that miss together share one read: after the cache
// was emptied, the calls under way read the store once, not each. A load
// that joins a read begun before an invalidation does not share it, and
// one whose shared read failed (its reader's context ended, say) reads
// on its own: an error is never handed to a caller it was not its own.
func (c *cache[K, V]) load(k K, read func() (V, error)) (V, error) {
	if v, ok := c.get(k); ok {
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

// get returns k's value when the cache has it, and counts the hit. (A
// miss is counted by the load that follows it.)
func (c *cache[K, V]) get(k K) (V, bool) {
	c.mu.RLock()
	v, ok := c.m[k]
	c.mu.RUnlock()
	if ok {
		c.counts.hits.Add(1)
	}
	return v, ok
}

func (c *cache[K, V]) generation() uint64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.gen
}

func (c *cache[K, V]) fill(k K, v V, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen {
		return
	}
	c.put(k, v)
}

// put stores v under k, c.mu held.
func (c *cache[K, V]) put(k K, v V) {
	if len(c.m) >= c.max {
		clear(c.m) // crude but bounded; the working set refills on demand
	}
	c.m[k] = v
}

// set stores a value known to be current (written by the journal).
func (c *cache[K, V]) set(k K, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.put(k, v)
}

func (c *cache[K, V]) remove(k K) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	delete(c.m, k)
}

// reset empties the cache.
func (c *cache[K, V]) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	clear(c.m)
}
