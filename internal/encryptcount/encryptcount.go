package encryptcount

import (
	"context"
	"encoding/binary"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/ringkms/kms/internal/base"
	"github.com/ringkms/kms/internal/journal"
)

const (
	counterBlock = 1024
	// UnlimitedBlock is the calls a reservation covers for a key without
	// a limit.
	UnlimitedBlock = 1 << 16
)

// ErrSpent is a reservation refused: the key's limit is reached.
var ErrSpent = base.Errorf(base.KindLimit, "the key has been used for its maxEncryptCount encrypt calls")

// Config is what the Counters need of the service.
type Config struct {
	Store base.Store
	// Submit commits mutate durably, as one write of the service (its
	// journal), and returns mutate's error or the commit's.
	Submit func(mutate func(tx base.Txn) error) error
	// Lock takes a counter's lock, which its reservations take in turn,
	// or returns why not: the journal's, which gives up while its writer
	// is stalled (journal.Lock), so that a call waiting for a reservation
	// held up in a stalled batch is answered as the calls queued behind
	// it are. Nil takes the lock however long it waits.
	Lock func(l *journal.Lock) error
	// CountKey is the store key of a key's total; KeyKey that of the key's
	// own record, which must exist when a block is reserved (no count
	// outlives its key).
	CountKey func(keyID string) []byte
	KeyKey   func(ringID, keyID string) []byte
}

// Counters are this process's counters of the encrypt calls of each key.
// They are safe for concurrent use.
type Counters struct {
	cfg       Config
	m         sync.Map // key ID -> *counter
	freeBlock uint64   // calls a reservation covers for a key without a limit
	limitHook func()   // a test's, run by limitCounter once it has taken its snapshot
}

// New returns empty Counters.
func New(cfg Config) *Counters {
	if cfg.Lock == nil {
		cfg.Lock = func(l *journal.Lock) error { l.Take(); return nil }
	}
	return &Counters{cfg: cfg, freeBlock: UnlimitedBlock}
}

// counter counts the encrypt calls of one key in this process. Its
// numbers are this process's own ledger: used counts the calls counted,
// reserved the calls its reservations cover, both from the store's total
// when the counter was loaded.
type counter struct {
	used     atomic.Uint64 // calls counted
	reserved atomic.Uint64 // calls the reservations cover
	limited  atomic.Bool   // the reservations were made under a limit
	mu       *journal.Lock // serialises reservations (Config.Lock)
}

// get returns this process's counter of a key's encrypt calls. Its ledger
// starts empty: the store's total is read when a block is reserved.
func (cs *Counters) get(keyID string) *counter {
	if c, ok := cs.m.Load(keyID); ok {
		return c.(*counter)
	}
	got, _ := cs.m.LoadOrStore(keyID, &counter{mu: journal.NewLock()})
	return got.(*counter)
}

// Forget drops the counter of a key that was deleted.
func (cs *Counters) Forget(keyID string) { cs.m.Delete(keyID) }

// Reset drops every counter (an undo may have taken back their
// reservations): each starts again from the store's total.
func (cs *Counters) Reset() { cs.m.Clear() }

// Count counts one encrypt call on the key keyID of ring ringID, and
// returns once a reservation covers it, or ErrSpent when the key's limit
// (maxEncryptCount; 0 for none) leaves none.
func (cs *Counters) Count(ringID, keyID string, limit uint64) error {
	return cs.count(cs.get(keyID), ringID, keyID, limit)
}

// SetFreeBlock sets the calls a reservation covers for a key without a
// limit (UnlimitedBlock), so that a test crosses blocks in a few calls.
func (cs *Counters) SetFreeBlock(n uint64) { cs.freeBlock = n }

// count counts one call on the key keyID of ring ringID, whose counter is
// c, and returns once a reservation covers it, or ErrSpent when the key's
// limit (maxEncryptCount; 0 for none) leaves none. The call that reaches
// the middle of the reserved block reserves the next.
func (cs *Counters) count(c *counter, ringID, keyID string, limit uint64) error {
	block := cs.freeBlock
	if limit > 0 {
		block = limitedBlock(limit, cs.freeBlock)
		if !c.limited.Load() {
			if err := cs.limitCounter(c, keyID, limit); err != nil {
				return err
			}
		}
	} else if c.limited.Load() {
		c.limited.Store(false) // what a limit allowed, no limit does too
	}
	n := c.used.Add(1)
	switch r := c.reserved.Load(); {
	case n > r:
		return cs.reserve(c, ringID, keyID, n, block, limit) // for this call, which waits for it
	case n == r-block/2:
		// For the calls to come; this one is covered already.
		if err := cs.reserve(c, ringID, keyID, r+1, block, limit); err != ErrSpent {
			return err
		}
	}
	return nil
}

// limitedBlock is the calls a reservation covers for a key under limit:
// an eighth of it, at least 1 and at most counterBlock, so that several
// processes share a small limit; but for a limit so large that
// counterBlock is less than a 65,536th of it (such as the bound on a
// transit key's encryptions, 2^32), a 65,536th of it, at most free (the
// block of a key without a limit), so that such a key reserves as
// seldom as a key without a limit does.
func limitedBlock(limit, free uint64) uint64 {
	block := min(counterBlock, max(limit/8, 1))
	if share := limit >> 16; share > block {
		block = max(block, min(share, free))
	}
	return block
}

// reserve adds a block of calls to the store's total for the key keyID of
// ring ringID, whose counter is c, unless c covers need calls by then. The
// block stops at limit (0: none); past it, reserve answers ErrSpent. A key
// that was deleted meanwhile is NotFound.
func (cs *Counters) reserve(c *counter, ringID, keyID string, need, block, limit uint64) error {
	if err := cs.cfg.Lock(c.mu); err != nil {
		return err
	}
	defer c.mu.Unlock()
	if c.reserved.Load() >= need {
		return nil // another call reserved it meanwhile
	}
	key := cs.cfg.CountKey(keyID)
	var took uint64
	err := cs.cfg.Submit(func(tx base.Txn) error {
		took = 0
		if _, err := tx.Get(cs.cfg.KeyKey(ringID, keyID)); err != nil {
			return err // no count outlives its key
		}
		total, err := LoadTotal(tx, key)
		if err != nil {
			return err
		}
		take := block
		if limit > 0 {
			if total >= limit {
				return ErrSpent
			}
			take = min(take, limit-total)
		}
		took = take
		return tx.Set(key, binary.BigEndian.AppendUint64(nil, total+take))
	})
	if err != nil {
		return err
	}
	if c.reserved.Add(took) < need {
		return ErrSpent // cannot happen: need is at most one past what c covered
	}
	return nil
}

// limitCounter makes the reservations of c, made while the key's ring had
// no limit, answer to limit, a limit set since: it gives back to the
// store's total what they cover beyond the calls counted, and when the
// total is still over the limit, stops c's calls at it. (Each process does
// so at its first call under the limit; until then, its unused
// reservations count in the total, so the limit errs on the safe side.)
//
// Calls still under no limit (they read the ring before the limit was
// set) may run meanwhile, and count takes no lock: so c's reservations
// drop to none before the calls are read. From then on such a call waits
// for the lock in reserve, and every call that passed on the old
// reservations has counted itself already: the calls read are all that
// the reservations kept cover, and no call is left out of the total that
// other processes read. (Reading the calls first left out those that
// passed between the two reads: the total then fell short of the calls
// made, and another process could hand the key out past the limit.)
func (cs *Counters) limitCounter(c *counter, keyID string, limit uint64) error {
	if err := cs.cfg.Lock(c.mu); err != nil {
		return err
	}
	defer c.mu.Unlock()
	if c.limited.Load() {
		return nil
	}
	key := cs.cfg.CountKey(keyID)
	reserved := c.reserved.Swap(0)
	used := c.used.Load()
	if cs.limitHook != nil {
		cs.limitHook()
	}
	covered := min(used, reserved)
	var total uint64
	err := cs.cfg.Submit(func(tx base.Txn) error {
		var err error
		if total, err = LoadTotal(tx, key); err != nil {
			return err
		}
		total -= min(total, reserved-covered)
		return tx.Set(key, binary.BigEndian.AppendUint64(nil, total))
	})
	if err != nil {
		c.reserved.Store(reserved) // nothing was given back
		return err
	}
	if total > limit {
		covered -= min(covered, total-limit)
	}
	c.reserved.Store(covered)
	c.limited.Store(true)
	return nil
}

// LoadTotal reads the calls reserved in all for a key, under key.
func LoadTotal(tx base.Txn, key []byte) (uint64, error) {
	v, err := tx.Get(key)
	switch {
	case errors.Is(err, base.ErrNotFound):
		return 0, nil
	case err != nil:
		return 0, err
	case len(v) != 8:
		return 0, base.Errorf(base.KindInternal, "encrypt counter %q is corrupt", key)
	}
	return binary.BigEndian.Uint64(v), nil
}

// Release gives back, once the journal has stopped, what each key's
// reservation holds beyond the calls counted, so that the next start
// resumes the counts where they are. (A call counted but not answered
// stays counted: a count may run over, never under.)
func (cs *Counters) Release(ctx context.Context) error {
	type release struct {
		c            *counter
		key          []byte
		used, unused uint64
	}
	var rels []release
	cs.m.Range(func(id, v any) bool {
		c := v.(*counter)
		if used, r := c.used.Load(), c.reserved.Load(); used < r {
			rels = append(rels, release{c: c, key: cs.cfg.CountKey(id.(string)), used: used, unused: r - used})
		}
		return true
	})
	if len(rels) == 0 {
		return nil
	}
	err := cs.cfg.Store.Update(ctx, func(tx base.Txn) error {
		for _, rel := range rels {
			v, err := tx.Get(rel.key)
			if errors.Is(err, base.ErrNotFound) {
				continue // the key was deleted
			} else if err != nil {
				return err
			}
			if len(v) != 8 || binary.BigEndian.Uint64(v) < rel.unused {
				continue
			}
			if err := tx.Set(rel.key, binary.BigEndian.AppendUint64(nil, binary.BigEndian.Uint64(v)-rel.unused)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return base.InternalError("release encrypt counts", err)
	}
	for _, rel := range rels {
		rel.c.reserved.Store(rel.used) // a second Close gives back nothing more
	}
	return nil
}
