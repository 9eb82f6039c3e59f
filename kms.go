package kms

import (
	"context"
	"crypto/ed25519"
	"errors"
	"math"
	"time"

	"github.com/ringkms/kms/internal/cache"
	"github.com/ringkms/kms/internal/encryptcount"
	"github.com/ringkms/kms/internal/headersign"
	"github.com/ringkms/kms/internal/hmackey"
	"github.com/ringkms/kms/internal/journal"
	"github.com/ringkms/kms/internal/keytype"
	"github.com/ringkms/kms/internal/pacer"
	"github.com/ringkms/kms/internal/paging"
	"github.com/ringkms/kms/internal/seal"
	"github.com/rs/zerolog"
)

// The making of a Service over a store (New), wiring its mechanisms
// together, and its end (Close); Ping says whether it can serve.

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
	s.aliases = cache.New[string, string](size)
	s.keys = cache.New[string, *keyRecord](size)
	s.keyVersions = cache.New[string, string](size)
	s.heldKeys = cache.New[string, *keytype.Key](size)
	s.principals = cache.New[string, *Principal](size)
	s.signers = cache.New[string, *signer](size)
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
