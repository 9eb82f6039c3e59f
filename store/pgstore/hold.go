package pgstore

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ringkms/kms"
)

// The hold: every Store holds the advisory lock exclusiveLock, on a
// connection of its own, for as long as it is open: in shared mode, or
// exclusively with Options.Exclusive. So kmsd rekey (Exclusive) cannot
// start while a kmsd node has the database open, nor a node while rekey or
// migrate runs: a node that went on writing with the old master key after
// a rekey would seal what it writes under a key that opens nothing any
// more.
//
// The connection that holds the lock is the one Watch LISTENs on. When it
// is lost, the server lets the lock go, and Watch takes it again with the
// new connection; if another Store has taken the database meanwhile, the
// Store is displaced: every write fails from then on, since what the
// other did (a rekey, a migration) is not undone by its end. When Watch
// stops (its Service is closing), the lock goes with its connection,
// before Close.
type hold struct {
	mu        sync.Mutex
	conn      *pgx.Conn // taken at Open, until Watch takes it over
	exclusive bool      // Options.Exclusive

	displaced atomic.Bool
}

// errDisplaced is the error of a write by a displaced Store.
var errDisplaced = &kms.Error{Kind: kms.KindUnavailable,
	Message: "service unavailable: kmsd rekey or migrate took this database while this process's connection to it was lost; restart kmsd (with the master key the store has now)"}

// The statements that try to take the hold's lock, shared or exclusive.
const (
	sqlHoldShared    = "SELECT pg_try_advisory_lock_shared($1)"
	sqlHoldExclusive = "SELECT pg_try_advisory_lock($1)"
)

// holdGrace is how long takeHold tries again for a lock that another
// Store holds: a Store that has just closed lets go of its lock at once
// when it can, but when its connection was closed under it (its Watch
// stopped in the middle of a wait), the server lets the lock go only once
// its process has seen the session end, a moment later. So a node started
// right after kmsd rekey, or a rekey right after the nodes stopped, finds
// the database free rather than refused.
const holdGrace = 3 * time.Second

// takeHold connects and takes the hold's lock, exclusively or not, or
// fails with an error of kind Conflict when another Store has the
// database in a way that excludes it for longer than holdGrace.
func (s *Store) takeHold(ctx context.Context, cc *pgx.ConnConfig, exclusive bool) error {
	s.hold.exclusive = exclusive
	giveUp := time.Now().Add(holdGrace)
	for {
		conn, got, err := s.connectHeld(ctx, cc)
		if err != nil {
			return err
		}
		if got {
			s.hold.conn = conn
			return nil
		}
		conn.Close(context.Background())
		if time.Now().After(giveUp) || !sleepCtx(ctx, holdRetry) {
			break
		}
	}
	if exclusive {
		return kms.Errorf(kms.KindConflict, "another process has this database open (a kmsd node, or kmsd rekey or migrate): stop it first")
	}
	return kms.Errorf(kms.KindConflict, "kmsd rekey or migrate holds this database: start once it is done")
}

// holdRetry is the wait between two tries of takeHold.
const holdRetry = 100 * time.Millisecond

// sleepCtx waits d, and reports false when ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// connectHeld connects and tries to take the hold's lock in the Store's
// mode, reporting whether it did.
func (s *Store) connectHeld(ctx context.Context, cc *pgx.ConnConfig) (*pgx.Conn, bool, error) {
	rctx, cancel := s.roundTripCtx(ctx)
	defer cancel()
	conn, err := pgx.ConnectConfig(rctx, cc.Copy())
	if err != nil {
		return nil, false, s.translate(ctx, "connect to take the store's lock", err)
	}
	q := sqlHoldShared
	if s.hold.exclusive {
		q = sqlHoldExclusive
	}
	var got bool
	if err := conn.QueryRow(rctx, q, int64(exclusiveLock)).Scan(&got); err != nil {
		conn.Close(context.Background())
		return nil, false, s.translate(ctx, "take the store's lock", err)
	}
	return conn, got, nil
}

// holdConn returns a connection for Watch to LISTEN on: the one Open took
// the hold with, the first time; then a new one, on which it takes the
// hold again, marking the Store displaced when it cannot.
func (s *Store) holdConn(ctx context.Context) (*pgx.Conn, error) {
	s.hold.mu.Lock()
	conn := s.hold.conn
	s.hold.conn = nil
	s.hold.mu.Unlock()
	if conn != nil {
		return conn, nil
	}
	conn, got, err := s.connectHeld(ctx, s.pool.Config().ConnConfig)
	if err != nil {
		return nil, err
	}
	if !got {
		s.hold.displaced.Store(true)
	}
	return conn, nil
}

// releaseHold closes the hold's connection if Watch never took it.
func (s *Store) releaseHold() {
	s.hold.mu.Lock()
	conn := s.hold.conn
	s.hold.conn = nil
	s.hold.mu.Unlock()
	if conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), rollbackTimeout)
		defer cancel()
		closeHold(ctx, conn)
	}
}

// closeHold lets go of the advisory locks conn holds, then closes it. The
// server would let them go with the session, but only once its process
// has seen the connection close: letting go first means that a kmsd
// rekey started as soon as kmsd has stopped finds the database free.
func closeHold(ctx context.Context, conn *pgx.Conn) {
	if !conn.IsClosed() {
		conn.Exec(ctx, "SELECT pg_advisory_unlock_all()") // on failure, the server lets go with the session
	}
	conn.Close(ctx)
}

// writable returns the error of a write now: the Store closed, or
// displaced, or a round trip met silence and nothing answered since
// (health.silent).
func (s *Store) writable() error {
	if err := s.usable(); err != nil {
		return err
	}
	if s.health.silent(s.timeout) {
		return errSilent
	}
	return nil
}

// usable is writable without the check of silence: Writable asks the
// database instead.
func (s *Store) usable() error {
	switch {
	case s.closed.Load():
		return errClosed
	case s.hold.displaced.Load():
		return errDisplaced
	}
	return nil
}
