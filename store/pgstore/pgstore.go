package pgstore

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/store/internal/retry"
)

var (
	_ kms.Store = (*Store)(nil)
	_ kms.Trail = (*Trail)(nil)
)

// Limits of what the Store keeps.
const (
	// MaxKeySize is the longest key Set and Delete accept; longer ones are
	// an error of kind TooLarge. Keys live in a B-tree index, whose entries
	// PostgreSQL caps at about a third of a page (2704 bytes with 8 KiB
	// pages); 2048 leaves room for its tuple header.
	MaxKeySize = 2048

	// MaxValueSize is the largest value Set accepts; larger ones are an
	// error of kind TooLarge. (A BYTEA holds up to 1 GiB, but a value is
	// sent, and held in the server's memory, whole.)
	MaxValueSize = 64 << 20

	// MaxRecordSize is the largest trail record Append accepts, the same
	// as store/filetrail's.
	MaxRecordSize = 16 << 20
)

// Defaults of Options.
const (
	// DefaultMaxConns is Options.MaxConns when it is zero and the URL
	// sets no pool_max_conns.
	DefaultMaxConns = 10

	// DefaultQueryTimeout is Options.QueryTimeout when it is zero.
	DefaultQueryTimeout = 5 * time.Second

	// minConns is the smallest pool that serves kms.Store's contract: a
	// View held open across an Update (as the kms journal holds one, to
	// undo the Update) holds one connection while the Update needs
	// another.
	minConns = 2
)

// Retry policy of Update. After a conflict, Update waits a random duration
// in [d/2, d), where d starts at minBackoff and doubles up to maxBackoff,
// then runs the function again; it gives up after maxAttempts attempts. A
// transaction whose connection broke before its commit was sent is run
// again on a new connection, at most maxReconnects times.
const (
	maxAttempts   = 50
	maxReconnects = 2
	minBackoff    = 200 * time.Microsecond
	maxBackoff    = 25 * time.Millisecond
)

// Writable's bounds: an answer is kept for writableTTL; a ping waits at
// most pingTimeout; after a write meets a full disk, Writable answers
// NoSpace for noSpaceHold, and then lets the next write try.
const (
	writableTTL = 250 * time.Millisecond
	pingTimeout = time.Second
	noSpaceHold = time.Second
)

// rollbackTimeout bounds the ROLLBACK that ends a transaction, which runs
// even when the caller's context is done.
const rollbackTimeout = 5 * time.Second

// Options are the Store's settings beside those of the URL.
type Options struct {
	// MaxConns is the most connections the Store keeps open to the
	// database. Every transaction holds one while it runs, and so does
	// each page of a scan of the trail; the kms Service's writer holds
	// two at once (a snapshot and its write). Zero means the URL's
	// pool_max_conns when it has one, and DefaultMaxConns (10) otherwise.
	// A pool of fewer than 2, or a negative MaxConns, is an error of kind
	// Invalid.
	MaxConns int32

	// QueryTimeout bounds each round trip to the database (a statement,
	// or the statements sent together in one batch) and the wait for a
	// connection: past it, the connection is closed and the call fails
	// with an error of kind Unavailable (for a commit, once its outcome
	// is settled: see the package documentation, Commits in doubt). A
	// caller's context with an earlier deadline wins. It also bounds what
	// the Store holds in the database when its connection goes silent:
	// the server ends a session idle in a transaction after half of it,
	// which lets go of its locks, a wait for a lock after three quarters
	// of it, and a statement after twice it (bounds.go). Zero means
	// DefaultQueryTimeout (5 s); negative, no bound beyond the caller's
	// context, and none asked of the server.
	QueryTimeout time.Duration

	// Exclusive makes Open take the database for this Store alone: while
	// it is open, no other Store, Exclusive or not, in this process or
	// another, opens on the database, and it does not open while another
	// is open; Open then answers an error of kind Conflict. kmsd migrate
	// sets it while it fills a database, and kmsd rekey while it reseals
	// it. The lock is a PostgreSQL session advisory lock, which every
	// other Store holds in shared mode (hold.go), on a connection of its
	// own outside the pool; it is let go by Close, or by the server when
	// that connection is lost. (CockroachDB has no advisory locks.)
	Exclusive bool

	// Existing makes Open refuse, with an error of kind NotFound and
	// without writing anything, a database that kmsd never opened (one
	// without its schema), instead of creating the schema there. Commands
	// that read or change a store kept elsewhere (kmsd verify-audit, audit
	// export, rekey, rotate-signing-key) set it, so that a mistyped URL is
	// an error rather than an empty store that passes every check.
	Existing bool
}

// exclusiveLock is the key of the advisory lock of the hold (hold.go).
const exclusiveLock = 0x72696e676b6d73 // "ringkms"

// Store is a kms.Store on a PostgreSQL database. It is safe for concurrent
// use.
type Store struct {
	pool     *pgxpool.Pool
	trail    *Trail
	password string        // the URL's, masked in error texts
	timeout  time.Duration // per round trip; 0: none
	health   health
	closed   atomic.Bool
	hold     hold    // the advisory lock, shared or with Options.Exclusive (hold.go)
	watch    watch   // what Watch asked for (watch.go)
	sweep    sweeper // of old commit markers (commit.go)

	// life ends when the Store is closed: it bounds what outlives a
	// caller's context, the settling of a commit in doubt (commit.go).
	life    context.Context
	endLife context.CancelFunc
}

// Open connects to the database that url names (a postgres:// URL or a
// key=value connection string; what it leaves out, such as the password
// or TLS settings, comes from the PG* environment variables, as libpq
// reads them), creates or migrates its tables (see the package
// documentation), and returns the Store. ctx bounds the opening only.
//
// A URL that cannot be parsed or a pool of fewer than 2 connections is an
// error of kind Invalid, and so is a database whose schema is newer than
// this build knows; a database that cannot be reached is kind
// Unavailable.
func Open(ctx context.Context, dbURL string, opts Options) (*Store, error) {
	if opts.MaxConns < 0 {
		return nil, kms.Errorf(kms.KindInvalid, "MaxConns is %d; it must not be negative", opts.MaxConns)
	}
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		cause := parseError(dbURL, err)
		return nil, &kms.Error{Kind: kms.KindInvalid, Message: "invalid database URL: " + cause.Error(), Err: cause}
	}
	switch {
	case opts.MaxConns > 0:
		cfg.MaxConns = opts.MaxConns
	case !setsMaxConns(dbURL):
		cfg.MaxConns = DefaultMaxConns
	}
	if cfg.MaxConns < minConns {
		return nil, kms.Errorf(kms.KindInvalid, "a pool of %d connections is too small: a View held open across an Update needs %d", cfg.MaxConns, minConns)
	}
	rp := cfg.ConnConfig.RuntimeParams
	// Commits must be durable: the server's default (on) unless the URL
	// names a setting that is durable too (local, remote_write,
	// remote_apply).
	if v, ok := rp["synchronous_commit"]; !ok || strings.EqualFold(v, "off") {
		rp["synchronous_commit"] = "on"
	}
	if _, ok := rp["application_name"]; !ok {
		rp["application_name"] = "ringkms"
	}
	s := &Store{password: cfg.ConnConfig.Password}
	s.life, s.endLife = context.WithCancel(context.Background())
	s.health.unproven.Store(true) // until a ping finds the server taking writes
	s.watch.token = newToken()
	switch {
	case opts.QueryTimeout == 0:
		s.timeout = DefaultQueryTimeout
	case opts.QueryTimeout > 0:
		s.timeout = opts.QueryTimeout
	}
	sessionBounds(&cfg.ConnConfig.Config, s.timeout)
	s.pool, err = pgxpool.NewWithConfig(context.WithoutCancel(ctx), cfg)
	if err != nil {
		s.endLife()
		return nil, s.translate(ctx, "open database", err)
	}
	if err = s.takeHold(ctx, cfg.ConnConfig, opts.Exclusive); err != nil {
		s.endLife()
		s.pool.Close()
		return nil, err
	}
	if err := s.migrate(ctx, opts.Existing); err != nil {
		s.Close()
		return nil, err
	}
	if s.trail, err = openTrail(ctx, s); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// setsMaxConns reports whether the connection string sets pool_max_conns.
func setsMaxConns(connString string) bool {
	c, err := pgx.ParseConfig(connString)
	if err != nil {
		return false
	}
	_, ok := c.RuntimeParams["pool_max_conns"]
	return ok
}

// parseError is the cause of a connection string that does not parse,
// with its password masked: pgx masks what it recognises, and this the
// password between "://user:" and "@", even in a URL that net/url
// refuses.
func parseError(connString string, err error) error {
	i := strings.Index(connString, "://")
	if i < 0 {
		return err
	}
	rest := connString[i+3:]
	at := strings.LastIndex(rest[:strings.IndexAny(rest+"/", "/?")], "@")
	if at < 0 {
		return err
	}
	_, pw, ok := strings.Cut(rest[:at], ":")
	if !ok || pw == "" {
		return err
	}
	r := &redacted{err: err, secrets: []string{pw}}
	if p, uerr := url.PathUnescape(pw); uerr == nil && p != pw {
		r.secrets = append(r.secrets, p)
	}
	return r
}

// Trail returns the Store's activity trail, a table in the same database.
func (s *Store) Trail() kms.Trail { return s.trail }

// Close closes every connection. Call it after every transaction has
// returned; a commit being settled (see the package documentation,
// Commits in doubt) is the exception: Close ends the settling, and the
// call returns an error saying that its outcome is unknown.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.endLife()
	s.pool.Close()
	s.releaseHold()
	return nil
}

// Bound is how long a transaction takes at most while the database
// answers: twice QueryTimeout (a lock waited for, then the commit), or 0
// without a QueryTimeout. A write of the kms Service that takes longer has
// met a silent database, or is settling a commit in doubt; the Service
// answers the writes queued behind it as unavailable meanwhile.
func (s *Store) Bound() time.Duration { return 2 * s.timeout }

// roundTripCtx returns the context of one round trip: ctx, bounded by the
// Store's QueryTimeout.
func (s *Store) roundTripCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if s.timeout <= 0 {
		return ctx, func() {}
	}
	if d, ok := ctx.Deadline(); ok && time.Until(d) <= s.timeout {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, s.timeout)
}

// health is what Writable knows of the database: when it last answered,
// when a connection to it was last lost, whether a write met a full disk,
// and whether it must be asked again whether it takes writes.
type health struct {
	okAt      atomic.Int64 // unix nanoseconds of the last answer from the database
	silentAt  atomic.Int64 // unix nanoseconds of the last round trip that met its own timeout
	lostAt    atomic.Int64 // unix nanoseconds of the last connection found lost
	fullUntil atomic.Int64 // Writable answers NoSpace until then (unix nanoseconds)

	// unproven is set at Open, when a connection is lost and when a write
	// met a read-only server, and cleared by a ping that found the server
	// taking writes. While it is set, an answer of the database does not
	// count for Writable: a standby answers reads, and the server behind
	// a lost connection may come back as one.
	unproven atomic.Bool

	mu      sync.Mutex // one ping at a time; guards pingErr and pingAt
	pingErr error
	pingAt  int64
}

func (h *health) ok() { h.okAt.Store(time.Now().UnixNano()) }
func (h *health) lost() {
	h.unproven.Store(true)
	h.lostAt.Store(time.Now().UnixNano())
}

// silence records that a round trip met its own timeout: the database,
// or the network to it, stopped answering.
func (h *health) silence() { h.silentAt.Store(time.Now().UnixNano()) }

// silent reports whether a round trip met its own timeout less than
// timeout ago, and the database has not answered since: Update and View
// then fail at once rather than wait out the timeout again on another
// connection (Writable's ping asks, and an answer ends it).
func (h *health) silent(timeout time.Duration) bool {
	at := h.silentAt.Load()
	return timeout > 0 && at > h.okAt.Load() && time.Now().UnixNano()-at < int64(timeout)
}

var errSilent = kms.Errorf(kms.KindUnavailable, "service unavailable: the database does not answer")

func (h *health) noSpace() {
	h.fullUntil.Store(time.Now().Add(noSpaceHold).UnixNano())
}

// readOnly records that the database refused a write as a read-only
// server: Writable asks it again, and until it answers that it takes
// writes, says Unavailable.
func (h *health) readOnly() {
	h.unproven.Store(true)
	h.lostAt.Store(time.Now().UnixNano())
}

// fresh reports whether the database answered within writableTTL, no
// connection was lost since, and it is known to take writes.
func (h *health) fresh(now int64) bool {
	ok := h.okAt.Load()
	return ok > h.lostAt.Load() && now-ok < int64(writableTTL) && !h.unproven.Load()
}

var errDiskFull = kms.Errorf(kms.KindNoSpace, "insufficient storage: the database's disk is full")

// Writable reports whether the database takes writes now: nil, or an
// error of kind Unavailable when it cannot be reached or does not take
// writes (a hot standby, a primary demoted or made read-only), or of kind NoSpace for a
// second after a write met a full disk (SQLSTATE 53100; PostgreSQL has no
// way to ask for free space without writing). It writes nothing.
//
// Its answer is at most 250 ms old: any exchange with the database in
// that time counts as an answer (so under load Writable reads the clock
// and four atomic values), and otherwise it asks, with one query that
// waits at most a second (then the answer is Unavailable). Concurrent
// callers share one query, and a failed answer is kept for 250 ms too.
// After Open, a lost connection or a write refused as read-only, only
// that query counts: it asks whether the server is read-only (SHOW
// transaction_read_only, on for a standby and for a database made
// read-only), and a read-only server keeps Writable answering
// Unavailable, asked again every 250 ms, until it is promoted.
func (s *Store) Writable(ctx context.Context) error {
	if err := s.usable(); err != nil {
		return err
	}
	now := time.Now().UnixNano()
	if now < s.health.fullUntil.Load() {
		return errDiskFull
	}
	if s.health.fresh(now) {
		return nil
	}
	return s.ping(ctx)
}

// ping asks the database whether it takes writes, unless another caller
// did in the last writableTTL.
func (s *Store) ping(ctx context.Context) error {
	h := &s.health
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now().UnixNano()
	if h.fresh(now) {
		return nil
	}
	if h.pingErr != nil && now-h.pingAt < int64(writableTTL) {
		return h.pingErr
	}
	pctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	var readOnly string
	err := s.pool.QueryRow(pctx, "SHOW transaction_read_only").Scan(&readOnly)
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case err != nil:
		err = s.translate(ctx, "ask the database whether it takes writes", err)
		if kms.ErrorKind(err) == kms.KindInternal {
			// An answer we did not expect is no proof that the
			// database can be written to either.
			err = &kms.Error{Kind: kms.KindUnavailable, Message: "service unavailable: the database does not answer as expected", Err: err}
		}
	case readOnly == "on":
		err = kms.Errorf(kms.KindUnavailable, readOnlyMessage)
	default:
		h.pingErr = nil
		h.unproven.Store(false)
		h.ok()
		return nil
	}
	h.pingErr, h.pingAt = err, time.Now().UnixNano()
	return err
}

// View runs fn in a read-only REPEATABLE READ transaction: one snapshot of
// the database, taken before fn is called. It returns ctx.Err() without
// running fn if ctx is already done, and fn's error unchanged. Writes in
// fn fail with an error of kind Invalid. While the database is silent (a
// round trip met its own timeout and nothing answered since), it fails at
// once with kind Unavailable, as Update does, rather than wait out the
// timeout again: a call that reads several times would otherwise wait it
// out for each read.
func (s *Store) View(ctx context.Context, fn func(kms.Txn) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.closed.Load() {
		return errClosed
	}
	if s.health.silent(s.timeout) {
		return errSilent
	}
	t := s.newTxn(ctx, false, true)
	defer t.release()
	// The snapshot is taken now, not at fn's first read: a caller may
	// hold a View open across an Update and read, after it, what the
	// store held before (the kms journal's undo does).
	if err := t.roundTrip(func(*pgx.Batch) {}, nil); err != nil {
		return err
	}
	err := fn(t)
	t.ended = true
	return err
}

// Update runs fn in a SERIALIZABLE transaction and commits it durably
// (synchronous_commit on). A serialization failure or deadlock (SQLSTATE
// 40001, 40P01), whether in one of fn's reads or at the commit, runs fn
// again in a fresh transaction, after a jittered backoff, up to 50
// attempts; a connection lost before the commit was sent, on a new
// connection, up to twice. fn must therefore have no effect outside the
// transaction. It returns:
//
//   - nil once a commit succeeded;
//   - fn's error unchanged, with nothing written, if fn fails;
//   - ctx.Err() if ctx is done before or during an attempt;
//   - an error of kind Conflict if every attempt conflicted;
//   - nil too when the connection broke after the commit was sent but
//     its marker shows that it took place (see the package
//     documentation, Commits in doubt);
//   - an error of kind Unavailable if the database could not be reached,
//     or the connection broke during the commit and it did not take place
//     (or, when that could not be found out because the database stayed
//     out of reach for two minutes or the Store was closed meanwhile, an
//     error that says the outcome is unknown);
//   - an error of kind TooLarge, NoSpace or Internal if the commit failed
//     otherwise (see the package documentation).
func (s *Store) Update(ctx context.Context, fn func(kms.Txn) error) error {
	return s.update(ctx, func(t *txn) error { return fn(t) }, true, false)
}

// UpdateNoSync is Update with synchronous_commit off for its transaction:
// it returns once the commit is visible, before its WAL record is flushed.
// A crash of the database server may lose it, whole, and never in part; a
// crash of the process cannot.
func (s *Store) UpdateNoSync(ctx context.Context, fn func(kms.Txn) error) error {
	return s.update(ctx, func(t *txn) error { return fn(t) }, false, false)
}

// outcome is what an attempt of Update asks for next.
type outcome int

const (
	done      outcome = iota // return the attempt's error
	conflict                 // run fn again after a backoff
	reconnect                // the connection broke before the commit: run fn again
)

// update runs fn in transactions until one commits, as Update; with
// appendLock, each under the append lock (Trail.AppendIn).
func (s *Store) update(ctx context.Context, fn func(*txn) error, sync, appendLock bool) error {
	reconnects := 0
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := s.writable(); err != nil {
			return err
		}
		next, err := s.attempt(ctx, fn, sync, appendLock)
		switch next {
		case done:
			return err
		case conflict:
			if attempt+1 >= maxAttempts {
				return &kms.Error{Kind: kms.KindConflict, Message: fmt.Sprintf("transaction conflict: gave up after %d attempts", maxAttempts), Err: err}
			}
		case reconnect:
			if reconnects++; reconnects > maxReconnects {
				return err
			}
			// What broke one connection (a network cut, a restarted
			// server) broke the idle ones too, which would each fail
			// a run in turn: the next run starts on a new connection.
			s.pool.Reset()
		}
		if err := retry.Backoff(ctx, attempt, minBackoff, maxBackoff); err != nil {
			return err
		}
	}
}

// attempt runs fn once in a fresh transaction and commits it.
func (s *Store) attempt(ctx context.Context, fn func(*txn) error, sync, appendLock bool) (outcome, error) {
	t := s.newTxn(ctx, true, sync)
	t.appendLock = appendLock
	defer t.release()
	err := fn(t)
	t.ended = true
	if t.failed != nil {
		// A statement failed, so the transaction is over whatever fn
		// made of the error.
		switch {
		case ctx.Err() != nil:
			return done, ctx.Err()
		case isConflict(t.failed):
			return conflict, t.failedErr
		case isLostConnection(t.failed):
			return reconnect, t.failedErr
		case err != nil:
			return done, err
		default:
			return done, t.failedErr
		}
	}
	if err != nil {
		return done, err
	}
	if err := t.commit(); err != nil {
		if t.conn != nil && t.inDoubt(t.conn.Conn().IsClosed()) {
			// The COMMIT may have reached the server: find out before
			// answering, on another connection (this one goes back
			// first, for a pool of two).
			t.release()
			if err := s.settle(ctx, t.marker, t.pid, t.failed); err != nil {
				if ctx.Err() != nil {
					return done, ctx.Err()
				}
				return done, err
			}
			return done, nil
		}
		switch {
		case ctx.Err() != nil:
			return done, ctx.Err()
		case isConflict(t.failed):
			return conflict, err
		case len(t.trailRecs) > 0 && sqlState(t.failed) == codeUniqueKey:
			// Another transaction appended the same seqs first (one that
			// took no append lock: see Trail.AppendIn); run fn again
			// after it.
			return conflict, err
		case isLostConnection(t.failed) && pgconn.SafeToRetry(t.failed):
			return reconnect, err
		}
		return done, err
	}
	if t.marker != nil {
		s.maybeSweep()
	}
	return done, nil
}
