package pgstore

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/store/internal/keyrange"
)

// The statements of a transaction. Keys are BYTEA, which PostgreSQL (and
// CockroachDB) order bytewise, as kms.Store requires.
const (
	sqlBeginUpdate = "BEGIN ISOLATION LEVEL SERIALIZABLE"
	sqlBeginView   = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
	sqlSnapshot    = "SELECT 1" // the first query of a transaction takes its snapshot
	sqlNoSync      = "SET LOCAL synchronous_commit = off"
	sqlCommit      = "COMMIT"
	sqlRollback    = "ROLLBACK"
	sqlGet         = "SELECT value FROM kms_kv WHERE key = $1"
	sqlGetMany     = "SELECT key, value FROM kms_kv WHERE key = ANY($1::BYTEA[])"
	sqlUpsert      = "INSERT INTO kms_kv (key, value) SELECT k, v FROM unnest($1::BYTEA[], $2::BYTEA[]) AS w (k, v) ON CONFLICT (key) DO UPDATE SET value = excluded.value"
	sqlDelete      = "DELETE FROM kms_kv WHERE key = ANY($1::BYTEA[])"
	// Locking a row that another transaction changed after this one's
	// snapshot fails with a serialization failure, even in PostgreSQL's
	// SERIALIZABLE, which would otherwise commit a transaction whose
	// reads went stale, ordering it before the other.
	sqlLockReads = "SELECT key FROM kms_kv WHERE key = ANY($1::BYTEA[]) FOR SHARE"
	// The append lock (Trail.AppendIn): a session advisory lock taken
	// before BEGIN, so that the transaction's snapshot, taken after it,
	// sees the commit of the transaction that held it before: appenders
	// wait for one another rather than conflict.
	sqlAppendLock   = "SELECT pg_advisory_lock(" + appendLockKey + ")"
	sqlAppendUnlock = "SELECT pg_advisory_unlock(" + appendLockKey + ")"
)

// appendLockKey is the advisory lock key of Trail.AppendIn ("kmstrail").
const appendLockKey = "7813586475436714348"

// Sizes of what a transaction sends and reads at once.
const (
	scanRows   = 256     // rows a Scan asks for per query
	scanBytes  = 1 << 20 // a Scan's page stops growing past this many bytes
	flushRows  = 1024    // rows per statement when writes are sent
	flushBytes = 8 << 20 // bytes per statement, unless one value is larger
)

// txn is the kms.Txn of a Store. Its writes are kept in memory and sent in
// one batch with the commit, or earlier when a Scan of their range needs
// the database to see them; so a transaction that only writes costs one
// round trip, and holds no row lock until it commits. Its reads go to the
// database, which takes the snapshot of an Update at its first read, and
// that of a View when the View begins.
type txn struct {
	s      *Store
	ctx    context.Context
	update bool
	sync   bool // Update (durable commit) rather than UpdateNoSync
	ended  bool // fn has returned

	conn  *pgxpool.Conn // acquired at the first round trip
	begun bool          // the transaction's BEGIN has been sent

	// failed is the error of the statement that ended the transaction
	// (the database rolls it back), failedErr the same translated;
	// every later call returns failedErr.
	failed    error
	failedErr error

	writes map[string]write // not yet sent, by key
	wrote  bool             // Set or Delete was called
	reads  [][]byte         // keys Get read from the database, locked at commit

	// fetched holds what Prefetch read, by key: a Get of one answers
	// from it.
	fetched map[string]fetched

	// Of an AppendIn: appendLock asks for the append lock before BEGIN;
	// locked says conn holds it; trailFirst and trailRecs are the records
	// the commit inserts into the trail.
	appendLock bool
	locked     bool
	trailFirst uint64
	trailRecs  [][]byte

	announce [][]byte // written keys under a watched prefix (watch.go)

	// The commit marker (commit.go): the id of the row of kms_commits
	// that the commit of a transaction that writes inserts, the pid of
	// the backend that runs it, and whether the commit's batch was sent.
	marker     []byte
	pid        uint32
	committing bool
}

// fetched is the value of a key that Prefetch read, or its absence.
type fetched struct {
	value []byte
	found bool
}

// write is a buffered Set (del false) or Delete.
type write struct {
	value []byte
	del   bool
}

func (s *Store) newTxn(ctx context.Context, update, sync bool) *txn {
	return &txn{s: s, ctx: ctx, update: update, sync: sync}
}

// fail records err as the end of the transaction and returns it translated.
func (t *txn) fail(doing string, err error) error {
	t.failed = err
	t.failedErr = t.s.translate(t.ctx, doing, err)
	return t.failedErr
}

// acquire takes the transaction's connection from the pool, unless it
// holds one already.
func (t *txn) acquire(ctx context.Context) error {
	if t.conn != nil {
		return nil
	}
	c, err := t.s.pool.Acquire(ctx)
	if err != nil {
		return t.fail("connect to the database", err)
	}
	t.conn = c
	return nil
}

// roundTrip sends the statements that queue adds, in one batch, preceded
// by the transaction's BEGIN if it has not been sent, and reads their
// results with read (nil for none); the results read leaves are read and
// checked for errors.
func (t *txn) roundTrip(queue func(*pgx.Batch), read func(pgx.BatchResults) error) error {
	if t.failed != nil {
		return t.failedErr
	}
	rctx, cancel := t.s.roundTripCtx(t.ctx)
	defer cancel()
	if err := t.acquire(rctx); err != nil {
		return err
	}
	if t.appendLock && !t.locked {
		// In a round trip of its own: in the batch of the BEGIN, it
		// would run in the batch's implicit transaction, before it.
		if _, err := t.conn.Exec(rctx, sqlAppendLock); err != nil {
			return t.fail("take the append lock", err)
		}
		t.locked = true
	}
	b := &pgx.Batch{}
	begin := !t.begun
	if begin {
		if !t.update {
			b.Queue(sqlBeginView)
			b.Queue(sqlSnapshot)
		} else {
			b.Queue(sqlBeginUpdate)
		}
	}
	queue(b)
	br := t.conn.Conn().SendBatch(rctx, b)
	t.begun = true
	var err error
	if begin {
		if _, err = br.Exec(); err != nil && t.update {
			err = beginFailed(err)
		}
		if err == nil && !t.update {
			_, err = br.Exec()
		}
	}
	if err == nil && read != nil {
		err = read(br)
	}
	return t.finish(br, err)
}

// finish closes what a round trip read its results from and ends the
// round trip with err: an error of either fails the transaction, and
// success says the database answers.
func (t *txn) finish(results interface{ Close() error }, err error) error {
	if cerr := results.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return t.fail("query the database", err)
	}
	t.s.health.ok()
	return nil
}

// release ends the transaction, rolling it back unless it committed, and
// gives its connection back to the pool.
func (t *txn) release() {
	t.ended = true
	if t.conn == nil {
		return
	}
	c := t.conn
	t.conn = nil
	if !c.Conn().IsClosed() && (t.locked || c.Conn().PgConn().TxStatus() != 'I') {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.ctx), rollbackTimeout)
		var err error
		if c.Conn().PgConn().TxStatus() != 'I' {
			_, err = c.Exec(ctx, sqlRollback) // on failure, Release closes the connection
		}
		if err == nil && t.locked {
			_, err = c.Exec(ctx, sqlAppendUnlock)
		}
		cancel()
		if err != nil && t.locked {
			// A connection that may still hold the append lock must not
			// go back to the pool: closing it lets the lock go.
			cctx, cancel := context.WithTimeout(context.Background(), rollbackTimeout)
			c.Conn().Close(cctx)
			cancel()
		}
		t.locked = false
	}
	c.Release()
}

// Get returns a copy of the value under key, or an error of kind NotFound.
// It sees the transaction's own writes.
func (t *txn) Get(key []byte) ([]byte, error) {
	switch {
	case t.ended:
		return nil, errTxnEnded
	case t.failed != nil:
		return nil, t.failedErr
	case len(key) == 0:
		return nil, errEmptyKey
	}
	if w, ok := t.writes[string(key)]; ok {
		if w.del {
			return nil, errKeyNotFound
		}
		return append(make([]byte, 0, len(w.value)), w.value...), nil
	}
	if len(key) > MaxKeySize {
		return nil, errKeyNotFound
	}
	if f, ok := t.fetched[string(key)]; ok {
		if !f.found {
			return nil, errKeyNotFound
		}
		return append(make([]byte, 0, len(f.value)), f.value...), nil
	}
	var val []byte
	found := false
	err := t.roundTrip(func(b *pgx.Batch) { b.Queue(sqlGet, key) }, func(br pgx.BatchResults) error {
		rows, err := br.Query()
		if err != nil {
			return err
		}
		if rows.Next() {
			raw := rows.RawValues()[0]
			val = append(make([]byte, 0, len(raw)), raw...)
			found = true
		}
		rows.Close()
		return rows.Err()
	})
	switch {
	case err != nil:
		return nil, err
	case !found:
		return nil, errKeyNotFound
	}
	if t.update {
		t.reads = append(t.reads, bytes.Clone(key))
	}
	return val, nil
}

// Prefetch reads keys in one round trip (kms.Prefetcher); a later Get of
// one of them answers from what it read. As the first round trip of an
// AppendIn, it also takes the append lock and begins the transaction, in
// the same round trip.
func (t *txn) Prefetch(keys [][]byte) error {
	switch {
	case t.ended:
		return errTxnEnded
	case t.failed != nil:
		return t.failedErr
	}
	var want [][]byte
	for _, k := range keys {
		_, written := t.writes[string(k)]
		_, read := t.fetched[string(k)]
		if len(k) > 0 && len(k) <= MaxKeySize && !written && !read &&
			!slices.ContainsFunc(want, func(w []byte) bool { return bytes.Equal(w, k) }) {
			want = append(want, k)
		}
	}
	if len(want) == 0 {
		return nil
	}
	got := make(map[string][]byte, len(want))
	row := func(key, value []byte) {
		got[string(key)] = append(make([]byte, 0, len(value)), value...)
	}
	var err error
	if t.appendLock && !t.locked && !t.begun {
		err = t.lockAndRead(want, row)
	} else {
		err = t.roundTrip(func(b *pgx.Batch) { b.Queue(sqlGetMany, byteaArray(want)) }, func(br pgx.BatchResults) error {
			rows, err := br.Query()
			if err != nil {
				return err
			}
			for rows.Next() {
				raw := rows.RawValues()
				row(raw[0], raw[1])
			}
			rows.Close()
			return rows.Err()
		})
	}
	if err != nil {
		return err
	}
	if t.fetched == nil {
		t.fetched = make(map[string]fetched, len(want))
	}
	for _, k := range want {
		v, ok := got[string(k)]
		t.fetched[string(k)] = fetched{value: v, found: ok}
		if ok && t.update {
			t.reads = append(t.reads, bytes.Clone(k))
		}
	}
	return nil
}

// lockAndRead is the first round trip of an AppendIn that begins with a
// Prefetch: it takes the append lock, then (after a Sync, so that the
// lock is not part of the transaction, whose snapshot is taken after the
// lock is held) begins the transaction and reads keys, calling row for
// each key found. One round trip, where roundTrip would take two.
func (t *txn) lockAndRead(keys [][]byte, row func(key, value []byte)) error {
	rctx, cancel := t.s.roundTripCtx(t.ctx)
	defer cancel()
	if err := t.acquire(rctx); err != nil {
		return err
	}
	arg, err := t.conn.Conn().TypeMap().Encode(pgtype.ByteaArrayOID, pgtype.BinaryFormatCode, byteaArray(keys), nil)
	if err != nil {
		return t.fail("encode the keys to read", err)
	}
	p := t.conn.Conn().PgConn().StartPipeline(rctx)
	p.SendQueryParams(sqlAppendLock, nil, nil, nil, nil)
	p.SendPipelineSync()
	p.SendQueryParams(sqlBeginUpdate, nil, nil, nil, nil)
	p.SendQueryParams(sqlGetMany, [][]byte{arg}, []uint32{pgtype.ByteaArrayOID},
		[]int16{pgtype.BinaryFormatCode}, []int16{pgtype.BinaryFormatCode})
	err = p.Sync()
	// The results, in order: the lock's, a sync, BEGIN's, the rows.
	result := func(rows bool) error {
		res, err := p.GetResults()
		if err != nil {
			return err
		}
		switch r := res.(type) {
		case *pgconn.ResultReader:
			for rows && r.NextRow() {
				v := r.Values()
				row(v[0], v[1])
			}
			_, err = r.Close()
			return err
		case *pgconn.PipelineSync:
			return nil
		}
		return fmt.Errorf("unexpected result %T", res)
	}
	if err == nil {
		if err = result(false); err == nil {
			t.locked = true
		}
	}
	for i, rows := range []bool{false, false, true} {
		if err != nil {
			break
		}
		if err = result(rows); err == nil && i == 1 {
			t.begun = true // BEGIN ran
		}
	}
	if err == nil {
		err = result(false) // the final sync
	}
	return t.finish(p, err)
}

// Set stores value under key at commit. It keeps both slices until then.
func (t *txn) Set(key, value []byte) error {
	if err := t.checkWrite(key); err != nil {
		return err
	}
	if len(value) > MaxValueSize {
		return errValTooLarge
	}
	if value == nil {
		value = []byte{} // nil would be sent as NULL
	}
	t.buffer(key, write{value: value})
	return nil
}

// Delete removes key at commit; a missing key is not an error.
func (t *txn) Delete(key []byte) error {
	if err := t.checkWrite(key); err != nil {
		return err
	}
	t.buffer(key, write{del: true})
	return nil
}

func (t *txn) checkWrite(key []byte) error {
	switch {
	case t.ended:
		return errTxnEnded
	case !t.update:
		return errReadOnly
	case t.failed != nil:
		return t.failedErr
	case len(key) == 0:
		return errEmptyKey
	case len(key) > MaxKeySize:
		return errKeyTooLarge
	}
	return nil
}

func (t *txn) buffer(key []byte, w write) {
	if t.writes == nil {
		t.writes = make(map[string]write)
	}
	if _, ok := t.writes[string(key)]; !ok && t.s.watch.watches(key) {
		t.announce = append(t.announce, key)
	}
	t.writes[string(key)] = w
	t.wrote = true
}

// queueWrites adds to b the statements that send the buffered writes, in
// key order (so that concurrent transactions lock rows in one order), and
// empties the buffer.
func (t *txn) queueWrites(b *pgx.Batch) {
	if len(t.writes) == 0 {
		return
	}
	keys := make([]string, 0, len(t.writes))
	for k := range t.writes {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var (
		dels       byteaArray
		setK, setV byteaArray
		size       int
	)
	flushSets := func() {
		if len(setK) > 0 {
			b.Queue(sqlUpsert, setK, setV)
			setK, setV, size = nil, nil, 0
		}
	}
	for _, k := range keys {
		w := t.writes[k]
		if w.del {
			if dels = append(dels, []byte(k)); len(dels) == flushRows {
				b.Queue(sqlDelete, dels)
				dels = nil
			}
			continue
		}
		if len(setK) > 0 && (len(setK) == flushRows || size+len(k)+len(w.value) > flushBytes) {
			flushSets()
		}
		setK, setV = append(setK, []byte(k)), append(setV, w.value)
		size += len(k) + len(w.value)
	}
	flushSets()
	if len(dels) > 0 {
		b.Queue(sqlDelete, dels)
	}
	clear(t.writes)
}

// flush sends the buffered writes.
func (t *txn) flush() error {
	if len(t.writes) == 0 {
		return nil
	}
	return t.roundTrip(t.queueWrites, nil)
}

// commit sends the buffered writes, locks the rows Get read (so that a
// transaction whose reads changed meanwhile conflicts), inserts the
// commit's marker when it writes (commit.go), and commits, in one round
// trip. A transaction that never reached the database commits nothing.
func (t *txn) commit() error {
	if t.failed != nil {
		return t.failedErr
	}
	if !t.begun && len(t.writes) == 0 && len(t.trailRecs) == 0 {
		return nil
	}
	var tag string
	unlock := false // the batch ends with the append lock's release
	if t.wrote || len(t.trailRecs) > 0 {
		t.marker = newMarker()
	}
	err := t.roundTrip(func(b *pgx.Batch) {
		t.committing = true
		t.pid = t.conn.Conn().PgConn().PID()
		if !t.sync {
			b.Queue(sqlNoSync)
		}
		t.queueWrites(b)
		queueTrailInserts(b, t.trailFirst-1, t.trailRecs)
		if (t.wrote || len(t.trailRecs) > 0) && len(t.reads) > 0 {
			b.Queue(sqlLockReads, byteaArray(t.reads))
		}
		if len(t.announce) > 0 {
			b.Queue(sqlNotify, t.s.watch.payload(t.announce))
		}
		if t.marker != nil {
			b.Queue(sqlMarker, t.marker)
		}
		b.Queue(sqlCommit)
		if t.appendLock {
			// t.locked is set once this batch's BEGIN (if it carries
			// it) has taken the lock.
			b.Queue(sqlAppendUnlock)
			unlock = true
		}
	}, func(br pgx.BatchResults) error {
		for {
			ct, err := br.Exec()
			if err != nil {
				return err
			}
			if ct.String() == sqlCommit || ct.String() == sqlRollback {
				tag = ct.String()
				if unlock {
					if _, err := br.Exec(); err != nil {
						return err
					}
					t.locked = false
				}
				return nil
			}
		}
	})
	if err != nil {
		return err
	}
	if tag != sqlCommit {
		// PostgreSQL answers COMMIT in a failed transaction with a
		// rollback; no statement reported the failure, but nothing was
		// written.
		return t.fail("commit", errRolledBack)
	}
	return nil
}

var errRolledBack = kms.Errorf(kms.KindInternal, "the database rolled the transaction back")

// bound is one end of a scan's key range.
type bound struct {
	key []byte
	op  int // boundNone, boundIncl or boundExcl
}

const (
	boundNone = iota
	boundIncl
	boundExcl
)

// scanSQL holds the text of every scan query, by keysOnly, reverse, the
// lower bound's op and the upper bound's.
var scanSQL = func() (q [2][2][3][3]string) {
	for ko := range 2 {
		for rev := range 2 {
			for lo := range 3 {
				for hi := range 3 {
					s := "SELECT key"
					if ko == 0 {
						s += ", value"
					}
					s += " FROM kms_kv"
					n, where := 0, ""
					cond := func(op string) {
						n++
						if where == "" {
							where = " WHERE "
						} else {
							where += " AND "
						}
						where += "key " + op + " $" + string(rune('0'+n))
					}
					switch lo {
					case boundIncl:
						cond(">=")
					case boundExcl:
						cond(">")
					}
					switch hi {
					case boundIncl:
						cond("<=")
					case boundExcl:
						cond("<")
					}
					s += where + " ORDER BY key"
					if rev == 1 {
						s += " DESC"
					}
					q[ko][rev][lo][hi] = s + " LIMIT 256"
				}
			}
		}
	}
	return q
}()

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Scan calls fn for each key in the range opts selects; see kms.Txn. It
// reads the range in pages of up to 256 rows or about 1 MiB, each one
// query, and calls fn with the keys and values of a page after the page
// has been read, so fn may use the transaction meanwhile. Buffered writes
// in the range are sent first, so the scan sees them. It returns fn's
// error unchanged, and ctx.Err() if the transaction's context is done
// before an item.
func (t *txn) Scan(opts kms.ScanOptions, fn func(key, value []byte) (bool, error)) error {
	switch {
	case t.ended:
		return errTxnEnded
	case t.failed != nil:
		return t.failedErr
	case len(opts.Start) > 0 && !bytes.HasPrefix(opts.Start, opts.Prefix):
		return errStartOutside
	}
	// The range: keys with the prefix are those in [prefix, end).
	var lo, hi bound
	if len(opts.Prefix) > 0 {
		lo = bound{key: opts.Prefix, op: boundIncl}
	}
	if end := keyrange.PrefixEnd(opts.Prefix); end != nil {
		hi = bound{key: end, op: boundExcl}
	}
	if len(opts.Start) > 0 {
		if opts.Reverse {
			hi = bound{key: opts.Start, op: boundIncl}
		} else {
			lo = bound{key: opts.Start, op: boundIncl}
		}
	}
	var (
		buf   []byte  // the page's keys and values
		items []entry // where they are in buf
	)
	for {
		if err := t.ctx.Err(); err != nil {
			return err
		}
		if t.writesIn(lo, hi) {
			if err := t.flush(); err != nil {
				return err
			}
		}
		sql := scanSQL[b2i(opts.KeysOnly)][b2i(opts.Reverse)][lo.op][hi.op]
		args := make([]any, 0, 2)
		if lo.op != boundNone {
			args = append(args, lo.key)
		}
		if hi.op != boundNone {
			args = append(args, hi.key)
		}
		buf, items = buf[:0], items[:0]
		more := false // the range may hold more rows than the page
		err := t.roundTrip(func(b *pgx.Batch) { b.Queue(sql, args...) }, func(br pgx.BatchResults) error {
			rows, err := br.Query()
			if err != nil {
				return err
			}
			defer rows.Close()
			n := 0
			for rows.Next() {
				n++
				raw := rows.RawValues()
				e := entry{k0: len(buf)}
				buf = append(buf, raw[0]...)
				e.k1 = len(buf)
				if !opts.KeysOnly {
					buf = append(buf, raw[1]...)
				}
				e.v1 = len(buf)
				items = append(items, e)
				if len(buf) >= scanBytes {
					more = true
					break
				}
			}
			if n == scanRows {
				more = true
			}
			rows.Close()
			return rows.Err()
		})
		if err != nil {
			return err
		}
		for _, e := range items {
			if err := t.ctx.Err(); err != nil {
				return err
			}
			var v []byte
			if !opts.KeysOnly {
				v = buf[e.k1:e.v1:e.v1]
			}
			cont, err := fn(buf[e.k0:e.k1:e.k1], v)
			if err != nil || !cont {
				return err
			}
		}
		if !more || len(items) == 0 {
			return nil
		}
		last := items[len(items)-1]
		next := bytes.Clone(buf[last.k0:last.k1])
		if opts.Reverse {
			hi = bound{key: next, op: boundExcl}
		} else {
			lo = bound{key: next, op: boundExcl}
		}
	}
}

// entry locates one row of a scan page in its buffer: the key is
// buf[k0:k1], the value buf[k1:v1].
type entry struct{ k0, k1, v1 int }

// writesIn reports whether a buffered write falls between lo and hi.
func (t *txn) writesIn(lo, hi bound) bool {
	for k := range t.writes {
		key := []byte(k)
		if lo.op != boundNone {
			c := bytes.Compare(key, lo.key)
			if c < 0 || c == 0 && lo.op == boundExcl {
				continue
			}
		}
		if hi.op != boundNone {
			c := bytes.Compare(key, hi.key)
			if c > 0 || c == 0 && hi.op == boundExcl {
				continue
			}
		}
		return true
	}
	return false
}
