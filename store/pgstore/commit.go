package pgstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/store/internal/retry"
)

// Commit markers: how a commit whose answer was lost is settled.
//
// Every transaction of Update, UpdateNoSync and Trail.AppendIn that
// writes inserts, in the batch of its COMMIT, a row of kms_commits whose
// id is 16 random bytes drawn before its BEGIN. The row exists if and
// only if the transaction committed. When the connection breaks once the
// COMMIT may have been sent (the answer never came: a reset, a timeout,
// the server terminating the session), the outcome is settled before the
// caller is answered, on another connection:
//
//  1. the backend that ran the transaction (its pid, which the server
//     gave the connection when it opened) must be gone: while it lives,
//     it may still be committing (a COMMIT it read before the connection
//     broke, or one waiting for a synchronous standby). It is asked to
//     terminate (pg_terminate_backend, only if it is a session of the
//     same user, database and application), and pg_stat_activity is
//     polled until it no longer lists the pid. A backend leaves
//     pg_stat_activity only after it has ended its transaction (the
//     abort of a transaction left open runs in a before_shmem_exit
//     callback, the removal of its activity entry later, in an
//     on_shmem_exit one), and a transaction whose backend is gone can
//     neither commit any more nor become visible later: it committed,
//     visibly to every later snapshot, or it never will;
//  2. then, in a later statement (so with a later snapshot), the marker
//     is looked up: absent, the transaction did not commit and never will,
//     and the call returns an error of kind Unavailable saying that
//     nothing was written; present, it committed on this server, and one
//     more write (the marker's own row, rewritten as it is) is committed
//     before the call returns nil. That write's commit waits, as every
//     commit with synchronous_commit on does, for the synchronous
//     standbys to hold the WAL up to it, and so up to the transaction's
//     commit: a transaction whose backend was terminated while it waited
//     for a standby is committed locally only, and would be lost by a
//     failover if it were answered as done then.
//
// Both steps are retried, each try a round trip bounded by the Store's
// QueryTimeout, on new connections, for as long as the database cannot be
// reached (a failover in progress, a partition), up to settleWindow: the
// caller waits, and is answered once the outcome is known. Only past
// settleWindow, or when the Store is closed meanwhile, is the outcome left
// unknown: the call returns an error of kind Unavailable that says so and
// names the marker, which an operator may look up while it is kept
// (markerAge, well beyond settleWindow, so that no sweep deletes a marker
// that a node may still look for).
//
// Both steps count only on a server that takes writes: a standby (in
// recovery) lists none of the primary's sessions, and need not have
// replayed the commit yet (a synchronous standby flushes the WAL before
// the primary answers, and may replay it later), so a lookup there would
// find the backend gone and the marker absent for a commit that took
// place. A connection that reaches one (a URL that names a standby
// without target_session_attrs=read-write, a name or a pooler that leads
// elsewhere for a moment) is closed, so that the pool connects afresh,
// and the try counts as one that could not reach the database.
//
// A failover to a standby (a multi-host URL) does not change the
// argument: the old primary's backend is not on the new server, and a
// commit that was not replicated before the promotion is not there (with
// synchronous standbys, an acknowledged one always is; this one was not
// acknowledged). The new primary has left recovery before it answers as
// one.
//
// Markers older than markerAge are deleted by a sweep, one DELETE in a
// transaction of its own (READ COMMITTED, so concurrent sweeps of other
// nodes wait for one another rather than conflict), started by a commit
// at most every sweepEvery, so the table holds about markerAge of commits.
//
// The old backend is given letGoBound (or a fifth of QueryTimeout, when
// shorter) to finish a COMMIT that reached it before it is asked to go.
const (
	settleWindow = 2 * time.Minute
	letGoBound   = time.Second
	markerAge    = 5 * time.Minute
	sweepEvery   = 15 * time.Second
)

const (
	sqlMarker = "INSERT INTO kms_commits (id, at) VALUES ($1, clock_timestamp())"
	// The old backend, if it is still there and is a session like ours.
	sqlTerminate = `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE pid = $1 AND usename = current_user AND datname = current_database()`
	// Each answers too whether the server is a standby, on which neither
	// counts.
	sqlBackendAlive = "SELECT pg_is_in_recovery(), count(*) > 0 FROM pg_stat_activity WHERE pid = $1"
	sqlMarkerFound  = "SELECT pg_is_in_recovery(), count(*) > 0 FROM kms_commits WHERE id = $1"
	// A write whose commit waits for the synchronous standbys.
	sqlMarkerReplicated = "UPDATE kms_commits SET at = at WHERE id = $1"
	sqlSweep            = "DELETE FROM kms_commits WHERE at < clock_timestamp() - $1::INTERVAL"
)

// newMarker returns the id of a transaction's marker.
func newMarker() []byte {
	id := make([]byte, 16)
	rand.Read(id)
	return id
}

// inDoubt reports whether the commit of t may have happened although it
// failed: it wrote a marker, the commit's batch was (perhaps in part)
// sent, and its connection broke rather than the server answering with
// an error (which rolls the transaction back, a serialization failure at
// commit among them). A connection closed for any reason (the caller's
// context, a round trip's timeout, a FATAL error) leaves the commit in
// doubt, however the error reads.
func (t *txn) inDoubt(connClosed bool) bool {
	if t.marker == nil || !t.committing || t.failed == nil {
		return false
	}
	if pgconn.SafeToRetry(t.failed) {
		return false // nothing of the commit's batch was written
	}
	return connClosed || isLostConnection(t.failed)
}

// errNotCommitted is the error of a commit found not to have taken place.
func errNotCommitted(cause error) error {
	return &kms.Error{Kind: kms.KindUnavailable, Err: cause,
		Message: "service unavailable: the connection to the database was lost during the commit, which did not take place; nothing was written"}
}

// errBackendAlive is the cause of a lookup that found the backend of the
// transaction still there.
var errBackendAlive = errors.New("the transaction's backend is still running")

// errOnStandby is the cause of a lookup whose connection reached a
// standby.
var errOnStandby = errors.New("the connection reached a standby, which cannot tell whether the primary committed")

// settle finds out whether the transaction whose marker is id, run by the
// backend pid, committed (see above). It returns nil when it did, an
// error of kind Unavailable saying nothing was written when it did not,
// and one saying the outcome is unknown when neither could be found out
// within settleWindow, or before the Store was closed. cause is the
// commit's error.
func (s *Store) settle(ctx context.Context, id []byte, pid uint32, cause error) error {
	return s.settleWithin(ctx, id, pid, cause, settleWindow)
}

// settleWithin is settle with the window given.
func (s *Store) settleWithin(ctx context.Context, id []byte, pid uint32, cause error, window time.Duration) error {
	letGo := letGoBound
	if s.timeout > 0 && s.timeout/5 < letGo {
		letGo = s.timeout / 5
	}
	// The caller's context does not end the settling: an answer given
	// before the outcome is known would be a guess.
	sctx, cancel := context.WithTimeout(s.life, window)
	defer cancel()
	terminated := false
	last := cause
	// The old backend may still be working through a COMMIT that reached
	// it: it is given a moment to finish (and to see its connection gone)
	// before it is asked to go, so that a commit that arrived is not cut
	// short by the check itself.
	letGoAt := time.Now().Add(letGo)
	for attempt := 0; ; attempt++ {
		terminate := !terminated && time.Now().After(letGoAt)
		rctx, rcancel := s.roundTripCtx(sctx)
		found, err := s.lookup(rctx, id, pid, terminate, &terminated)
		rcancel()
		if err == nil {
			if found {
				s.health.ok()
				return nil
			}
			return errNotCommitted(cause)
		}
		last = err
		if retry.Backoff(sctx, attempt, 5*time.Millisecond, 200*time.Millisecond) != nil {
			break
		}
	}
	why := fmt.Sprintf("within %v", window)
	if s.life.Err() != nil {
		why = "before the store was closed"
	}
	return &kms.Error{Kind: kms.KindUnavailable, Err: s.redact(fmt.Errorf("%w (the commit: %w)", last, cause)),
		Message: fmt.Sprintf("service unavailable: the connection to the database was lost during a commit, and whether it took place could not be found out %s: it did if kms_commits holds the id %s (kept for %v)",
			why, hex.EncodeToString(id), markerAge)}
}

// lookup is one try of settle, on one connection: on a server that takes
// writes, it asks the old backend to go if it is there and terminate says
// so (settle does so once), and when it is gone, whether the marker is
// there. It returns errBackendAlive while the backend is there, and
// errOnStandby, having closed the connection, when it reached a standby.
func (s *Store) lookup(ctx context.Context, id []byte, pid uint32, terminate bool, terminated *bool) (bool, error) {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return false, err
	}
	defer c.Release()
	// ask runs one of the lookup's queries, which answer whether the
	// server is a standby first.
	ask := func(sql string, arg any) (bool, error) {
		var standby, yes bool
		if err := c.QueryRow(ctx, sql, arg).Scan(&standby, &yes); err != nil {
			return false, err
		}
		if standby {
			// Not back to the pool: the next try connects afresh.
			cctx, cancel := context.WithTimeout(context.Background(), rollbackTimeout)
			c.Conn().Close(cctx)
			cancel()
			return false, errOnStandby
		}
		return yes, nil
	}
	if c.Conn().PgConn().PID() != pid { // else the old pid is reused: ours
		alive, err := ask(sqlBackendAlive, int32(pid))
		if err == nil && alive && terminate {
			if _, err := c.Exec(ctx, sqlTerminate, int32(pid)); err != nil {
				return false, err
			}
			*terminated = true
			alive, err = ask(sqlBackendAlive, int32(pid))
		}
		if err != nil {
			return false, err
		}
		if alive {
			return false, errBackendAlive
		}
	}
	// A statement of its own: its snapshot is taken after the backend
	// was seen gone.
	found, err := ask(sqlMarkerFound, id)
	if err != nil {
		return false, err
	}
	if found {
		// Not answered as done before the synchronous standbys have it.
		if _, err := c.Exec(ctx, sqlMarkerReplicated, id); err != nil {
			return false, err
		}
	}
	return found, nil
}

// sweeper starts the sweep of old markers at most every sweepEvery.
type sweeper struct {
	next    atomic.Int64 // unix nanoseconds before which no sweep starts
	running atomic.Bool
}

// maybeSweep starts, in the background, a sweep of the markers older
// than markerAge, unless one ran in the last sweepEvery or runs now.
// Its failure is ignored: the next one deletes what it left.
func (s *Store) maybeSweep() {
	now := time.Now().UnixNano()
	if now < s.sweep.next.Load() || s.closed.Load() || !s.sweep.running.CompareAndSwap(false, true) {
		return
	}
	s.sweep.next.Store(now + int64(sweepEvery))
	go func() {
		defer s.sweep.running.Store(false)
		ctx, cancel := s.roundTripCtx(context.Background())
		defer cancel()
		if s.closed.Load() {
			return
		}
		s.pool.Exec(ctx, sqlSweep, fmt.Sprintf("%d milliseconds", markerAge.Milliseconds()))
	}()
}
