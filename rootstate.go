package kms

import (
	"bytes"
	"context"
	"sync"

	"github.com/ringkms/kms/internal/seal"
)

// What a Service holds of the store's root secret, and how it follows a
// rekey made while it runs (Rekey beside the nodes of a cluster, or
// Service.Rekey in this process).
//
// Of the keys derived from the root secret, a rekey changes two: the seal
// key and the backup key; the MAC and cursor keys travel along (rekey.go).
// A Service given a second root key (Options.NextMasterKey) keeps both
// keys and follows a rekey to either: it adopts the store's new root
// secret as soon as it learns of it (the change's announcement, a sealed
// value that does not open under the seal key it has, or a write that
// finds another root secret in its transaction), and goes on without a
// failed call. Every secret is sealed inside the transaction that writes
// it, under the root secret that transaction sees (sealIn): a write made
// while a rekey commits either sees the new root secret, or conflicts with
// the rekey and runs again, so no secret is ever left sealed under a root
// secret the store no longer has. A Service without a second key drops
// its key once started, as before, and a rekey to a key it does not hold
// stops its writes (checkRoot).

// rootState is the part of a Service's keys that a rekey changes.
type rootState struct {
	value      []byte       // the value under keyRoot it comes from; nil for a master key's own bytes
	sealer     *seal.Sealer // secrets at rest
	backupKey  [32]byte     // MAC of backups (backup.go)
	sealedRoot []byte       // the root secret as keyRoot holds it, for backups; nil when value is
}

// rootKeys are the root keys a Service may open its store under, and the
// last states it opened under them.
type rootKeys struct {
	keys []RootKey // nil once dropped (no second key)

	mu     sync.Mutex
	states map[string]*rootState // by value; at most a few
}

// newRootState is the rootState of keys.
func newRootState(keys *serviceKeys) *rootState {
	return &rootState{value: keys.RootValue, sealer: seal.New(keys.Seal), backupKey: keys.Backup, sealedRoot: keys.SealedRoot}
}

// stateFor returns the rootState of the store whose keyRoot holds v (nil:
// none), opened with one of the Service's root keys. It is an error of
// kind Unauthenticated when none opens it.
func (s *Service) stateFor(ctx context.Context, v []byte) (*rootState, error) {
	if cur := s.root.Load(); bytes.Equal(cur.value, v) {
		return cur, nil
	}
	s.rk.mu.Lock()
	defer s.rk.mu.Unlock()
	if st, ok := s.rk.states[string(v)]; ok {
		return st, nil
	}
	if v == nil || len(s.rk.keys) == 0 {
		return nil, Errorf(KindUnauthenticated, "the store was rekeyed to a master key this process does not hold")
	}
	var rec rootRecord
	if err := unmarshalRoot(v, &rec); err != nil {
		return nil, err
	}
	for _, rk := range s.rk.keys {
		secret, err := openRoot(rk, rec.Sealed)
		if err != nil {
			continue
		}
		keys, err := deriveKeys(secret, v)
		clear(secret)
		if err != nil {
			return nil, err
		}
		st := newRootState(keys)
		if s.rk.states == nil || len(s.rk.states) > 4 {
			s.rk.states = map[string]*rootState{string(s.root.Load().value): s.root.Load()}
		}
		s.rk.states[string(v)] = st
		return st, nil
	}
	return nil, Errorf(KindUnauthenticated, "the store was rekeyed to a master key this process does not hold")
}

// sealIn seals plain for a write of tx, under the root secret that tx
// sees; a Service that did not know it yet adopts it.
func (s *Service) sealIn(tx Txn, plain, aad []byte) ([]byte, error) {
	v, err := tx.Get(keyRoot)
	if isNotFound(err) {
		v, err = nil, nil
	}
	if err != nil {
		return nil, err
	}
	st, err := s.stateFor(context.Background(), v)
	if err != nil {
		return nil, err
	}
	if st != s.root.Load() {
		s.adoptRoot(st)
	}
	return st.sealer.Seal(plain, aad), nil
}

// open opens a secret that the store holds sealed; one that does not
// open under the Service's seal key is tried again once the Service has
// caught up with the store's root secret (a rekey it had not learned of).
//
// A value read before a rekey, and cached, is sealed under the root
// secret the store had: it opens under the state this Service kept of it.
func (s *Service) open(sealed, aad []byte) ([]byte, error) {
	cur := s.root.Load()
	b, err := cur.sealer.Open(sealed, aad)
	if err == nil || len(s.rk.keys) == 0 {
		return b, err
	}
	if st, rerr := s.refreshRoot(context.Background()); rerr == nil && st != cur {
		if b, err := st.sealer.Open(sealed, aad); err == nil {
			return b, nil
		}
	}
	s.rk.mu.Lock()
	states := make([]*rootState, 0, len(s.rk.states))
	for _, st := range s.rk.states {
		states = append(states, st)
	}
	s.rk.mu.Unlock()
	for _, st := range states {
		if b, err := st.sealer.Open(sealed, aad); err == nil {
			return b, nil
		}
	}
	return nil, err
}

// refreshRoot reads the store's root secret and adopts it when it
// changed; it returns the state the Service has then.
func (s *Service) refreshRoot(ctx context.Context) (*rootState, error) {
	v, err := readRootValue(ctx, s.store)
	if err != nil {
		return nil, err
	}
	st, err := s.stateFor(ctx, v)
	if err != nil {
		return nil, err
	}
	s.adoptRoot(st)
	return st, nil
}

// adoptRoot makes st the Service's root state, and keeps the one it
// replaces among the states it knows (open). The caches, which may hold
// values sealed under the old one, start again.
func (s *Service) adoptRoot(st *rootState) {
	old := s.root.Swap(st)
	if old == st || old == nil {
		return
	}
	s.rk.mu.Lock()
	if s.rk.states == nil {
		s.rk.states = map[string]*rootState{}
	}
	s.rk.states[string(old.value)] = old
	s.rk.mu.Unlock()
	s.forgetCaches()
	s.log.Info().Msg("the store was rekeyed: this process goes on under its new root secret")
}

// checkRoot catches up with a rekey that another process made (its
// announcement, or a check after this process was cut off from the store):
// it adopts the store's new root secret when one of the Service's keys
// opens it, and otherwise stops every write of the Service, for good,
// until it is restarted with the store's master key. While the store
// cannot be read, the check stays due.
func (s *Service) checkRoot(ctx context.Context) {
	if s.journal.Stopped() {
		s.keyCheckDue.Store(false)
		return
	}
	// Both in one transaction: a rekey writes both at once, and a read of
	// each on its own could see the root secret from before it and the
	// sealed keys from after it, which do not open under that secret.
	v, sealedKeys, err := readRootAndSealedKeys(ctx, s.store)
	if err != nil {
		return // not readable now: still due
	}
	s.keyCheckDue.Store(false)
	cur := s.root.Load()
	if bytes.Equal(cur.value, v) {
		if v != nil || sealedKeysOpen(cur, sealedKeys) {
			return
		}
	} else if st, err := s.stateFor(ctx, v); err == nil {
		s.adoptRoot(st)
		return
	} else if ErrorKind(err) != KindUnauthenticated {
		s.keyCheckDue.Store(true) // not now (a token that does not answer): still due
		return
	}
	e := &Error{Kind: KindUnavailable, Message: "service unavailable: the store was rekeyed to another master key while this process ran; restart it with the new master key"}
	if s.journal.Stop(e) {
		s.log.Error().Msg("the store was rekeyed to another master key while this process ran: it refuses every write until restarted with the new master key")
	}
}

// sealedKeysOpen reports whether sealed, the store's sealed MAC keys
// (nil: none), open under st (a store of a master key's own bytes has no
// keyRoot to compare: a rekey always writes one, so this only guards
// against a store replaced behind the process's back).
func sealedKeysOpen(st *rootState, sealed []byte) bool {
	if sealed == nil {
		return true
	}
	raw, err := st.sealer.Open(sealed, keyMACKeys)
	clear(raw)
	return err == nil
}

// getIfAny returns the value under k in tx, or nil when there is none.
func getIfAny(tx Txn, k []byte) ([]byte, error) {
	v, err := tx.Get(k)
	if isNotFound(err) {
		return nil, nil
	}
	return v, err
}

// readRootValue returns the value under keyRoot, or nil.
func readRootValue(ctx context.Context, st Store) ([]byte, error) {
	var v []byte
	err := st.View(ctx, func(tx Txn) error {
		var err error
		v, err = getIfAny(tx, keyRoot)
		return err
	})
	return v, err
}

// readRootAndSealedKeys returns the values under keyRoot and keyMACKeys,
// as one transaction sees them; nil for one that is absent.
func readRootAndSealedKeys(ctx context.Context, st Store) (root, sealedKeys []byte, err error) {
	err = st.View(ctx, func(tx Txn) error {
		var err error
		if root, err = getIfAny(tx, keyRoot); err != nil {
			return err
		}
		sealedKeys, err = getIfAny(tx, keyMACKeys)
		return err
	})
	return root, sealedKeys, err
}

// openKeys returns the keys of the Service's store under the first of
// its root keys (Options.MasterKey, then NextMasterKey) that opens it,
// and keeps both keys when there are two. A master key's own bytes, on a
// store without a root secret, are checked against the store's header
// signing key, the one secret every store has.
func (s *Service) openKeys(ctx context.Context) (*serviceKeys, error) {
	candidates := []RootKey{s.opts.MasterKey}
	if !noRootKey(s.opts.NextMasterKey) {
		candidates = append(candidates, s.opts.NextMasterKey)
		s.rk.keys = candidates
	}
	var first error
	for _, rk := range candidates {
		keys, err := keysUnder(ctx, s.store, rk)
		if err == nil {
			return keys, nil
		}
		if first == nil {
			first = err
		}
		if ErrorKind(err) != KindUnauthenticated {
			break
		}
	}
	return nil, first
}

// keysUnder returns the keys of st under rk, or an error of kind
// Unauthenticated when st is not under rk.
func keysUnder(ctx context.Context, st Store, rk RootKey) (*serviceKeys, error) {
	keys, err := loadServiceKeys(ctx, st, rk)
	if err == nil && keys.RootValue == nil {
		err = signingKeyOpens(ctx, st, keys)
	}
	if err != nil {
		return nil, err
	}
	return keys, nil
}

// signingKeyOpens checks that the active header signing key of st, if it
// has one yet, opens under keys.
func signingKeyOpens(ctx context.Context, st Store, keys *serviceKeys) error {
	var active, sealed []byte
	err := st.View(ctx, func(tx Txn) error {
		var err error
		if active, err = tx.Get(keySigningActive); err != nil {
			return err
		}
		sealed, err = tx.Get(join(pfxSigning, active))
		return err
	})
	if isNotFound(err) {
		return nil
	}
	if err != nil {
		return internalError("read the signing key", err)
	}
	seed, err := seal.New(keys.Seal).Open(sealed, join(pfxSigning, active))
	clear(seed)
	if err != nil {
		return Errorf(KindUnauthenticated, "the master key is not the one this store was created with: signing key %s does not open under it", active)
	}
	return nil
}

// Rekey rekeys the Service's own store, while it serves, from its master
// key (Options.MasterKey) to its next one (Options.NextMasterKey): as
// Rekey does, with the journal held between two batches meanwhile, and
// the Service going on under the new root secret at once. It never goes
// the other way: a store already under the next key (rekeyed before),
// and a next key that the store has left, are refused with an error of
// kind Invalid, the store unchanged. kmsd runs it for kmsd rekey on an
// embedded store, through its admin socket. A Service given no second
// key cannot rekey itself: an error of kind Invalid.
func (s *Service) Rekey(ctx context.Context) (*RekeyResult, error) {
	if len(s.rk.keys) < 2 {
		return nil, Errorf(KindInvalid, "rekey: this process was given no next master key to rekey to")
	}
	_, resume, err := s.journal.Quiesce()
	if err != nil {
		return nil, err
	}
	res, err := s.rekeyHeld(ctx)
	resume()
	if err != nil {
		return res, err
	}
	return res, s.recordRekey(res)
}

// rekeyHeld is Rekey with the journal held.
func (s *Service) rekeyHeld(ctx context.Context) (*RekeyResult, error) {
	res, err := rekey(ctx, s.store, s.rk.keys[0], s.rk.keys[1])
	if err != nil {
		return res, err
	}
	if _, err := s.refreshRoot(ctx); err != nil {
		return res, err
	}
	return res, nil
}
