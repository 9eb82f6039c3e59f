package pgstore

import (
	"context"
	"fmt"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/store/internal/retry"
)

// migrations are the schema's versions: migrations[n-1] takes the
// database from version n-1 to n. A migration, once released, never
// changes; a new one is appended. The tables live in the schema that the
// connection's search_path names first (public by default).
var migrations = [][]string{
	// 1: the key-value table of the Store and the trail's records.
	{
		`CREATE TABLE kms_kv (
			key   BYTEA PRIMARY KEY,
			value BYTEA NOT NULL
		)`,
		`CREATE TABLE kms_trail (
			seq BIGINT PRIMARY KEY CHECK (seq > 0),
			rec BYTEA NOT NULL
		)`,
	},
	// 2: the commit markers (commit.go): a row per transaction that
	// writes, inserted by its own commit, swept after a minute.
	{
		`CREATE TABLE kms_commits (
			id BYTEA PRIMARY KEY,
			at TIMESTAMPTZ NOT NULL
		)`,
	},
}

// SchemaVersion is the version of the schema this build creates and
// knows: the number of its migrations. Open refuses a database whose
// kms_schema names a later one.
const SchemaVersion = 2

// sqlSchemaTable creates the table of applied migrations: one row per
// version, with the time it was applied.
const sqlSchemaTable = `CREATE TABLE IF NOT EXISTS kms_schema (
	version    INT PRIMARY KEY,
	applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
)`

const sqlSchemaVersion = "SELECT coalesce(max(version), 0) FROM kms_schema"

// maxMigrateAttempts bounds how often Open runs the migrations again after
// they met a concurrent Open's.
const maxMigrateAttempts = 20

// migrate brings the database's schema to SchemaVersion. The migrations
// that are missing run in one SERIALIZABLE transaction, which writes a row
// of kms_schema for each. When several processes open the database at
// once, their transactions collide (a serialization failure, or a table or
// row created by the other meanwhile): the loser rolls back, finds the
// version the winner committed, and runs whatever is still missing. A
// database already at SchemaVersion costs one query and takes no lock.
// With existing, a database without the schema is an error of kind
// NotFound, and is left as it is.
func (s *Store) migrate(ctx context.Context, existing bool) error {
	for attempt := 0; ; attempt++ {
		v, err := s.schemaVersion(ctx)
		if err != nil {
			return err
		}
		switch {
		case v == 0 && existing:
			return kms.Errorf(kms.KindNotFound, "the database holds no kmsd store (it has no kms_schema table): check the URL's database and search_path")
		case v > SchemaVersion:
			return tooNew(v)
		case v == SchemaVersion:
			return nil
		}
		err = s.applyMigrations(ctx)
		if err == nil {
			continue
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if kms.AsError(err) != nil {
			return err
		}
		if attempt+1 < maxMigrateAttempts {
			after, verr := s.schemaVersion(ctx)
			if verr == nil && after != v || isConflict(err) || collided(err) {
				if err := retry.Backoff(ctx, attempt, minBackoff, maxBackoff); err != nil {
					return err
				}
				continue
			}
		}
		if isReadOnly(err) {
			// kmsd waits for a primary (an error of kind Unavailable),
			// and migrates once the server takes writes.
			s.health.readOnly()
			need := fmt.Sprintf("its kmsd schema must be migrated from version %d to %d", v, SchemaVersion)
			if v == 0 {
				need = "it holds no kmsd schema yet"
			}
			return &kms.Error{Kind: kms.KindUnavailable, Err: s.redact(err),
				Message: readOnlyMessage + " (" + need + ", which only a primary can write)"}
		}
		return s.translate(ctx, fmt.Sprintf("migrate the database schema from version %d to %d", v, SchemaVersion), err)
	}
}

// collided reports whether err is what PostgreSQL answers a DDL statement
// that met the same statement of a concurrent transaction, committed: a
// duplicate key in its catalog, or an object that exists.
func collided(err error) bool {
	switch sqlState(err) {
	case codeUniqueKey, "42P07", "42710": // unique_violation, duplicate_table, duplicate_object
		return true
	}
	return false
}

// tooNew is the error of a database whose schema a later build migrated.
func tooNew(v int) error {
	return kms.Errorf(kms.KindInvalid,
		"the database's schema is at version %d, newer than this build knows (%d): upgrade kmsd to a release that knows version %d before opening this database",
		v, SchemaVersion, v)
}

// schemaVersion returns the database's schema version, 0 when it has no
// kms_schema table.
func (s *Store) schemaVersion(ctx context.Context) (int, error) {
	rctx, cancel := s.roundTripCtx(ctx)
	defer cancel()
	var v int
	err := s.pool.QueryRow(rctx, sqlSchemaVersion).Scan(&v)
	if sqlState(err) == codeUndefinedTable {
		return 0, nil
	}
	if err != nil {
		return 0, s.translate(ctx, "read the database schema version", err)
	}
	s.health.ok()
	return v, nil
}

// applyMigrations runs, in one SERIALIZABLE transaction, the migrations
// the database lacks. Errors are returned as the database gave them, for
// migrate to tell a collision from a failure; a schema found newer is a
// *kms.Error.
func (s *Store) applyMigrations(ctx context.Context) error {
	rctx, cancel := s.roundTripCtx(ctx)
	defer cancel()
	c, err := s.pool.Acquire(rctx)
	if err != nil {
		return err
	}
	defer func() {
		if !c.Conn().IsClosed() && c.Conn().PgConn().TxStatus() != 'I' {
			rb, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
			c.Exec(rb, sqlRollback)
			cancel()
		}
		c.Release()
	}()
	if _, err := c.Exec(rctx, sqlBeginUpdate); err != nil {
		return beginFailed(err)
	}
	if _, err := c.Exec(rctx, sqlSchemaTable); err != nil {
		return err
	}
	var v int
	if err := c.QueryRow(rctx, sqlSchemaVersion).Scan(&v); err != nil {
		return err
	}
	if v > SchemaVersion {
		return tooNew(v)
	}
	for n := v + 1; n <= SchemaVersion; n++ {
		for _, q := range migrations[n-1] {
			if _, err := c.Exec(rctx, q); err != nil {
				return fmt.Errorf("migration %d: %w", n, err)
			}
		}
		if _, err := c.Exec(rctx, "INSERT INTO kms_schema (version) VALUES ($1)", n); err != nil {
			return err
		}
	}
	_, err = c.Exec(rctx, sqlCommit)
	return err
}
