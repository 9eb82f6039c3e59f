package pgstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ringkms/kms"
)

// The trail's statements.
const (
	sqlTrailLen = "SELECT coalesce(max(seq), 0) FROM kms_trail"
	// The records of $2 as the seqs $1+1, $1+2...
	sqlTrailAppend = "INSERT INTO kms_trail (seq, rec) SELECT $1::BIGINT + a.o, a.r FROM unnest($2::BYTEA[]) WITH ORDINALITY AS a (r, o)"
	sqlTrailScan   = "SELECT seq, rec FROM kms_trail WHERE seq >= $1 AND seq <= $2 ORDER BY seq LIMIT 256"
	sqlTrailHas    = "SELECT count(*) FROM kms_trail WHERE seq = $1"
	// The first record after which the next one is missing, below $1.
	sqlTrailGap = `SELECT t.seq FROM kms_trail AS t
		WHERE t.seq < $1 AND NOT EXISTS (SELECT 1 FROM kms_trail AS u WHERE u.seq = t.seq + 1)
		ORDER BY t.seq LIMIT 1`
	sqlTrailAfter = "SELECT seq, rec FROM kms_trail WHERE seq > $1 ORDER BY seq LIMIT $2"
	sqlTrailCut   = "DELETE FROM kms_trail WHERE seq > $1 AND seq <= $2"
)

// appendBytes is the most record bytes one INSERT of Append carries; a
// larger batch is sent as several, in one transaction.
const appendBytes = 32 << 20

// Trail is the kms.Trail of a Store: the table kms_trail, one row per
// record. It is safe for concurrent use by one appender and any number of
// readers.
type Trail struct {
	s *Store

	mu sync.Mutex // one Append or Check at a time; guards doubt

	// n is the number of records this process knows of: the seq of the
	// last one. It is read from the table at Open and kept by Append and
	// AppendIn; when other processes append too (AppendIn), it may lag,
	// and Scan reads the table's end when it reaches n.
	n atomic.Uint64

	// doubt holds the records of an Append whose commit may have
	// happened (the connection broke after it was sent), as records
	// n+1...; the next Append settles it first.
	doubt [][]byte
}

func openTrail(ctx context.Context, s *Store) (*Trail, error) {
	t := &Trail{s: s}
	rctx, cancel := s.roundTripCtx(ctx)
	defer cancel()
	var n int64
	if err := s.pool.QueryRow(rctx, sqlTrailLen).Scan(&n); err != nil {
		return nil, s.translate(ctx, "read the trail's length", err)
	}
	t.n.Store(uint64(n))
	return t, nil
}

// Len returns the number of records this process knows of: those it
// found at Open or appended since, and those Scan found since.
func (t *Trail) Len() uint64 { return t.n.Load() }

// seen raises n to last, a record known to exist.
func (t *Trail) seen(last uint64) {
	for {
		n := t.n.Load()
		if last <= n || t.n.CompareAndSwap(n, last) {
			return
		}
	}
}

// refresh reads the seq of the last record from the table, raises n to
// it and returns it.
func (t *Trail) refresh() (uint64, error) {
	ctx, cancel := t.s.roundTripCtx(context.Background())
	defer cancel()
	var n int64
	if err := t.s.pool.QueryRow(ctx, sqlTrailLen).Scan(&n); err != nil {
		return 0, t.s.translate(context.Background(), "read the trail's length", err)
	}
	t.seen(uint64(n))
	return t.n.Load(), nil
}

// AppendIn runs fn in a transaction of the Store, as Update does, and
// inserts the records fn returns, as the records first, first+1..., in
// the same commit (kms.SharedTrail). It takes the append lock, a
// PostgreSQL session advisory lock, before its BEGIN, and lets it go after
// its COMMIT: the AppendIn calls of every process on the database run one
// after another, each on a snapshot that sees the commit of the one
// before, and do not conflict with one another (other Updates may, and
// are retried as Update's are). A seq that exists already (an appender
// that took no lock) runs fn again. The lock is also let go when its
// connection is lost: a process that dies holds up no other. (CockroachDB
// has no advisory locks: there, appenders would conflict on the chain's
// head, and retry.)
func (t *Trail) AppendIn(ctx context.Context, fn func(kms.Txn) (uint64, [][]byte, error)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if t.s.closed.Load() {
		return errClosed
	}
	var last uint64
	err := t.s.update(ctx, func(tx *txn) error {
		tx.trailFirst, tx.trailRecs, last = 0, nil, 0
		first, recs, err := fn(tx)
		if err != nil || len(recs) == 0 {
			return err
		}
		if _, err := checkRecords(recs); err != nil {
			return err
		}
		if first == 0 || first-1+uint64(len(recs)) > math.MaxInt64 {
			return kms.Errorf(kms.KindInvalid, "trail records cannot start at %d", first)
		}
		tx.trailFirst, tx.trailRecs, last = first, recs, first-1+uint64(len(recs))
		return nil
	}, true, true)
	if err == nil && last > 0 {
		t.seen(last)
	}
	return err
}

// Append inserts recs as the records Len()+1... in one transaction,
// committed durably (synchronous_commit on), in one round trip when they
// hold up to 32 MiB. On any error, Len is unchanged and none of recs
// counts as appended. A record over MaxRecordSize is an error of kind
// TooLarge; a seq that exists already (another process appends to the
// table) of kind Conflict; a database that cannot be reached, or a
// connection lost before the commit's answer, of kind Unavailable. In the
// last case the records may have been committed: the next Append first
// removes them, if they are there and exactly what was sent, and refuses
// (Conflict) to write after records it did not append.
func (t *Trail) Append(recs [][]byte) error {
	size, err := checkRecords(recs)
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.s.writable(); err != nil {
		return err
	}
	if len(recs) == 0 {
		return nil
	}
	if t.doubt != nil {
		if err := t.settle(); err != nil {
			return err
		}
	}
	n := t.n.Load()
	if n+uint64(len(recs)) > math.MaxInt64 {
		return kms.Errorf(kms.KindTooLarge, "the trail is full")
	}
	err = t.insert(n, recs, size)
	if err == nil {
		t.n.Store(n + uint64(len(recs)))
		t.s.health.ok()
		return nil
	}
	switch {
	case sqlState(err) == codeUniqueKey:
		return &kms.Error{Kind: kms.KindConflict, Err: err, Message: fmt.Sprintf(
			"trail records after %d exist already: another process appends to this trail", n)}
	case isLostConnection(err) && sqlState(err) == "" && !pgconn.SafeToRetry(err):
		// The INSERT or COMMIT was sent, and no answer came: it may have
		// committed.
		t.doubt = make([][]byte, len(recs))
		for i, r := range recs {
			t.doubt[i] = bytes.Clone(r)
		}
		t.s.health.lost()
		return &kms.Error{Kind: kms.KindUnavailable, Err: t.s.redact(err),
			Message: "service unavailable: the connection to the database broke during an append to the trail"}
	}
	return t.s.translate(context.Background(), "append to the trail", err)
}

// checkRecords returns the size of recs, or an error of kind TooLarge
// naming one over MaxRecordSize.
func checkRecords(recs [][]byte) (int, error) {
	size := 0
	for i, rec := range recs {
		if len(rec) > MaxRecordSize {
			return 0, kms.Errorf(kms.KindTooLarge, "trail record %d of the batch is %d bytes, over the limit of %d", i, len(rec), MaxRecordSize)
		}
		size += len(rec)
	}
	return size, nil
}

// insert writes recs as the records n+1... in one durable transaction.
func (t *Trail) insert(n uint64, recs [][]byte, size int) error {
	ctx, cancel := t.s.roundTripCtx(context.Background())
	defer cancel()
	// One statement is its own transaction, and one round trip.
	if size <= appendBytes {
		_, err := t.s.pool.Exec(ctx, sqlTrailAppend, int64(n), appendArg(recs))
		return err
	}
	c, err := t.s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer func() {
		if !c.Conn().IsClosed() && c.Conn().PgConn().TxStatus() != 'I' {
			rb, cancel := context.WithTimeout(context.Background(), rollbackTimeout)
			c.Exec(rb, sqlRollback)
			cancel()
		}
		c.Release()
	}()
	b := &pgx.Batch{}
	b.Queue(sqlBeginUpdate)
	queueTrailInserts(b, n, recs)
	b.Queue(sqlCommit)
	return c.Conn().SendBatch(ctx, b).Close()
}

// queueTrailInserts adds to b the INSERTs of recs as the records n+1...,
// each carrying up to appendBytes of records.
func queueTrailInserts(b *pgx.Batch, n uint64, recs [][]byte) {
	for i, bytes := 0, 0; i < len(recs); {
		j := i
		for bytes = 0; j < len(recs) && (j == i || bytes+len(recs[j]) <= appendBytes); j++ {
			bytes += len(recs[j])
		}
		b.Queue(sqlTrailAppend, int64(n+uint64(i)), appendArg(recs[i:j]))
		i = j
	}
}

// appendArg returns recs as the records argument of sqlTrailAppend: an
// empty record for a nil one, which would be sent as NULL.
func appendArg(recs [][]byte) byteaArray {
	if slices.ContainsFunc(recs, func(r []byte) bool { return r == nil }) {
		recs = slices.Clone(recs)
		for i, r := range recs {
			if r == nil {
				recs[i] = []byte{}
			}
		}
	}
	return byteaArray(recs)
}

// settle decides the Append in doubt: if its records are in the table,
// exactly as sent, it removes them (they were never acknowledged, and the
// next records take their seqs); if none is, there is nothing to do; if
// others are, another process appends to the table, and settle refuses.
func (t *Trail) settle() error {
	n := t.n.Load()
	ctx, cancel := t.s.roundTripCtx(context.Background())
	defer cancel()
	rows, err := t.s.pool.Query(ctx, sqlTrailAfter, int64(n), len(t.doubt)+1)
	if err != nil {
		return t.s.translate(context.Background(), "read the trail after an append in doubt", err)
	}
	found, same := 0, true
	for rows.Next() {
		raw := rows.RawValues()
		var seq int64
		if err := rows.Scan(&seq, nil); err != nil {
			rows.Close()
			return t.s.translate(context.Background(), "read the trail after an append in doubt", err)
		}
		same = same && found < len(t.doubt) && uint64(seq) == n+uint64(found)+1 && bytes.Equal(raw[1], t.doubt[found])
		found++
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return t.s.translate(context.Background(), "read the trail after an append in doubt", err)
	}
	switch {
	case found == 0:
		t.doubt = nil
		return nil
	case !same || found != len(t.doubt):
		return kms.Errorf(kms.KindConflict, "the trail holds records after %d that this process did not append: another process appends to it", n)
	}
	if _, err := t.s.pool.Exec(ctx, sqlTrailCut, int64(n), int64(n)+int64(found)); err != nil {
		return t.s.translate(context.Background(), "remove the records of an append in doubt", err)
	}
	t.doubt = nil
	return nil
}

// Check reports whether the table holds the records 1 to want: nil, or an
// error of kind Unprocessable naming the first one missing. It looks at
// the records 1 and want, and searches the table for the first gap only
// when one of them is missing; a gap between them is found by Scan.
func (t *Trail) Check(want uint64) error {
	if want == 0 {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	ctx, cancel := t.s.roundTripCtx(context.Background())
	defer cancel()
	has := func(seq uint64) (bool, error) {
		var c int64
		err := t.s.pool.QueryRow(ctx, sqlTrailHas, int64(seq)).Scan(&c)
		return c > 0, err
	}
	// The table's end: other processes may have appended since Open.
	n, err := t.refresh()
	if err != nil {
		return err
	}
	if want <= n {
		first, err := has(1)
		if err != nil {
			return t.s.translate(context.Background(), "check the trail", err)
		}
		last, err := has(want)
		if err != nil {
			return t.s.translate(context.Background(), "check the trail", err)
		}
		if first && last {
			return nil
		}
	}
	// Something is missing: find the first record that is.
	upto := min(want, n)
	first, err := has(1)
	if err != nil {
		return t.s.translate(context.Background(), "check the trail", err)
	}
	if !first {
		if n == 0 {
			return damage("trail is empty: the records from 1 to %d are missing", want)
		}
		return damage("trail record 1 is missing from table kms_trail")
	}
	var before int64
	err = t.s.pool.QueryRow(ctx, sqlTrailGap, int64(upto)).Scan(&before)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return damage("trail ends after record %d: the records from %d on are missing", n, n+1)
	case err != nil:
		return t.s.translate(context.Background(), "check the trail", err)
	}
	return damage("trail record %d is missing from table kms_trail (record %d is there)", before+1, before)
}

// damage is an error of kind Unprocessable: a record found missing.
func damage(format string, args ...any) *kms.Error {
	return &kms.Error{Kind: kms.KindUnprocessable, Message: fmt.Sprintf(format, args...)}
}

// Scan calls fn with the records from seq from (0 counts as 1) to the
// last one in the table when Scan began (by any process), in order, reading them in pages of up
// to 256 rows or about 1 MiB, each one query on a connection of its own.
// The slice passed to fn is valid only during the call. A record missing
// from the table is an error of kind Unprocessable; fn's error is returned
// unchanged.
func (t *Trail) Scan(from uint64, fn func(seq uint64, rec []byte) (bool, error)) error {
	from = max(from, 1)
	if t.s.closed.Load() {
		return errClosed
	}
	// The end is the table's: other processes may have appended records
	// this one has not seen.
	end, err := t.refresh()
	if err != nil || from > end {
		return err
	}
	var (
		buf  = make([]byte, 0, 4096)
		ends []int // ends[i] is where record next+i ends in buf
		next = from
	)
	for next <= end {
		buf, ends = buf[:0], ends[:0]
		var missing uint64
		err := func() error {
			ctx, cancel := t.s.roundTripCtx(context.Background())
			defer cancel()
			rows, err := t.s.pool.Query(ctx, sqlTrailScan, int64(next), int64(end))
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var seq int64
				if err := rows.Scan(&seq, nil); err != nil {
					return err
				}
				if want := next + uint64(len(ends)); uint64(seq) != want {
					missing = want
					break
				}
				buf = append(buf, rows.RawValues()[1]...)
				ends = append(ends, len(buf))
				if len(buf) >= scanBytes {
					break
				}
			}
			rows.Close()
			return rows.Err()
		}()
		if err != nil {
			return t.s.translate(context.Background(), "read the trail", err)
		}
		t.s.health.ok()
		if len(ends) == 0 && missing == 0 {
			missing = next
		}
		start := 0
		for _, e := range ends {
			more, err := fn(next, buf[start:e:e])
			if err != nil || !more {
				return err
			}
			start = e
			next++
		}
		if missing != 0 {
			return damage("trail record %d is missing from table kms_trail", missing)
		}
	}
	return nil
}
