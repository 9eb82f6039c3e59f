package kms

import (
	"context"
	"time"
)

// SetJournalPause replaces the group-commit yield of s's journal (see
// gather) with pause. Call it while no job is in flight: the next
// job's submission publishes it to the journal.
func SetJournalPause(s *Service, pause func()) { s.journal.pause = pause }

// SetUnlimitedBlock sets how many encrypt calls a reservation covers for
// a key without a limit (unlimitedBlock), so that a test crosses blocks
// in a few calls. Call it before the first encrypt.
func SetUnlimitedBlock(s *Service, n uint64) { s.freeBlock = n }

// JournalQueued returns the number of jobs waiting for s's journal.
func JournalQueued(s *Service) int { return len(s.journal.jobs) }

// LoginThrottles are the login throttles of a Service over st with the
// master key mk, built as New builds them, so that a test can count
// failures through several at once, as several nodes over one store do,
// without running a Service (and a journal) for each. logErr gets what
// the throttles log.
type LoginThrottles struct{ st *userState }

func NewLoginThrottles(st Store, mk MasterKey, logErr func(error, string)) *LoginThrottles {
	keys, err := loadServiceKeys(context.Background(), st, mk)
	if err != nil {
		panic(err)
	}
	return &LoginThrottles{st: newUserState(1, st, keys.Throttle, logErr)}
}

// Attempt runs a login attempt of the User with ID userID from addr at
// now, which fails unless ok. It reports false when the throttles refused
// it.
func (t *LoginThrottles) Attempt(ctx context.Context, userID, addr string, now time.Time, ok bool) (bool, error) {
	a, _, err := t.st.beginLogin(ctx, "u/"+userID, addr, now)
	if err != nil || a == nil {
		return false, err
	}
	a.end(ctx, now, !ok)
	return true, nil
}

// Wait waits for the sweep of idle counts under way, if any.
func (t *LoginThrottles) Wait() { t.st.sweeper.Wait() }

// ThrottlePrefix is the store prefix of the throttles' counts.
func ThrottlePrefix() []byte { return pfxThrottle }

// SkipJournal makes s answer every write and record at once, committing,
// recording and signing nothing, for the layer benchmark.
func SkipJournal(s *Service) { s.journal.skip.Store(true) }
