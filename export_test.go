package kms

import (
	"context"
	"encoding/json"
	"time"

	"github.com/ringkms/kms/internal/barrier"
	"github.com/ringkms/kms/internal/encryptcount"
	"github.com/ringkms/kms/internal/seal"
)

// SetJournalPause replaces the group-commit yield of s's journal (see
// gather) with pause. Call it while no job is in flight: the next
// job's submission publishes it to the journal.
func SetJournalPause(s *Service, pause func()) { s.journal.SetPause(pause) }

// SetUnlimitedBlock sets how many encrypt calls a reservation covers for
// a key without a limit (unlimitedBlock), so that a test crosses blocks
// in a few calls. Call it before the first encrypt.
func SetUnlimitedBlock(s *Service, n uint64) { s.counts.SetFreeBlock(n) }

// JournalQueued returns the number of jobs waiting for s's journal.
func JournalQueued(s *Service) int { return s.journal.Queued() }

// LoginThrottles are the login throttles of a Service over st with the
// master key mk, built as New builds them, so that a test can count
// failures through several at once, as several nodes over one store do,
// without running a Service (and a journal) for each. logErr gets what
// the throttles log.
type LoginThrottles struct{ st *userState }

func NewLoginThrottles(st Store, mk MasterKey, logErr func(error, string)) *LoginThrottles {
	keys, err := loadKeys(context.Background(), st, mk)
	if err != nil {
		panic(err)
	}
	return &LoginThrottles{st: newUserState(1, st, keys.Throttle, logErr)}
}

// Attempt runs a login attempt of the User with ID userID from addr at
// now, which fails unless ok. It reports false when the throttles refused
// it.
func (t *LoginThrottles) Attempt(ctx context.Context, userID, addr string, now time.Time, ok bool) (bool, error) {
	a, _, err := t.st.throttles.BeginLogin(ctx, "u/"+userID, addr, now)
	if err != nil || a == nil {
		return false, err
	}
	a.End(ctx, now, !ok)
	return true, nil
}

// Wait waits for the sweep of idle counts under way, if any.
func (t *LoginThrottles) Wait() { t.st.throttles.Wait() }

// ThrottlePrefix is the store prefix of the throttles' counts.
func ThrottlePrefix() []byte { return pfxThrottle }

// SkipJournal makes s answer every write and record at once, committing,
// recording and signing nothing, for the layer benchmark.
func SkipJournal(s *Service) { s.journal.SetSkip(true) }

// CountTotal is the store's total of the calls reserved on the key keyID,
// what every process reads.
func CountTotal(s *Service, keyID string) (uint64, error) {
	var total uint64
	err := s.store.View(context.Background(), func(tx Txn) error {
		var err error
		total, err = encryptcount.LoadTotal(tx, join(pfxKeyCount, []byte(keyID)))
		return err
	})
	return total, err
}

// UsedKey reports whether record a counts as a use of a key (keyUses).
func UsedKey(a *Activity) bool {
	_, n := keyUses(a)
	return n > 0
}

// PurposeKeys returns the purpose keys the store's keys record holds for
// mk (loadKeys), by purpose, and the key the root secret that mk
// opens (its own bytes, for a master key never rekeyed) derives for each.
func PurposeKeys(ctx context.Context, st Store, mk RootKey) (stored, derived map[string][32]byte, err error) {
	k, err := loadKeys(ctx, st, mk)
	if err != nil {
		return nil, nil, err
	}
	stored = map[string][32]byte{"seal": k.Seal, "backup-mac": k.Backup, "hash-mac": k.HashMAC, "header-mac": k.HeaderMAC,
		"cursor": k.Cursor, "audit-chain": k.AuditChain, "throttle": k.Throttle}
	root, _, err := barrierOf(st, nil).RootSecret(ctx, mk)
	if err != nil {
		return nil, nil, err
	}
	defer clear(root)
	derived = map[string][32]byte{"backup-mac": barrier.BackupKey(root)}
	for p := range stored {
		if p != "backup-mac" {
			derived[p] = seal.Derive(root, p)
		}
	}
	return stored, derived, nil
}

// ShareSecret opens the share secret of the split ring ringID as st holds
// it, sealed under the seal key of mk with the ring's associated data.
func ShareSecret(ctx context.Context, st Store, mk MasterKey, ringID string) ([]byte, error) {
	k, err := loadKeys(ctx, st, mk)
	if err != nil {
		return nil, err
	}
	var r *ringRecord
	if err := st.View(ctx, func(tx Txn) error {
		r, err = loadRing(tx, ringID)
		return err
	}); err != nil {
		return nil, err
	}
	return seal.New(k.Seal).Open(r.SealedShare, ringShareAAD(ringID))
}

// RotateDue runs a pass of the rotation sweep now (rotateDue), and
// returns when the next rotation is due.
func RotateDue(s *Service) (time.Time, error) { return s.rotateDue(context.Background()) }

// StripKeyVersions makes the ring ringID of st as a ring made before key
// versions was: its keys without versions, no index of them, no latest
// version.
func StripKeyVersions(ctx context.Context, st Store, ringID string) error {
	return st.Update(ctx, func(tx Txn) error {
		r, err := loadRing(tx, ringID)
		if err != nil {
			return err
		}
		r.LatestVersion = 0
		if err := putRing(tx, r); err != nil {
			return err
		}
		var keys []*keyRecord
		err = tx.Scan(ScanOptions{Prefix: join(pfxKey, []byte(ringID), sep)}, func(_, v []byte) (bool, error) {
			var k keyRecord
			if err := json.Unmarshal(v, &k); err != nil {
				return false, err
			}
			keys = append(keys, &k)
			return true, nil
		})
		if err != nil {
			return err
		}
		for _, k := range keys {
			if err := tx.Delete(keyVersionKey(ringID, k.Version)); err != nil {
				return err
			}
			k.Version = 0
			if err := putKey(tx, k); err != nil {
				return err
			}
		}
		return nil
	})
}
