// Package barrier is the security barrier between the service and its
// store: the store's root secret, sealed under the root key (sys/root);
// the keys derived from it, one a purpose, and those a rekey keeps
// (sys/keys); every secret sealed in the transaction that writes it and
// opened under the root secret it was sealed under; a rekey, which
// reseals every sealed secret of the store under a new root secret; and
// the record of the root keys a store has left (sys/retired).
//
// It knows nothing of the domain's records: the domain hands it, in a
// Config, the keys that mark a store as written, the proof that a master
// key's own bytes open a store, the table of the records that hold sealed
// fields, and what to do when a rekey is adopted.
//
// A Barrier given a second root key keeps both and follows a rekey to
// either: it adopts the store's new root secret as soon as it learns of
// it (the change's announcement, a sealed value that does not open under
// the seal key it has, or a write that finds another root secret in its
// transaction), and goes on without a failed call. Every secret is sealed
// inside the transaction that writes it, under the root secret that
// transaction sees (SealIn): a write made while a rekey commits either
// sees the new root secret, or conflicts with the rekey and runs again,
// so no secret is ever left sealed under a root secret the store no
// longer has. A Barrier without a second key drops its key once started,
// and a rekey to a key it does not hold is found by Check.
package barrier

import (
	"bytes"
	"context"
	"sync"
	"sync/atomic"

	"github.com/ringkms/kms/internal/base"
	"github.com/ringkms/kms/internal/seal"
)

// Config is what a Barrier needs of the domain.
type Config struct {
	// Store is the store the barrier guards.
	Store base.Store
	// Marks are keys that a store a service wrote holds: a store with
	// none of them (and no rekeyed keys) is new.
	Marks [][]byte
	// Proof, when not nil, checks that a store with no root secret of its
	// own (a master key's own bytes) is under that key: that the secrets
	// it holds open under the seal key s. It answers an error of kind
	// Unauthenticated when they do not.
	Proof func(ctx context.Context, st base.Store, s *seal.Sealer) error
	// Sealed are the records that hold sealed secrets, which a rekey
	// reseals (Rekey).
	Sealed []Sealed
	// Adopted, when not nil, is called once the barrier has adopted a
	// root secret the store was rekeyed to: what was read and kept under
	// the old one is to be read again.
	Adopted func()
}

// Barrier is the barrier of one store, as one process holds it.
type Barrier struct {
	cfg  Config
	root atomic.Pointer[state] // the keys a rekey changes: seal, backup

	keys []RootKey // the root keys it may follow a rekey with; nil once dropped (no second key)

	mu     sync.Mutex
	states map[string]*state // by value; at most a few
}

// state is the part of a store's keys that a rekey changes.
type state struct {
	value      []byte       // the value under KeyRoot it comes from; nil for a master key's own bytes
	sealer     *seal.Sealer // secrets at rest
	backupKey  [32]byte     // MAC of backups
	sealedRoot []byte       // the root secret as KeyRoot holds it, for backups; nil when value is
}

// New returns the barrier of cfg.Store, not yet open (Start): Load,
// KeysUnder, RootSecret and CheckRekey serve at once.
func New(cfg Config) *Barrier { return &Barrier{cfg: cfg} }

// newState is the state of keys.
func newState(keys *Keys) *state {
	return &state{value: keys.RootValue, sealer: seal.New(keys.Seal), backupKey: keys.Backup, sealedRoot: keys.SealedRoot}
}

// Start opens the store under the first of main and next (nil: none)
// that opens it, and returns its keys; with two keys, it keeps both and
// follows a rekey to either.
func (b *Barrier) Start(ctx context.Context, main, next RootKey) (*Keys, error) {
	candidates := []RootKey{main}
	if !NoKey(next) {
		candidates = append(candidates, next)
		b.keys = candidates
	}
	var first error
	for _, rk := range candidates {
		keys, err := b.KeysUnder(ctx, rk)
		if err == nil {
			b.root.Store(newState(keys))
			return keys, nil
		}
		if first == nil {
			first = err
		}
		if base.ErrorKind(err) != base.KindUnauthenticated {
			break
		}
	}
	return nil, first
}

// Backup returns the key that authenticates backups of the store as it
// is now, and its root secret as KeyRoot holds it (nil: a master key's
// own bytes).
func (b *Barrier) Backup() (key [32]byte, sealedRoot []byte) {
	st := b.root.Load()
	return st.backupKey, st.sealedRoot
}

// stateFor returns the state of the store whose KeyRoot holds v (nil:
// none), opened with one of the barrier's root keys. It is an error of
// kind Unauthenticated when none opens it.
func (b *Barrier) stateFor(v []byte) (*state, error) {
	if cur := b.root.Load(); bytes.Equal(cur.value, v) {
		return cur, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if st, ok := b.states[string(v)]; ok {
		return st, nil
	}
	if v == nil || len(b.keys) == 0 {
		return nil, base.Errorf(base.KindUnauthenticated, "the store was rekeyed to a master key this process does not hold")
	}
	var rec rootRecord
	if err := unmarshalRoot(v, &rec); err != nil {
		return nil, err
	}
	for _, rk := range b.keys {
		secret, err := openRoot(rk, rec.Sealed)
		if err != nil {
			continue
		}
		keys, err := deriveKeys(secret, v)
		clear(secret)
		if err != nil {
			return nil, err
		}
		st := newState(keys)
		if b.states == nil || len(b.states) > 4 {
			b.states = map[string]*state{string(b.root.Load().value): b.root.Load()}
		}
		b.states[string(v)] = st
		return st, nil
	}
	return nil, base.Errorf(base.KindUnauthenticated, "the store was rekeyed to a master key this process does not hold")
}

// SealIn seals plain for a write of tx, under the root secret that tx
// sees; a barrier that did not know it yet adopts it.
func (b *Barrier) SealIn(tx base.Txn, plain, aad []byte) ([]byte, error) {
	v, err := getIfAny(tx, KeyRoot)
	if err != nil {
		return nil, err
	}
	st, err := b.stateFor(v)
	if err != nil {
		return nil, err
	}
	if st != b.root.Load() {
		b.adopt(st)
	}
	return st.sealer.Seal(plain, aad), nil
}

// Open opens a secret that the store holds sealed; one that does not
// open under the barrier's seal key is tried again once the barrier has
// caught up with the store's root secret (a rekey it had not learned of).
//
// A value read before a rekey, and cached, is sealed under the root
// secret the store had: it opens under the state this barrier kept of it.
func (b *Barrier) Open(sealed, aad []byte) ([]byte, error) {
	cur := b.root.Load()
	plain, err := cur.sealer.Open(sealed, aad)
	if err == nil || len(b.keys) == 0 {
		return plain, err
	}
	if st, rerr := b.refresh(context.Background()); rerr == nil && st != cur {
		if plain, err := st.sealer.Open(sealed, aad); err == nil {
			return plain, nil
		}
	}
	b.mu.Lock()
	states := make([]*state, 0, len(b.states))
	for _, st := range b.states {
		states = append(states, st)
	}
	b.mu.Unlock()
	for _, st := range states {
		if plain, err := st.sealer.Open(sealed, aad); err == nil {
			return plain, nil
		}
	}
	return nil, err
}

// refresh reads the store's root secret and adopts it when it changed;
// it returns the state the barrier has then.
func (b *Barrier) refresh(ctx context.Context) (*state, error) {
	v, err := readValue(ctx, b.cfg.Store, KeyRoot)
	if err != nil {
		return nil, err
	}
	st, err := b.stateFor(v)
	if err != nil {
		return nil, err
	}
	b.adopt(st)
	return st, nil
}

// adopt makes st the barrier's state, and keeps the one it replaces
// among the states it knows (Open). The domain hears of it
// (Config.Adopted): what it keeps may be sealed under the old one.
func (b *Barrier) adopt(st *state) {
	old := b.root.Swap(st)
	if old == st || old == nil {
		return
	}
	b.mu.Lock()
	if b.states == nil {
		b.states = map[string]*state{}
	}
	b.states[string(old.value)] = old
	b.mu.Unlock()
	if b.cfg.Adopted != nil {
		b.cfg.Adopted()
	}
}

// Checked is what Check found.
type Checked int

const (
	// Unreadable: the store could not be read; the check is still due.
	Unreadable Checked = iota
	// Opens: the store is under a root key of the barrier's (adopted if
	// it was rekeyed).
	Opens
	// Again: the store's new root secret could not be opened now (a token
	// that does not answer); the check is due again.
	Again
	// Foreign: the store was rekeyed to a root key this process does not
	// hold.
	Foreign
)

// Check catches up with a rekey that another process made (its
// announcement, or a check after this process was cut off from the
// store): it adopts the store's new root secret when one of the barrier's
// keys opens it, and otherwise says that the store is Foreign now.
func (b *Barrier) Check(ctx context.Context) Checked {
	// Both in one transaction: a rekey writes both at once, and a read of
	// each on its own could see the root secret from before it and the
	// sealed keys from after it, which do not open under that secret.
	var v, sealedKeys []byte
	err := b.cfg.Store.View(ctx, func(tx base.Txn) error {
		var err error
		if v, err = getIfAny(tx, KeyRoot); err != nil {
			return err
		}
		sealedKeys, err = getIfAny(tx, KeyMACKeys)
		return err
	})
	if err != nil {
		return Unreadable
	}
	cur := b.root.Load()
	if bytes.Equal(cur.value, v) {
		if v != nil || sealedKeysOpen(cur, sealedKeys) {
			return Opens
		}
	} else if st, err := b.stateFor(v); err == nil {
		b.adopt(st)
		return Opens
	} else if base.ErrorKind(err) != base.KindUnauthenticated {
		return Again
	}
	return Foreign
}

// sealedKeysOpen reports whether sealed, the store's sealed MAC keys
// (nil: none), open under st (a store of a master key's own bytes has no
// KeyRoot to compare: a rekey always writes one, so this only guards
// against a store replaced behind the process's back).
func sealedKeysOpen(st *state, sealed []byte) bool {
	if sealed == nil {
		return true
	}
	raw, err := st.sealer.Open(sealed, KeyMACKeys)
	clear(raw)
	return err == nil
}
