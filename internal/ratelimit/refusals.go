package ratelimit

import (
	"context"
	"hash/maphash"
	"sync"
	"time"

	"github.com/ringkms/kms/internal/pacer"
)

// Refusals thins out the records of refused calls: of the refusals of a
// key (a bucket, say), the first in an interval is to be recorded, and
// the others in the interval are only counted, in memory. The count goes
// with the key's next record: the first refusal after the interval
// (Refuse returns it), or, when none comes, a record of its own, for the
// counts that Due hands out once their interval has ended (on a tick of
// its own, once Start has run) and Drain at the end (Close). Every
// refusal is so either recorded or counted in a record, and a flood of
// them costs one record an interval.
//
// Memory is bounded: at most MaxBuckets keys are kept. Past it, keys
// whose interval ended with nothing counted are dropped; if that is not
// enough, a refusal of a new key is to be recorded, as every refusal of
// it until room is made, and nothing is lost. The zero Refusals is not
// ready: call NewRefusals. It is safe for concurrent use.
type Refusals[V any] struct {
	every  time.Duration
	seed   maphash.Seed
	shards [shardCount]refusalShard[V]

	now    func() time.Time
	record func(Pending[V]) error
	ticker *pacer.Pacer
}

type refusalShard[V any] struct {
	mu     sync.Mutex
	closed bool // Drain ran: every refusal is recorded
	ivs    map[string]*interval[V]
	// full is when the shard was last found full with nothing to drop:
	// what it held then has ended by full+every, and until then a new
	// key does not look for room again (a look walks the shard) and is
	// recorded.
	full time.Time
}

// interval is a key's: since start, when a recorded refusal opened it,
// n refusals were counted and not recorded (with those of an interval
// before, if no record carried them yet).
type interval[V any] struct {
	start time.Time
	n     int
	v     V // the value of the refusal that opened it
}

// Pending is a count of refusals that no record carries yet: n
// refusals of key, the value of the last recorded one v.
type Pending[V any] struct {
	Key string
	V   V
	N   int
}

// NewRefusals returns Refusals that record each key's refusals once every
// interval (above 0).
func NewRefusals[V any](every time.Duration) *Refusals[V] {
	r := &Refusals[V]{every: every, seed: maphash.MakeSeed()}
	for i := range r.shards {
		r.shards[i].ivs = map[string]*interval[V]{}
	}
	return r
}

// Refuse notes a refusal of key at now, with v, what its record would
// say (Due and Drain hand it back with the count). It reports record
// true when the refusal is to be recorded, with carried, the refusals of
// key counted before it and not recorded yet, which its record must
// carry (or, when the record cannot be written, be given back with
// Requeue); false when the refusal is counted and must not be recorded.
func (r *Refusals[V]) Refuse(key string, v V, now time.Time) (record bool, carried int) {
	sh := &r.shards[maphash.String(r.seed, key)%shardCount]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.closed {
		return true, 0
	}
	iv := sh.ivs[key]
	switch {
	case iv == nil:
		if limit := MaxBuckets / shardCount; len(sh.ivs) >= limit {
			if !sh.full.IsZero() && now.Sub(sh.full) < r.every {
				return true, 0
			}
			for k, iv := range sh.ivs {
				if iv.n == 0 && now.Sub(iv.start) >= r.every {
					delete(sh.ivs, k)
				}
			}
			if len(sh.ivs) >= limit {
				sh.full = now
				return true, 0
			}
		}
		sh.ivs[key] = &interval[V]{start: now, v: v}
		return true, 0
	case now.Sub(iv.start) < r.every:
		iv.n++
		return false, 0
	}
	carried = iv.n
	iv.start, iv.n, iv.v = now, 0, v
	return true, carried
}

// Requeue gives back n refusals of key, with v, that a record was to
// carry and could not: the next record of key carries them, or Due or
// Drain hands them out. It keeps them even past the bound (they were
// held before).
func (r *Refusals[V]) Requeue(key string, v V, n int) {
	if n <= 0 {
		return
	}
	sh := &r.shards[maphash.String(r.seed, key)%shardCount]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if iv := sh.ivs[key]; iv != nil {
		iv.n += n
		return
	}
	// An interval that has ended: the key's next refusal is recorded.
	sh.ivs[key] = &interval[V]{n: n, v: v}
}

// Due removes the keys whose interval has ended by now and returns the
// counts that they held, for records of their own.
func (r *Refusals[V]) Due(now time.Time) []Pending[V] {
	return r.take(func(iv *interval[V]) bool { return now.Sub(iv.start) >= r.every }, false)
}

// Drain removes every key and returns the counts that they held, for
// records of their own. From then on, every refusal is to be recorded:
// Refuse reports record true with nothing carried. It is for when the
// records are to be written for the last time (closing the service).
func (r *Refusals[V]) Drain() []Pending[V] {
	return r.take(func(*interval[V]) bool { return true }, true)
}

// Start records the counts of the intervals that have ended (Due), by
// now, with record, on a goroutine of its own, once every interval,
// until Close. When record fails, log gets its error, and the counts are
// kept for the next time.
func (r *Refusals[V]) Start(now func() time.Time, record func(Pending[V]) error, log func(error)) {
	r.now, r.record = now, record
	r.ticker = pacer.Start(pacer.Config{Poll: r.every, Retry: r.every, Now: now, Log: log,
		Pass: func(context.Context) (time.Time, error) { return time.Time{}, r.Flush(now(), false, record) }})
}

// Close stops what Start started and records every count left (Drain),
// returning record's error: no count in memory is lost to a close. It
// may be called more than once, and only after Start.
func (r *Refusals[V]) Close() error {
	r.ticker.Stop()
	return r.Flush(r.now(), true, r.record)
}

// Flush hands record the counts that Due (or, when all, Drain) removes,
// one at a time; when record fails, it gives back that count and those
// after it (Requeue) and returns the error.
func (r *Refusals[V]) Flush(now time.Time, all bool, record func(Pending[V]) error) error {
	due := r.Due
	if all {
		due = func(time.Time) []Pending[V] { return r.Drain() }
	}
	ps := due(now)
	for i, p := range ps {
		if err := record(p); err != nil {
			for _, p := range ps[i:] {
				r.Requeue(p.Key, p.V, p.N)
			}
			return err
		}
	}
	return nil
}

func (r *Refusals[V]) take(ended func(*interval[V]) bool, close bool) []Pending[V] {
	var out []Pending[V]
	for i := range r.shards {
		sh := &r.shards[i]
		sh.mu.Lock()
		sh.closed = sh.closed || close
		for k, iv := range sh.ivs {
			if !ended(iv) {
				continue
			}
			if iv.n > 0 {
				out = append(out, Pending[V]{Key: k, V: iv.v, N: iv.n})
			}
			delete(sh.ivs, k)
		}
		sh.mu.Unlock()
	}
	return out
}

// Len returns how many keys the Refusals hold.
func (r *Refusals[V]) Len() int { return sumShards(r.shards[:], (*refusalShard[V]).len) }

// len returns how many keys the shard holds.
func (sh *refusalShard[V]) len() int {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return len(sh.ivs)
}
