package kms

import "sync"

// cache is a small read-through cache with generation-checked fills: a
// reader notes the generation before it reads the store and fills only if no
// invalidation happened since, so a fill can never bring back a value that a
// concurrent write replaced.
type cache[K comparable, V any] struct {
	mu  sync.RWMutex
	m   map[K]V
	gen uint64
	max int
}

func newCache[K comparable, V any](max int) *cache[K, V] {
	return &cache[K, V]{m: make(map[K]V), max: max}
}

func (c *cache[K, V]) get(k K) (V, bool) {
	c.mu.RLock()
	v, ok := c.m[k]
	c.mu.RUnlock()
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
	if len(c.m) >= c.max {
		clear(c.m)
	}
	c.m[k] = v
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
