package kms

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringkms/kms/internal/barrier"
	"github.com/ringkms/kms/internal/cache"
	"github.com/ringkms/kms/internal/encryptcount"
	"github.com/ringkms/kms/internal/headersign"
	"github.com/ringkms/kms/internal/hmackey"
	"github.com/ringkms/kms/internal/journal"
	"github.com/ringkms/kms/internal/keytype"
	"github.com/ringkms/kms/internal/pacer"
	"github.com/ringkms/kms/internal/paging"
	"github.com/ringkms/kms/internal/seal"
)

// Options configure a Service. The zero value of each field is a working
// default, except MasterKey, which is required.
type Options struct {
	// MasterKey is the root of trust (RootKey): a MasterKey, a key in a
	// PKCS#11 token, or another RootKey. Required.
	MasterKey RootKey

	// NextMasterKey is a second root key, for a rotation of the master
	// key while the service runs: the Service opens its store under
	// whichever of its two keys the store is sealed with, keeps both,
	// and follows a rekey (Rekey, Service.Rekey) to either without a
	// restart. Optional; without it the Service keeps no root key once
	// started.
	NextMasterKey RootKey

	// Logger receives operational events (never a secret). Nil means
	// silent. The audit trail is data, not log lines.
	Logger *zerolog.Logger

	// Now returns the current time. Nil means time.Now.
	Now func() time.Time

	// Mailer sends invitations and password resets. With none, an
	// invitation still succeeds (its loginUrl is the only copy of the
	// link) and a password reset cannot start (Invalid).
	Mailer Mailer

	// BaseURL is the public address of the service, on which links in
	// mail are built (for example https://kms.example.com).
	BaseURL string

	// TokenTTL is how long a user access token lasts. Zero means one hour.
	TokenTTL time.Duration
	// SessionLifetime is how long a User stays signed in: refresh hands
	// out new access tokens until SessionLifetime after the login (or
	// invitation completion) that issued the first, and no token lasts
	// past that. Then the User logs in again. Zero means 24 hours.
	SessionLifetime time.Duration
	// InviteTTL is how long an invitation can be completed. Zero means
	// seven days.
	InviteTTL time.Duration
	// ResetTTL is how long a password reset can be completed. Zero means
	// one hour.
	ResetTTL time.Duration

	// Limits are the plan limits: how many resources may exist. The zero
	// value of each means no limit.
	Limits Limits

	// CacheSize bounds each in-memory cache (key rings, keys,
	// credentials) in entries. Zero means 100,000.
	CacheSize int

	// MaxHeldKeyEncryptions bounds the encryptions that one version of a
	// held key makes: AES-256-GCM with random 96-bit nonces stays
	// within NIST SP 800-38D's bound on the chance of a repeated nonce
	// for at most 2^32 of them. Past it, the key rotates as it does past
	// a maxEncryptCount (whichever is lower applies), and an encrypt that
	// names an older version is refused (heldkeys_crypto.go). Zero means
	// DefaultMaxTransitEncryptions, which is also the most allowed; a
	// smaller value rotates sooner.
	MaxHeldKeyEncryptions uint64

	// MinDestroyDelay is the shortest delay after which a key may be
	// scheduled for destruction (DestroyKey). Zero means
	// DefaultMinDestroyDelay (one hour); a negative value allows any
	// delay, none included.
	MinDestroyDelay time.Duration

	// RateLimits, when set, limit the calls of each client address,
	// credential and Account that Admit and AdmitN are asked about
	// (httpapi asks for every request, and for each item of a batch). The
	// zero value limits nothing.
	RateLimits RateLimits

	// IPv6Prefix is how many leading bits of a client's IPv6 address
	// name the client for the rate limit per address and the login and
	// reset throttles (WithClientAddr): a host is usually given a whole
	// /64, and counted one address at a time it could make every call
	// from a new address and never be limited. Zero means
	// DefaultIPv6Prefix (64); otherwise 1 to 128 (128: each address on
	// its own). An IPv4 address, and an IPv4-mapped IPv6 address, counts
	// as its own IPv4 address.
	IPv6Prefix int

	// Observer, when set, receives measurements of the journal's batches
	// and the activity records they commit, for metrics (observe.go;
	// package metrics has one for Prometheus).
	Observer Observer

	// SigningKey, when set, is the key that signs every header this
	// Service issues: an Ed25519 key held outside the store, and as a
	// rule outside the process (kmsd -signing-key-pkcs11 gives a key pair
	// in a PKCS#11 token). Its Public must be an ed25519.PublicKey, and
	// its Sign must sign the message itself (pure Ed25519, opts
	// crypto.Hash(0)); it is called once per tree of up to 16 headers,
	// from one goroutine at a time, and asked twice before the calls of
	// a tree it fails answer Unavailable. The store records the key's public
	// key and SigningKeyURI, never a private key, so that every process
	// and GET /ks/signing-keys publish it; New records it and makes it
	// active when the store does not know it yet. The Service signs with
	// this key alone: it does not follow another process's rotation, and
	// RotateSigningKey refuses (signer.go). Nil, the default: keys the
	// service makes itself and keeps sealed in the store.
	SigningKey crypto.Signer
	// SigningKeyURI says where SigningKey is held (kmsd records the
	// token's URI without its pin-source); the store records it with
	// the public key, for operators and for the messages of processes
	// that lack the key. Never a secret. Optional.
	SigningKeyURI string
}

// Limits are plan limits. Creating a resource past one is a Limit error
// whose message names the maximum.
type Limits struct {
	MaxKeyRings          int // key rings of both groups, in all
	MaxUsers             int // Users, in all
	MaxAccounts          int // Accounts, in all
	MaxAPIKeysPerAccount int // API keys of one Account
}

// Service is ringkms: key rings, keys, credentials and the audit trail,
// over a Store. It is safe for concurrent use. Every method that acts for
// a caller takes the caller's Principal from its context (WithPrincipal).
type Service struct {
	store    Store
	trail    Trail // the activity trail, beside the store
	opts     Options
	log      zerolog.Logger
	now      func() time.Time
	journal  *journal.Journal[*Activity] // the single writer: every write and every record
	chainKey *hmackey.Key                // keys the activity chain (journal.Digest)
	limits   *rateLimiter                // nil: no rate limits

	barrier   *barrier.Barrier // the store's root secret, the seal and backup keys, a rekey (internal/barrier)
	hashMAC   *hmackey.Key     // MAC of hashes
	headerMAC *hmackey.Key     // MAC of headers
	pager     pager

	signer       atomic.Pointer[headersign.Signer] // signs new headers (signer.go); nil: none (CheckSigner)
	signerMu     sync.Mutex                        // serialises changes of signer, guards active
	active       activeKey                         // the store's active signing key, as last seen
	held         *headersign.Signer                // Options.SigningKey, the only key this Service signs with; nil: the store's keys
	signerNotice chan struct{}                     // another process may have rotated the signing key (coherence.go)
	keyCheckDue  atomic.Bool                       // the master key is to be checked against the store (coherence.go)
	verifyMu     sync.RWMutex
	verify       map[[8]byte]ed25519.PublicKey

	rings      *cache.Cache[string, *ringRecord] // ring ID -> ring
	ringNames  *cache.Cache[string, string]      // lower-case name -> ring ID
	keys       *cache.Cache[string, *keyRecord]  // key ID -> key
	principals *cache.Cache[string, *Principal]  // digest of a secret -> principal
	users      *userState                        // sessions and login throttles
	counts     *encryptcount.Counters            // the encrypt calls of each key, against reservations in the store
	ringLocks  sync.Map                          // ring ID -> *journal.Lock (lockRing)

	// keyVersions maps ring ID "/" version to key ID (keyversion.go): a
	// version, once given, never names another key. numbered says that
	// every ring's keys have versions.
	keyVersions *cache.Cache[string, string]
	numbered    atomic.Bool
	// heldKeys holds the AES-GCM of the /asym keys that transit calls
	// used, unwrapped (heldkeys_crypto.go): key ID -> cipher.AEAD.
	heldKeys *cache.Cache[string, *keytype.Key]

	stopCoherence func()       // stops keeping the caches coherent with other processes (coherence.go)
	destroyer     *pacer.Pacer // destroys keys at their time (destroy.go)
	rotator       *pacer.Pacer // rotates rings at the end of their rotationPeriod (rotation.go)
}

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

// New returns a Service over st. It loads (or, on a new store, creates) the
// header signing key and the audit chain head, and starts the journal that
// performs every write. Close stops it.
func New(st Store, opts Options) (*Service, error) {
	if st == nil {
		return nil, Errorf(KindInvalid, "a store is required")
	}
	if noRootKey(opts.MasterKey) {
		return nil, Errorf(KindInvalid, "a master key is required")
	}
	s := &Service{store: st, trail: st.Trail(), opts: opts, now: opts.Now, log: zerolog.Nop()}
	if opts.SigningKey != nil {
		g, err := headersign.New(opts.SigningKey)
		if err != nil {
			return nil, Errorf(KindInvalid, "Options.SigningKey: %v", err)
		}
		s.held = g
	}
	for _, r := range []Rate{opts.RateLimits.PerAddr, opts.RateLimits.PerAPIKey} {
		if r.PerSecond < 0 || r.Burst < 0 || math.IsNaN(r.PerSecond) || math.IsInf(r.PerSecond, 0) {
			return nil, Errorf(KindInvalid, "rate limits: want a rate of 0 (none) or more calls a second, and a burst of 0 or more")
		}
	}
	if opts.MaxHeldKeyEncryptions > DefaultMaxHeldKeyEncryptions {
		return nil, Errorf(KindInvalid, "Options.MaxHeldKeyEncryptions: at most %d (2^32), the bound of NIST SP 800-38D for random 96-bit GCM nonces", uint64(DefaultMaxHeldKeyEncryptions))
	}
	if s.opts.MaxHeldKeyEncryptions == 0 {
		s.opts.MaxHeldKeyEncryptions = DefaultMaxHeldKeyEncryptions
	}
	s.limits = newRateLimiter(opts.RateLimits)
	switch p := opts.IPv6Prefix; {
	case p == 0:
		s.opts.IPv6Prefix = DefaultIPv6Prefix
	case p < 1 || p > 128:
		return nil, Errorf(KindInvalid, "Options.IPv6Prefix %d: want 1 to 128 bits, or 0 for %d", p, DefaultIPv6Prefix)
	}
	if opts.Logger != nil {
		s.log = *opts.Logger
	}
	if s.now == nil {
		s.now = time.Now
	}
	size := opts.CacheSize
	if size <= 0 {
		size = 100_000
	}
	s.barrier = barrierOf(st, s.adoptedRoot)
	keys, err := s.barrier.Start(context.Background(), opts.MasterKey, opts.NextMasterKey)
	if err != nil {
		return nil, err
	}
	s.hashMAC = hmackey.New(keys.HashMAC)
	s.headerMAC = hmackey.New(keys.HeaderMAC)
	s.pager = pager{paging.New(seal.New(keys.Cursor))}
	s.rings = cache.New[string, *ringRecord](size)
	s.ringNames = cache.New[string, string](size)
	s.keys = cache.New[string, *keyRecord](size)
	s.keyVersions = cache.New[string, string](size)
	s.heldKeys = cache.New[string, *keytype.Key](size)
	s.principals = cache.New[string, *Principal](size)
	s.users = newUserState(size, st, keys.Throttle, func(err error, msg string) { s.log.Error().Err(err).Msg(msg) })
	s.counts = encryptcount.New(encryptcount.Config{
		Store:    st,
		Submit:   func(mutate func(Txn) error) error { return s.submit(nil, mutate, nil) },
		Lock:     func(l *journal.Lock) error { return s.journal.Lock(l) },
		CountKey: func(keyID string) []byte { return join(pfxKeyCount, []byte(keyID)) },
		KeyKey:   func(ringID, keyID string) []byte { return join(pfxKey, []byte(ringID), sep, []byte(keyID)) },
	})
	s.verify = map[[8]byte]ed25519.PublicKey{}
	s.signerNotice = make(chan struct{}, 1)
	s.opts.MasterKey, s.opts.NextMasterKey = nil, nil // the barrier keeps them, with a second key only
	if s.opts.TokenTTL <= 0 {
		s.opts.TokenTTL = time.Hour
	}
	if s.opts.SessionLifetime <= 0 {
		s.opts.SessionLifetime = 24 * time.Hour
	}
	if s.opts.InviteTTL <= 0 {
		s.opts.InviteTTL = 7 * 24 * time.Hour
	}
	if s.opts.ResetTTL <= 0 {
		s.opts.ResetTTL = time.Hour
	}

	ctx := context.Background()
	// The signing keys open only under the master key they were sealed
	// with: loading them first tells a wrong master key as such, before
	// the journal checks the activity chain (whose key it also derives).
	if err := s.loadSigningKey(ctx); err != nil {
		return nil, err
	}
	s.chainKey = hmackey.New(keys.AuditChain)
	j, err := journal.Start(ctx, journal.Config[*Activity]{
		Store: st, Codec: activityCodec{}, Index: newActivityIndex(), ChainKey: s.chainKey,
		HeadKey: keyActHead, PendingKey: keyActPending, Now: s.now,
		Log:      func(err error, msg string) { s.log.Error().Err(err).Msg(msg) },
		Observer: opts.Observer, Signer: &s.signer, Undone: s.forgetCached,
	})
	if err != nil {
		return nil, err
	}
	s.journal = j
	switch {
	case s.held != nil:
		err = s.adoptHeldKey(ctx)
	case s.signer.Load() == nil && !s.active.set:
		err = s.createSigningKey()
	case s.signer.Load() == nil:
		s.log.Error().Err(s.CheckSigner()).Msg("encrypt calls will fail until this process is started with the store's active header signing key")
	}
	if err != nil {
		j.Close()
		return nil, err
	}
	s.stopCoherence = s.startCoherence()
	s.destroyer = pacer.Start(pacer.Config{Pass: s.destroyDue, Poll: destroyPoll, Retry: destroyRetry, Now: s.now,
		Log: func(err error) { s.log.Error().Err(err).Msg("destroying keys at their time failed; trying again") }})
	s.rotator = pacer.Start(pacer.Config{Pass: s.rotateDue, Poll: rotatePoll, Retry: rotateRetry, Now: s.now,
		Log: func(err error) {
			s.log.Error().Err(err).Msg("rotating rings at the end of their rotation period failed; trying again")
		}})
	s.startRateLimits()
	return s, nil
}

// Close stops the journal after the writes in flight, those of password
// reset requests already answered included, and the records of the
// rate-limit refusals only counted so far, then gives back the encrypt
// calls reserved and not used (internal/encryptcount). It does not
// close the Store, which the caller owns.
func (s *Service) Close() error {
	s.users.background.Wait()
	s.users.throttles.Wait()
	s.destroyer.Stop()
	s.rotator.Stop()
	var err error
	if s.limits != nil {
		err = s.limits.refusals.Close() // the counts go before the journal
	}
	s.journal.Close()
	s.stopCoherence()
	return errors.Join(err, s.counts.Release(context.Background()))
}

// Ping reports whether the service can serve: its store answers a read
// and can take writes (every call writes its activity record), and its
// journal is not held up. The error says why not: kind NoSpace for a full
// disk, Unavailable for a journal that cannot write now. It asks
// Writable first, which is cheap and bounded (pgstore's waits at most a
// second): a database gone silent then fails Ping within that bound,
// rather than after the read's own timeout (the store timeout of a node).
func (s *Service) Ping(ctx context.Context) error {
	if err := s.store.Writable(ctx); err != nil {
		return err
	}
	err := s.store.View(ctx, func(tx Txn) error {
		_, err := tx.Get(keySigningActive)
		return err
	})
	if err != nil {
		return internalError("store does not answer", err)
	}
	return s.journal.Health()
}
