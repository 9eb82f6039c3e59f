package kms

import (
	"bytes"
	"context"
	"time"

	"github.com/ringkms/kms/internal/barrier"
)

// Caches of a shared store. When other processes write the store too (its
// Trail is a SharedTrail: the nodes of a cluster), what a Service caches
// (rings, their names and aliases, keys, the principals of API keys,
// access tokens and Users, and sessions), and the signing key it signs
// headers with, may change under it. Two things keep it coherent:
//
//   - every transaction that writes a cached kind of key announces the keys
//     to the other processes (Watcher), and each process drops the caches
//     of those kinds as the announcement arrives, milliseconds after the
//     commit; when the announcements may have been lost, it drops them all;
//   - as a bound that holds whatever happens to announcements, every
//     cache is emptied each cacheMaxAge, and a fill that read the store
//     before an emptying is not kept (cache.fill's generation check).
//
// So a change made through one process takes effect on every other
// within cacheMaxAge plus one store read: under a second (docs/OPERATIONS.md
// documents the bound). The process that made the change sees it at once,
// as it updates its own caches at the commit. The signing key is reloaded
// rather than dropped: on the announcement of a rotation, and at every
// cacheMaxAge. Encrypt does not rest on the caches for a deleted ring or
// a disabled key: its commit checks them (encryptChecks). Encrypt counts
// are kept in the store (internal/encryptcount).
const cacheMaxAge = 500 * time.Millisecond

// cachedPrefixes are the kinds of keys whose values the caches hold, or
// derive principals and sessions from, the active signing key, which the
// signer holds (signingkeys.go), and the root secret, whose seal key the
// Service's barrier holds (internal/barrier).
var cachedPrefixes = [][]byte{
	pfxRing, pfxRingName, pfxKey, pfxHeldAlias,
	pfxAPIKey, pfxAPIDigest, pfxAccount, pfxUser, pfxSession,
	keySigningActive, barrier.KeyRoot,
}

// startCoherence starts keeping the caches coherent with other processes'
// writes, when the store is shared, and returns what stops it.
func (s *Service) startCoherence() (stop func()) {
	if _, shared := s.trail.(SharedTrail); !shared {
		return func() {}
	}
	stopWatch := func() {}
	if w, ok := s.store.(Watcher); ok {
		stopWatch = w.Watch(cachedPrefixes, s.forgetKeys)
	}
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(cacheMaxAge)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				s.forgetCaches()
				s.reloadSigner(context.Background())
				if s.keyCheckDue.Load() {
					s.checkRoot(context.Background())
				}
			case <-s.signerNotice:
				s.reloadSigner(context.Background())
			}
		}
	}()
	return func() {
		close(done)
		<-stopped
		stopWatch()
	}
}

// forgetKeys drops the caches of the kinds of keys that another process
// wrote; nil keys, every cache.
func (s *Service) forgetKeys(keys [][]byte) {
	if keys == nil {
		s.forgetCaches()
		s.signerStale()
		s.keyCheckDue.Store(true)
		s.checkRoot(context.Background())
		return
	}
	var rings, ringKeys, principals bool
	for _, k := range keys {
		switch {
		case bytes.Equal(k, keySigningActive):
			s.signerStale()
		case bytes.Equal(k, barrier.KeyRoot):
			s.checkRoot(context.Background()) // a rekey: follow it, or stop
		case bytes.Equal(k, barrier.KeyMACKeys):
		case bytes.HasPrefix(k, pfxRing), bytes.HasPrefix(k, pfxRingName), bytes.HasPrefix(k, pfxHeldAlias):
			rings = true
		case bytes.HasPrefix(k, pfxKey):
			ringKeys = true
		default:
			principals = true
		}
	}
	if rings {
		s.rings.Reset()
		s.ringNames.Reset()
		s.aliases.Reset()
	}
	if ringKeys {
		s.keys.Reset()
		s.heldKeys.Reset()
	}
	if principals {
		s.principals.Reset()
		s.signers.Reset()
		s.forgetSessions()
	}
}

// forgetCaches empties every cache of what the store holds, so that the
// next reads fill them from the store.
func (s *Service) forgetCaches() {
	s.rings.Reset()
	s.ringNames.Reset()
	s.aliases.Reset()
	s.keys.Reset()
	s.heldKeys.Reset()
	s.principals.Reset()
	s.signers.Reset()
	s.forgetSessions()
}

// forgetCached empties every cache of what the store holds, and the
// encrypt counters (an undo may have taken back their reservations).
func (s *Service) forgetCached() {
	s.forgetCaches()
	s.counts.Reset()
}

// checkRoot catches up with a rekey that another process made (its
// announcement, or a check after this process was cut off from the store):
// the barrier adopts the store's new root secret when one of the Service's
// keys opens it, and otherwise the Service stops every write, for good,
// until it is restarted with the store's master key. While the store
// cannot be read, the check stays due.
func (s *Service) checkRoot(ctx context.Context) {
	if s.journal.Stopped() {
		s.keyCheckDue.Store(false)
		return
	}
	checked := s.barrier.Check(ctx)
	if checked == barrier.Unreadable {
		return // not readable now: still due
	}
	s.keyCheckDue.Store(checked == barrier.Again) // Again: not now (a token that does not answer): still due
	if checked != barrier.Foreign {
		return
	}
	e := &Error{Kind: KindUnavailable, Message: "service unavailable: the store was rekeyed to another master key while this process ran; restart it with the new master key"}
	if s.journal.Stop(e) {
		s.log.Error().Msg("the store was rekeyed to another master key while this process ran: it refuses every write until restarted with the new master key")
	}
}

// adoptedRoot is what the Service does once its barrier adopted the
// root secret the store was rekeyed to: the caches, which may hold values
// sealed under the old one, start again.
func (s *Service) adoptedRoot() {
	s.forgetCaches()
	s.log.Info().Msg("the store was rekeyed: this process goes on under its new root secret")
}
