// Package pgstore implements kms.Store and kms.Trail on PostgreSQL, through
// pgx and a pool of connections.
//
//	st, err := pgstore.Open(ctx, "postgres://kms@db.example/kms?sslmode=verify-full", pgstore.Options{})
//	...
//	defer st.Close()
//
// The URL (or key=value connection string) says where and how to connect;
// what it leaves out, the password and TLS settings among them, comes from
// the PG* environment variables and files libpq reads (PGPASSWORD,
// PGSSLMODE, ~/.pgpass...). Its pool_* parameters configure the pool;
// Options.MaxConns, when set, wins over pool_max_conns. The pool needs at
// least 2 connections, since a View held open across an Update (as the
// kms journal holds one) takes one while the Update takes another.
//
// # Tables
//
// The Store keeps four tables, in the first schema of the connection's
// search_path:
//
//	kms_schema  (version INT PRIMARY KEY, applied_at TIMESTAMPTZ)  the migrations applied
//	kms_kv      (key BYTEA PRIMARY KEY, value BYTEA NOT NULL)      the Store's keys and values
//	kms_trail   (seq BIGINT PRIMARY KEY, rec BYTEA NOT NULL)       the Trail's records
//	kms_commits (id BYTEA PRIMARY KEY, at TIMESTAMPTZ NOT NULL)    commit markers (see Commits in doubt)
//
// BYTEA compares bytewise, so ORDER BY key is the byte order kms.Store
// requires. Keys are at most MaxKeySize (2048) bytes and values at most
// MaxValueSize (64 MiB); longer ones are refused with kind TooLarge before
// anything is sent. Empty keys are refused with kind Invalid.
//
// # Schema and migrations
//
// Open brings the schema to SchemaVersion: it reads the highest version in
// kms_schema and runs the migrations after it, all in one SERIALIZABLE
// transaction that also records each in kms_schema. Several processes may
// open one database at once: their transactions collide (a serialization
// failure, or a table or row that the other created first), the losers
// roll back and start again from the version the winner committed, so each
// migration runs once. A database whose kms_schema names a version later
// than this build knows is refused with an error of kind Invalid that asks
// for a newer kmsd; nothing is written to it. Opening a database that is
// up to date costs one query and takes no lock.
//
// # Transactions
//
// View is a read-only REPEATABLE READ transaction: one snapshot, taken
// when View begins. Update is a SERIALIZABLE transaction. Its writes are
// kept in memory and sent with its COMMIT, in one round trip (sooner only
// when a Scan of their range needs the database to see them, and Get
// answers from them directly), so a transaction that only writes costs
// one round trip, and holds row locks only while it commits. Get, Set,
// Delete and Scan see the transaction's own writes. Scan reads its range
// in pages of 256 rows (or about 1 MiB), one keyset query each (key > the
// last key seen, ORDER BY key), never the whole range, and checks the
// context between items; the slices it passes are valid only during the
// call.
//
// # Durability
//
// When Update or Append returns nil, the commit's WAL record has been
// flushed: the Store connects with synchronous_commit on (the URL may name
// local, remote_write or remote_apply instead; off is overridden), so the
// writes survive a crash of the database server, and with synchronous
// standbys configured, its loss. UpdateNoSync sets synchronous_commit off
// for its own transaction: it returns once the commit is visible, and a
// crash of the server may lose it whole, never in part; a crash of the
// process cannot.
//
// # Conflicts
//
// A serialization failure or a deadlock (SQLSTATE 40001, 40P01), met by a
// read in fn or by the commit, is retried in one place, Update, with a
// jittered backoff, up to 50 attempts; fn may therefore run more than
// once. When every attempt conflicts, Update returns an error of kind
// Conflict. PostgreSQL's SERIALIZABLE alone would commit a transaction
// whose reads another one changed meanwhile if it can order it first; the
// commit also locks (FOR SHARE) the rows Get read, which fails for a row
// changed since the transaction's snapshot, so that, as with Badger, a
// transaction commits only if what it read with Get is still current.
// Keys read by Scan are left to SERIALIZABLE's own checks. A connection
// lost before the commit was sent runs fn again on a new one, at most
// twice.
//
// # Errors
//
// No pgx error leaves this package as it is; each is translated at the
// boundary into a *kms.Error, with the cause in its Err field for the log
// (and any password of the URL masked in its text):
//
//   - a missing key is kind NotFound (errors.Is(err, kms.ErrNotFound));
//   - a key or value over the limits above, or anything the database
//     refuses as too large (SQLSTATE class 54, such as 54000), is kind
//     TooLarge;
//   - a full disk on the database server (53100) is kind NoSpace, and
//     Writable answers NoSpace for a second after it;
//   - a database that cannot be reached, a connection lost (refused,
//     reset, timed out, the server shutting down), or a database that does
//     not take writes is kind Unavailable: kmsd answers 503, never a wrong
//     answer. A connection lost during a commit is settled first (see
//     Commits in doubt): nil if it committed, kind Unavailable saying
//     nothing was written if not. A read-only server (a hot
//     standby, which refuses a write with SQLSTATE 25006 and a
//     SERIALIZABLE transaction with 0A000; a primary demoted, or made
//     read-only with default_transaction_read_only) is told by its
//     message: the database is read-only, and kmsd waits for a primary;
//   - a write in a read-only transaction, an empty key, a Txn used after
//     its function returned, and a scan whose Start lies outside its
//     Prefix are kind Invalid;
//   - every conflict that outlasts the retries is kind Conflict;
//   - anything else is kind Internal.
//
// Errors returned by the function passed to View or Update are returned
// unchanged, and so are context errors (context.Canceled,
// context.DeadlineExceeded). Each round trip is bounded by
// Options.QueryTimeout (5 s by default); past it the connection is closed
// and the call fails with kind Unavailable, and so does every Update
// after it, at once, until the database answers again (Writable asks) or
// QueryTimeout has passed. A wait for a lock past lock_timeout (3/4 of
// QueryTimeout unless the URL sets it), a statement past
// statement_timeout, and a session the server ended (idle in a
// transaction past half of QueryTimeout) are kind Unavailable too; see
// bounds.go for what the server is asked to let go of, and when.
//
// # Commits in doubt
//
// Each transaction of Update, UpdateNoSync and Trail.AppendIn that writes
// inserts, with its COMMIT, a marker: a row of kms_commits with a random
// 16-byte id. When the connection breaks after the COMMIT may have been
// sent, the call settles the outcome before it returns, on another
// connection: it asks the backend that ran the transaction to terminate
// (pg_terminate_backend, for a session of the same user and database),
// waits until pg_stat_activity no longer lists it (a backend leaves it
// only once its transaction has committed or rolled back, so it can no
// longer commit), and then looks the marker up. Both count only on a
// server that takes writes: a connection that reaches a standby (which
// lists none of the primary's sessions, and may not have replayed the
// commit yet) is closed, and the call tries again. Found, the call returns
// nil, once one more write has committed after it (its commit waits for
// the synchronous standbys, so the transaction is on them too); not found,
// an error of kind Unavailable saying nothing was written. While the
// database cannot be reached (a failover, a partition), the call waits and
// tries again, each try bounded by QueryTimeout, for up to two minutes;
// only past that, or when the Store is closed meanwhile, does the outcome
// stay unknown, and the error (kind Unavailable) says so and names the
// marker's id, which an operator can look up in
// kms_commits while the marker is kept. A commit that succeeds starts, at
// most every 15 s, a sweep that deletes the markers older than five minutes,
// in a transaction of its own. Trail.Append (not used by kmsd on this
// Store) settles its own doubt, as described below.
//
// # Writable
//
// Writable is asked before every batch of writes, so it is cheap: any
// answer from the database in the last 250 ms counts, and otherwise one
// query (SHOW transaction_read_only), bounded by a second and shared by
// concurrent callers, asks. After Open, a lost connection or a write
// refused as read-only, only that query counts (a standby answers
// reads): Writable answers Unavailable, saying the database is
// read-only, until the server says it takes writes.
//
// # Activity trail
//
// The Trail is the table kms_trail. Append inserts its records as
// Len()+1... with one INSERT ... SELECT FROM unnest(...) statement, its own
// transaction, committed durably in one round trip (a batch of more than
// 32 MiB is sent as several statements in one transaction). Len is kept in
// memory, read at Open and advanced by Append. Check reports, with kind
// Unprocessable, the first record missing when record 1 or record want is
// not in the table; Scan reads in keyset pages up to the Len at its start,
// and reports a record missing from the table (a gap) the same way. An
// Append whose connection broke after it was sent may have committed: the
// next Append removes those records if they are there, exactly as sent
// (they were never acknowledged), and refuses, with kind Conflict, to
// write after records it did not append.
//
// # What is left for a cluster
//
// This package assumes, for now, that one process writes to the database,
// as kmsd's journal does over Badger:
//
//   - the Trail has one appender: Len is kept in memory, Append numbers the
//     records itself, and a seq that exists already is an error of kind
//     Conflict. Several appenders will take the next seq in Append's
//     transaction and read Len from the table;
//   - an Append in doubt is settled by removing its records, which only
//     the one appender may do;
//   - nothing tells other processes that a key changed: a cluster adds
//     PostgreSQL LISTEN/NOTIFY for the caches of the kms Service, with a
//     bound on each entry's age as a safety net.
//
// Every open Store holds an advisory lock in shared mode, and an
// Exclusive one (kmsd rekey and migrate) holds it exclusively, so that
// neither opens while the other has the database (hold.go).
//
// The SQL avoids what CockroachDB and YugabyteDB lack (advisory locks,
// PL/pgSQL, LISTEN); where it cannot, docs/OPERATIONS.md says so.
package pgstore
