package kms

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/ringkms/kms/internal/headersign"
)

// Which key signs new headers. A Service signs with one of two kinds:
//
//   - a key of the store's own, which the service makes itself (random
//     seed, sealed in the store): it signs with the key the store names
//     active, and follows a rotation that another process makes;
//   - a key held outside the store, and as a rule outside the process
//     (Options.SigningKey: kmsd -signing-key-pkcs11, a key pair in a
//     PKCS#11 token): it signs with that key alone. The store records its
//     public key and where it is held (heldKeyRecord), so that every
//     process and every verifier finds it; New records it, active, when
//     the store does not know it yet.
//
// A process given a key signs with it whatever the store names active:
// during a rotation to a new key in the token, the processes not yet
// restarted with it sign with the key before, which stays published. A
// process given none, on a store whose active key is held outside it,
// keeps the key of the store's own it had (published too), or, started
// so, has none: its encrypt calls fail (Unavailable) and CheckSigner says
// why. No process ever signs with a key the store does not publish.

// activeKey is what the store last said of its active signing key, as
// this process saw it (signerMu).
type activeKey struct {
	id   [8]byte
	set  bool   // the store has one
	held bool   // it is held outside the store
	uri  string // where, when held
}

// setActive records what the store says of its active key; signerMu held.
func (s *Service) setActive(id [8]byte, held bool, uri string) {
	s.active = activeKey{id: id, set: true, held: held, uri: uri}
}

// newSigningKey is a new signing key and the store records that publish
// it: under key, sealed (by the barrier's SealIn, in the transaction that writes it),
// its seed or, for a key held outside the store, its heldKeyRecord; under
// metaKey, its signingKeyMeta.
type newSigningKey struct {
	signer        *headersign.Signer
	hexID         []byte
	key           []byte
	record        []byte // the heldKeyRecord of a key held outside; nil for a key of the store's own
	metaKey, meta []byte
	sealIn        func(tx Txn, plain, aad []byte) ([]byte, error)
}

// makeSigningKey makes a new key of the store's own.
func (s *Service) makeSigningKey(now time.Time) (*newSigningKey, error) {
	seed := make([]byte, ed25519.SeedSize)
	rand.Read(seed)
	defer clear(seed)
	g, err := headersign.New(ed25519.NewKeyFromSeed(seed))
	if err != nil {
		return nil, err
	}
	return s.newSigningKey(g, now, false, "")
}

// newSigningKey returns the records of g: a key of the store's own (an
// ed25519.PrivateKey, whose seed the store keeps), or one held outside
// the store, at uri.
func (s *Service) newSigningKey(g *headersign.Signer, now time.Time, held bool, uri string) (*newSigningKey, error) {
	n := &newSigningKey{signer: g, sealIn: s.barrier.SealIn}
	n.hexID = []byte(hex.EncodeToString(g.ID[:]))
	n.key = join(pfxSigning, n.hexID)
	n.metaKey = join(pfxSigningMeta, n.hexID)
	var err error
	if held {
		if n.record, err = json.Marshal(heldKeyRecord{V: heldKeyVersion, PublicKey: g.Public(), URI: uri}); err != nil {
			return nil, err
		}
	}
	if n.meta, err = json.Marshal(signingKeyMeta{CreatedAt: now.UTC()}); err != nil {
		return nil, err
	}
	return n, nil
}

// write stores the key, sealed in tx, and makes it the active one.
func (n *newSigningKey) write(tx Txn) error {
	plain := n.record
	if plain == nil {
		seed := n.signer.Key.(ed25519.PrivateKey).Seed()
		defer clear(seed)
		plain = seed
	}
	sealed, err := n.sealIn(tx, plain, n.key)
	if err != nil {
		return err
	}
	if err := tx.Set(n.key, sealed); err != nil {
		return err
	}
	if err := tx.Set(n.metaKey, n.meta); err != nil {
		return err
	}
	return tx.Set(keySigningActive, n.hexID)
}

// public is the key as SigningKeys lists it.
func (n *newSigningKey) public(now time.Time) *SigningKey {
	return &SigningKey{ID: string(n.hexID), Algorithm: SigningKeyAlgorithm, Active: true, CreatedAt: now.UTC(),
		PublicKey: base64.StdEncoding.EncodeToString(n.signer.Public())}
}

// useSigner makes g the signer of new headers, and its public key one
// that verifies.
func (s *Service) useSigner(g *headersign.Signer) {
	s.addVerifyKey(g.ID, g.Public())
	s.signer.Store(g)
}

// loadSigningKey reads the store's signing keys: each must open (which
// checks the master key), each public key verifies, and the active key
// signs new headers when it is one of the store's own and the Service was
// given no key (Options.SigningKey). On a new store there is none yet
// (createSigningKey).
func (s *Service) loadSigningKey(ctx context.Context) error {
	active, err := readSigningKeys(ctx, s.store, s.barrier.Open, s.knownVerifyKey, func(sk *storedKey) { s.addVerifyKey(sk.id, sk.pub) })
	if err != nil {
		return err
	}
	if active == nil {
		return nil
	}
	s.signerMu.Lock()
	defer s.signerMu.Unlock()
	s.setActive(active.id, active.held(), active.uri)
	if !active.held() && s.held == nil {
		s.useSigner(&headersign.Signer{ID: active.id, Key: active.priv})
	}
	return nil
}

// createSigningKey makes the first header signing key and stores it,
// sealed, through the journal.
func (s *Service) createSigningKey() error {
	now := s.now()
	n, err := s.makeSigningKey(now)
	if err != nil {
		return internalError("make signing key", err)
	}
	// Nodes that start together on a new shared store each try; the
	// first to commit makes the key, and the others load it.
	made := false
	err = s.submit(nil, func(tx Txn) error {
		made = false
		if _, err := tx.Get(keySigningActive); err == nil || !isNotFound(err) {
			return err
		}
		made = true
		return n.write(tx)
	}, nil)
	if err != nil {
		return internalError("store signing key", err)
	}
	if !made {
		return s.loadSigningKey(context.Background())
	}
	s.signerMu.Lock()
	s.setActive(n.signer.ID, false, "")
	s.useSigner(n.signer)
	s.signerMu.Unlock()
	return nil
}

// operator is the principal of what the holder of the master key does
// outside any call: kmsd's subcommands, and a Service's start recording a
// key it was given.
func operator() *Principal {
	return &Principal{Kind: PrincipalAPIKey, ID: "operator", flags: Flags{FlagRoot: true}}
}

// adoptHeldKey makes the Service sign with the key it was given
// (Options.SigningKey). A store that does not know the key records it
// and makes it active (on a store that had an active key, a rotation
// recorded as signingkey.rotate by "operator"); one that knows it keeps
// its active key: a process restarted with the key before a rotation
// signs with that one, which stays published.
func (s *Service) adoptHeldKey(ctx context.Context) error {
	g := s.held
	key := join(pfxSigning, []byte(hex.EncodeToString(g.ID[:])))
	var sealed []byte
	err := s.store.View(ctx, func(tx Txn) error {
		var err error
		if sealed, err = tx.Get(key); isNotFound(err) {
			sealed, err = nil, nil
		}
		return err
	})
	if err != nil {
		return internalError("read the signing keys", err)
	}
	if sealed == nil {
		s.signerMu.Lock()
		had := s.active.set
		s.signerMu.Unlock()
		var p *Principal
		if had {
			p = operator()
		}
		_, err := s.registerHeldKey(p, g, s.opts.SigningKeyURI)
		if ErrorKind(err) == KindConflict {
			// Another process recorded it meanwhile: see what is active now.
			err = s.loadSigningKey(ctx)
		}
		if err != nil {
			return err
		}
	} else if _, _, err := s.openSigningKey(key, sealed); err != nil {
		return err
	}
	s.signerMu.Lock()
	defer s.signerMu.Unlock()
	s.useSigner(g)
	if s.active.set && s.active.id != g.ID {
		s.log.Warn().Str("signingKeyId", hex.EncodeToString(g.ID[:])).Str("activeSigningKeyId", hex.EncodeToString(s.active.id[:])).
			Msg("signing headers with the key this process was given, which the store publishes but no longer names active: a rotation made another key active; restart this process with that one")
	}
	return nil
}

// registerHeldKey records g, a key held outside the store at uri, and
// makes it the active key, recording the rotation by p (none when p is
// nil). It answers Conflict when the store knows the key already.
func (s *Service) registerHeldKey(p *Principal, g *headersign.Signer, uri string) (*SigningKey, error) {
	now := s.now()
	n, err := s.newSigningKey(g, now, true, uri)
	if err != nil {
		return nil, internalError("record signing key", err)
	}
	var act *Activity
	if p != nil {
		s.signerMu.Lock()
		prev := s.active
		s.signerMu.Unlock()
		props := map[string]any{"signingKeyId": string(n.hexID), "held": true}
		if prev.set {
			props["previousSigningKeyId"] = hex.EncodeToString(prev.id[:])
		}
		if uri != "" {
			props["uri"] = uri
		}
		act = s.newActivity(p, "signingkey.rotate", "", true, props)
	}
	err = s.submit(act, func(tx Txn) error {
		if _, err := tx.Get(n.key); err == nil {
			return Errorf(KindConflict, "signing key %s is in the store already", n.hexID)
		} else if !isNotFound(err) {
			return err
		}
		return n.write(tx)
	}, func() {
		s.signerMu.Lock()
		s.setActive(g.ID, true, uri)
		s.addVerifyKey(g.ID, g.Public())
		s.signerMu.Unlock()
	})
	if err != nil {
		return nil, err
	}
	return n.public(now), nil
}

// RotateSigningKey makes a new header signing key and makes it the one
// that signs new headers; the keys before it stay published, and the
// headers they signed keep verifying. It needs the flag "*"
// (FlagSigningKeyRotate) and is recorded as signingkey.rotate. In a
// cluster, the other processes sign with the new key within the cache
// bound (docs/OPERATIONS.md), and with the key before until then. A
// Service given its key (Options.SigningKey) signs with that key alone and
// refuses (Invalid): the next key is made where that one is held
// (RotateStoreSigningKeyTo).
func (s *Service) RotateSigningKey(ctx context.Context) (*SigningKey, error) {
	p, err := s.authorize(ctx, "signingkey.rotate", "", FlagSigningKeyRotate)
	if err != nil {
		return nil, err
	}
	if s.held != nil {
		return nil, s.recordFailure(p, "signingkey.rotate", "", Errorf(KindInvalid,
			"this service signs with a key held outside the store, which it was given: make the next key where that one is held, and restart the service with it"))
	}
	return s.rotateSigningKey(p)
}

// RotateStoreSigningKey is RotateSigningKey on a store that no Service of
// this process has open, as kmsd rotate-signing-key runs it: holding the
// master key is its authority. It starts a Service on st, rotates the
// signing key and records the rotation under the principal "operator",
// and closes the Service. It does not close st.
func RotateStoreSigningKey(ctx context.Context, st Store, mk RootKey) (*SigningKey, error) {
	return rotateStore(st, mk, func(s *Service) (*SigningKey, error) { return s.rotateSigningKey(operator()) })
}

// RotateStoreSigningKeyTo is RotateStoreSigningKey to a key made outside
// the store: next makes it, once the store has opened under mk (so that
// a wrong master key leaves no key behind), and returns it, an Ed25519
// key held elsewhere (a new key pair in a PKCS#11 token, for kmsd
// rotate-signing-key -signing-key-pkcs11), and where it is held (as
// Options.SigningKeyURI). The store records its public key and uri, never
// a private key, and names it active; the processes given the key before
// (Options.SigningKey) go on signing with that one, which stays
// published, until they are started with the new one. The rotation is
// recorded as signingkey.rotate by "operator", with the uri. A key the
// store knows already is a Conflict; an error of next is returned as it
// is.
func RotateStoreSigningKeyTo(ctx context.Context, st Store, mk RootKey, next func() (key crypto.Signer, uri string, err error)) (*SigningKey, error) {
	return rotateStore(st, mk, func(s *Service) (*SigningKey, error) {
		key, uri, err := next()
		if err != nil {
			return nil, err
		}
		if key == nil {
			return nil, Errorf(KindInvalid, "no signing key given")
		}
		g, err := headersign.New(key)
		if err != nil {
			return nil, Errorf(KindInvalid, "%v", err)
		}
		return s.registerHeldKey(operator(), g, uri)
	})
}

// rotateStore starts a Service on st, runs rotate on it and closes it.
func rotateStore(st Store, mk RootKey, rotate func(*Service) (*SigningKey, error)) (*SigningKey, error) {
	s, err := New(st, Options{MasterKey: mk})
	if err != nil {
		return nil, err
	}
	key, err := rotate(s)
	if cerr := s.Close(); err == nil && cerr != nil {
		return nil, cerr
	}
	return key, err
}

func (s *Service) rotateSigningKey(p *Principal) (*SigningKey, error) {
	now := s.now()
	n, err := s.makeSigningKey(now)
	if err != nil {
		return nil, s.recordFailure(p, "signingkey.rotate", "", internalError("make signing key", err))
	}
	s.signerMu.Lock()
	prev := s.active
	s.signerMu.Unlock()
	props := map[string]any{"signingKeyId": string(n.hexID)}
	if prev.set {
		props["previousSigningKeyId"] = hex.EncodeToString(prev.id[:])
	}
	act := s.newActivity(p, "signingkey.rotate", "", true, props)
	err = s.submit(act, n.write, func() {
		// On the journal's goroutine, before the next batch signs.
		s.signerMu.Lock()
		s.setActive(n.signer.ID, false, "")
		s.useSigner(n.signer)
		s.signerMu.Unlock()
	})
	if err != nil {
		return nil, err
	}
	return n.public(now), nil
}

// reloadSigner follows the active key that another process made
// (coherence.go): a key of the store's own signs new headers from now on;
// of a key held outside the store, this process can only say that it
// goes on with the key it has. A Service given its key keeps signing with
// it. It keeps what it has when the store cannot be read, and logs why.
func (s *Service) reloadSigner(ctx context.Context) {
	s.signerMu.Lock()
	defer s.signerMu.Unlock()
	var active, sealed []byte
	var id [8]byte
	err := s.store.View(ctx, func(tx Txn) error {
		var err error
		if active, err = tx.Get(keySigningActive); err != nil {
			return err
		}
		if _, err := hex.Decode(id[:], active); err != nil || len(active) != 2*len(id) {
			return Errorf(KindInternal, "active signing key ID %q is malformed", active)
		}
		if s.active.set && id == s.active.id {
			return nil
		}
		sealed, err = tx.Get(join(pfxSigning, active))
		return err
	})
	if err != nil {
		s.log.Error().Err(err).Msg("read the active header signing key")
		return
	}
	if sealed == nil {
		return
	}
	sk, err := openStoredKey(s.barrier.Open, join(pfxSigning, active), sealed)
	if err != nil {
		s.log.Error().Err(err).Msg("open the active header signing key")
		return
	}
	s.addVerifyKey(sk.id, sk.pub)
	s.setActive(sk.id, sk.held(), sk.uri)
	ev := s.log.Info()
	switch {
	case s.held != nil:
		ev.Str("signingKeyId", hex.EncodeToString(s.held.ID[:])).
			Msg("another process made another header signing key active; this process signs with the key it was given, which stays published, until restarted with the new one")
	case sk.held():
		ev = s.log.Warn()
		if cur := s.signer.Load(); cur != nil {
			ev = ev.Str("signingKeyId", hex.EncodeToString(cur.ID[:]))
		}
		ev.Str("activeSigningKeyId", string(active)).Str("uri", sk.uri).
			Msg("the active header signing key is held outside the store, and this process was given none: it signs with the key it has, which stays published, until restarted with the new one")
		return
	default:
		s.useSigner(&headersign.Signer{ID: sk.id, Key: sk.priv})
	}
	ev.Str("activeSigningKeyId", string(active)).Msg("another process made a header signing key active")
}

// signerStale asks the coherence goroutine to reload the signer, without
// waiting (coherence.go).
func (s *Service) signerStale() {
	select {
	case s.signerNotice <- struct{}{}:
	default:
	}
}

// CheckSigner reports whether the Service signs headers: nil, or an error
// of kind Unavailable when it has no key to sign with, because the
// store's active key is held outside the store (in a PKCS#11 token, say)
// and the Service was given none (Options.SigningKey). Its encrypt calls
// then fail. The message names the key and where the store says it is
// held, for the operator (kmsd refuses to start so).
func (s *Service) CheckSigner() error {
	if s.signer.Load() != nil {
		return nil
	}
	s.signerMu.Lock()
	a := s.active
	s.signerMu.Unlock()
	where := "outside the store"
	if a.uri != "" {
		where = "at " + a.uri
	}
	return Errorf(KindUnavailable, "no header signing key: the store's active key %s is held %s, and this process was not given it",
		hex.EncodeToString(a.id[:]), where)
}

// errNoSigner is what an encrypt call answers when the Service has no
// key to sign its header with (CheckSigner says why, to the operator).
var errNoSigner = Errorf(KindUnavailable, "service unavailable: this process has no header signing key; its operator must start it with the store's active one")

// errSignFailed is what an encrypt call answers when its header was not
// signed: the key failed (the journal logs why). Its record stands, as
// the record of a call whose answer was lost on the way does: the call
// was made, and its key never handed out.
var errSignFailed = Errorf(KindUnavailable, "service unavailable: the header signing key failed to sign; try again")
