package pgstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/pgtest"
	"github.com/ringkms/kms/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// openStore opens a Store on dbURL, closed at the end of t.
func openStore(t testing.TB, dbURL string, opts Options) *Store {
	t.Helper()
	s, err := Open(context.Background(), dbURL, opts)
	if err != nil {
		t.Fatalf("Open = %v, want nil", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close() = %v, want nil", err)
		}
	})
	return s
}

// sqlConn connects to dbURL directly, for a test to look at or change the
// tables behind the Store's back.
func sqlConn(t testing.TB, dbURL string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(context.Background(), dbURL)
	if err != nil {
		t.Fatalf("pgx.Connect: %v", err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func exec(t testing.TB, c *pgx.Conn, sql string, args ...any) {
	t.Helper()
	if _, err := c.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func wantKind(t testing.TB, what string, err error, kind kms.Kind) {
	t.Helper()
	var e *kms.Error
	if !errors.As(err, &e) || e.Kind != kind {
		t.Errorf("%s = %v, want a kms error of kind %v", what, err, kind)
	}
}

func setKey(t testing.TB, s kms.Store, key, value string) {
	t.Helper()
	if err := s.Update(t.Context(), func(tx kms.Txn) error { return tx.Set([]byte(key), []byte(value)) }); err != nil {
		t.Fatalf("Update(Set(%q)) = %v, want nil", key, err)
	}
}

func getKey(t testing.TB, s kms.Store, key string) ([]byte, error) {
	t.Helper()
	var v []byte
	var getErr error
	if err := s.View(t.Context(), func(tx kms.Txn) error {
		v, getErr = tx.Get([]byte(key))
		return nil
	}); err != nil {
		t.Fatalf("View(Get(%q)) = %v, want nil", key, err)
	}
	return v, getErr
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t testing.TB) kms.Store { return openStore(t, pgtest.URL(t), Options{}) })
}

func TestTrailConformance(t *testing.T) {
	storetest.RunTrail(t, func(t testing.TB) kms.Trail { return openStore(t, pgtest.URL(t), Options{}).Trail() })
}

func TestMigrationsNumbered(t *testing.T) {
	if len(migrations) != SchemaVersion {
		t.Errorf("%d migrations, SchemaVersion %d: add the migration and raise SchemaVersion together", len(migrations), SchemaVersion)
	}
}

// schemaRows returns the versions kms_schema records.
func schemaRows(t testing.TB, c *pgx.Conn) []int {
	t.Helper()
	rows, err := c.Query(context.Background(), "SELECT version FROM kms_schema ORDER BY version")
	if err != nil {
		t.Fatalf("read kms_schema: %v", err)
	}
	vs, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		t.Fatalf("read kms_schema: %v", err)
	}
	return vs
}

func allVersions() []int {
	var vs []int
	for v := 1; v <= SchemaVersion; v++ {
		vs = append(vs, v)
	}
	return vs
}

// TestReopen: a second Open of a database finds its schema current,
// migrates nothing, and sees what the first wrote, the trail included.
func TestReopen(t *testing.T) {
	dbURL := pgtest.URL(t)
	s, err := Open(t.Context(), dbURL, Options{})
	if err != nil {
		t.Fatalf("Open = %v, want nil", err)
	}
	setKey(t, s, "k", "durable")
	if err := s.Trail().Append([][]byte{[]byte("one"), []byte("two")}); err != nil {
		t.Fatalf("Append = %v, want nil", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close = %v, want nil", err)
	}
	c := sqlConn(t, dbURL)
	if got := schemaRows(t, c); !slices.Equal(got, allVersions()) {
		t.Fatalf("kms_schema after the first Open = %v, want %v", got, allVersions())
	}

	s = openStore(t, dbURL, Options{})
	if v, err := getKey(t, s, "k"); err != nil || string(v) != "durable" {
		t.Errorf("Get(k) after reopen = %q, %v; want %q, nil", v, err, "durable")
	}
	if n := s.Trail().Len(); n != 2 {
		t.Errorf("Trail().Len() after reopen = %d, want 2", n)
	}
	if err := s.Trail().Check(2); err != nil {
		t.Errorf("Trail().Check(2) after reopen = %v, want nil", err)
	}
	if got := schemaRows(t, c); !slices.Equal(got, allVersions()) {
		t.Errorf("kms_schema after the second Open = %v, want %v", got, allVersions())
	}
}

// TestOpenConcurrently: processes that open a new database at the same
// moment all succeed, and the migrations run once.
func TestOpenConcurrently(t *testing.T) {
	dbURL := pgtest.URL(t)
	const n = 6
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make([]error, n)
	stores := make([]*Store, n)
	for i := range n {
		wg.Go(func() {
			<-start
			stores[i], errs[i] = Open(context.Background(), dbURL, Options{MaxConns: 2})
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Open %d of %d at once = %v, want nil", i, n, err)
			continue
		}
		stores[i].Close()
	}
	if got := schemaRows(t, sqlConn(t, dbURL)); !slices.Equal(got, allVersions()) {
		t.Errorf("kms_schema = %v, want %v", got, allVersions())
	}
}

// TestOpenNewerSchema: a database that a later build migrated is refused,
// with a message that says to upgrade, and left as it was.
func TestOpenNewerSchema(t *testing.T) {
	dbURL := pgtest.URL(t)
	s := openStore(t, dbURL, Options{})
	setKey(t, s, "k", "v")
	c := sqlConn(t, dbURL)
	exec(t, c, "INSERT INTO kms_schema (version) VALUES ($1)", SchemaVersion+1)

	s2, err := Open(t.Context(), dbURL, Options{})
	if err == nil {
		s2.Close()
		t.Fatalf("Open of a database at schema version %d = nil error, want one", SchemaVersion+1)
	}
	wantKind(t, "Open(newer schema)", err, kms.KindInvalid)
	for _, want := range []string{fmt.Sprint(SchemaVersion + 1), "upgrade kmsd"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Open(newer schema) = %q, want a message containing %q", err, want)
		}
	}
	want := append(allVersions(), SchemaVersion+1)
	if got := schemaRows(t, c); !slices.Equal(got, want) {
		t.Errorf("kms_schema after the refused Open = %v, want %v", got, want)
	}
}

// TestOpenEmptySchemaTable: a kms_schema table that exists but is empty
// (a database whose first Open died before committing cannot leave one,
// but an operator may create it) is migrated from version 0.
func TestOpenEmptySchemaTable(t *testing.T) {
	dbURL := pgtest.URL(t)
	c := sqlConn(t, dbURL)
	exec(t, c, sqlSchemaTable)
	s := openStore(t, dbURL, Options{})
	setKey(t, s, "k", "v")
	if got := schemaRows(t, c); !slices.Equal(got, allVersions()) {
		t.Errorf("kms_schema = %v, want %v", got, allVersions())
	}
}

// TestOpenExisting: with Existing, Open refuses a database that kmsd
// never opened and leaves it without a table; once a Store has been
// opened there, it opens.
func TestOpenExisting(t *testing.T) {
	dbURL := pgtest.URL(t)
	s, err := Open(t.Context(), dbURL, Options{Existing: true})
	if err == nil {
		s.Close()
		t.Fatal("Open(Existing) of an empty database = nil error, want one")
	}
	wantKind(t, "Open(Existing, empty database)", err, kms.KindNotFound)
	if !strings.Contains(err.Error(), "no kmsd store") {
		t.Errorf("Open(Existing, empty database) = %q, want a message saying it holds no kmsd store", err)
	}
	var tables int
	if err := sqlConn(t, dbURL).QueryRow(t.Context(), "SELECT count(*) FROM pg_tables WHERE tablename LIKE 'kms_%'").Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables != 0 {
		t.Errorf("the refused Open left %d kms_ tables, want none", tables)
	}
	setKey(t, openStore(t, dbURL, Options{}), "k", "v")
	s = openStore(t, dbURL, Options{Existing: true})
	if got, err := getKey(t, s, "k"); err != nil || string(got) != "v" {
		t.Errorf("Open(Existing) of a kmsd database: k = %q, %v; want v", got, err)
	}
}

func TestWritableLive(t *testing.T) {
	s := openStore(t, pgtest.URL(t), Options{})
	for i := range 3 {
		if err := s.Writable(t.Context()); err != nil {
			t.Fatalf("Writable #%d = %v, want nil", i+1, err)
		}
		time.Sleep(writableTTL) // the next call asks the database again
	}
}

// TestWritableReadOnly: a database that takes no writes (here, by
// default_transaction_read_only; a standby answers the same) is
// Unavailable.
func TestWritableReadOnly(t *testing.T) {
	dbURL := pgtest.URL(t)
	openStore(t, dbURL, Options{}).Close() // creates the tables
	s := openStore(t, dbURL+"&default_transaction_read_only=on", Options{})
	time.Sleep(writableTTL) // Open's own exchange no longer counts
	wantKind(t, "Writable(read-only database)", s.Writable(t.Context()), kms.KindUnavailable)
	err := s.Update(t.Context(), func(tx kms.Txn) error { return tx.Set([]byte("k"), []byte("v")) })
	wantKind(t, "Update(read-only database)", err, kms.KindUnavailable)
}

// TestUnreachable: a database that cannot be reached is Unavailable, for
// Open, Writable and every call, and the Store recovers when it can be
// reached again. No message carries the URL's password.
func TestUnreachable(t *testing.T) {
	const password = "hunter2-secret-password"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := ln.Addr().String()
	ln.Close()
	_, err = Open(t.Context(), "postgres://kms:"+password+"@"+closedPort+"/kms?sslmode=disable&connect_timeout=5", Options{})
	wantKind(t, "Open(nothing listening)", err, kms.KindUnavailable)
	if err != nil && strings.Contains(err.Error(), password) {
		t.Errorf("Open(nothing listening) = %q, which contains the password", err)
	}

	dbURL := pgtest.URL(t)
	p, viaProxy := newProxy(t, dbURL)
	u := strings.Replace(viaProxy, "kms@", "kms:"+password+"@", 1) // trust auth ignores it
	s := openStore(t, u, Options{QueryTimeout: 5 * time.Second})
	setKey(t, s, "k", "v")
	if err := s.Writable(t.Context()); err != nil {
		t.Fatalf("Writable = %v, want nil", err)
	}

	p.stop()
	time.Sleep(writableTTL) // the last answer no longer counts
	checks := []struct {
		name string
		err  func() error
	}{
		{"Writable", func() error { return s.Writable(t.Context()) }},
		{"View", func() error {
			return s.View(t.Context(), func(tx kms.Txn) error { _, err := tx.Get([]byte("k")); return err })
		}},
		{"Update", func() error {
			return s.Update(t.Context(), func(tx kms.Txn) error { return tx.Set([]byte("k2"), []byte("v")) })
		}},
		{"Append", func() error { return s.Trail().Append([][]byte{[]byte("r")}) }},
		{"Append again", func() error { return s.Trail().Append([][]byte{[]byte("r")}) }},
	}
	for _, c := range checks {
		err := c.err()
		wantKind(t, c.name+" with the database unreachable", err, kms.KindUnavailable)
		if err != nil && strings.Contains(err.Error(), password) {
			t.Errorf("%s = %q, which contains the password", c.name, err)
		}
	}
	if n := s.Trail().Len(); n != 0 {
		t.Errorf("Trail().Len() after failed appends = %d, want 0", n)
	}

	p.start()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := s.Writable(t.Context())
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Writable after the database came back = %v, want nil within 10 s", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	setKey(t, s, "k2", "v2")
	if v, err := getKey(t, s, "k2"); err != nil || string(v) != "v2" {
		t.Errorf("Get(k2) after the database came back = %q, %v; want %q, nil", v, err, "v2")
	}
	if err := s.Trail().Append([][]byte{[]byte("after")}); err != nil {
		t.Errorf("Append after the database came back = %v, want nil", err)
	}
	var recs []string
	s.Trail().Scan(1, func(_ uint64, rec []byte) (bool, error) { recs = append(recs, string(rec)); return true, nil })
	if !slices.Equal(recs, []string{"after"}) {
		t.Errorf("trail = %q, want %q", recs, []string{"after"})
	}
}

// TestConnectionLost: a connection that breaks in a View is Unavailable;
// in an Update, before its commit, the Update runs again on a new one.
func TestConnectionLost(t *testing.T) {
	p, dbURL := newProxy(t, pgtest.URL(t))
	s := openStore(t, dbURL, Options{})
	setKey(t, s, "k", "v")

	var getErr error
	err := s.View(t.Context(), func(tx kms.Txn) error {
		if _, err := tx.Get([]byte("k")); err != nil {
			return err
		}
		p.cut()
		_, getErr = tx.Get([]byte("k"))
		return getErr
	})
	wantKind(t, "Get in a View after its connection broke", getErr, kms.KindUnavailable)
	wantKind(t, "View whose connection broke", err, kms.KindUnavailable)

	runs := 0
	err = s.Update(t.Context(), func(tx kms.Txn) error {
		runs++
		if _, err := tx.Get([]byte("k")); err != nil {
			return err
		}
		if runs == 1 {
			p.cut()
		}
		if _, err := tx.Get([]byte("k")); err != nil {
			return err
		}
		return tx.Set([]byte("k"), []byte(fmt.Sprint(runs)))
	})
	if err != nil || runs != 2 {
		t.Errorf("Update whose connection broke in its first run = %v after %d runs, want nil after 2", err, runs)
	}
	if v, err := getKey(t, s, "k"); err != nil || string(v) != "2" {
		t.Errorf("Get(k) = %q, %v; want %q, nil", v, err, "2")
	}
}

// TestAppendInDoubt: an Append whose answer is lost after it reached the
// database is Unavailable and counts as not appended, whether or not the
// database committed it; the next Append writes in its place, unless the
// table holds records that this Append did not send.
func TestAppendInDoubt(t *testing.T) {
	direct := pgtest.URL(t)
	p, dbURL := newProxy(t, direct)
	s := openStore(t, dbURL, Options{MaxConns: 2})
	tr := s.Trail()
	c := sqlConn(t, direct)
	count := func() int {
		var n int
		if err := c.QueryRow(t.Context(), "SELECT count(*) FROM kms_trail").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// lose appends recs; the database commits them, their answer never
	// comes back, and then the connection breaks.
	lose := func(recs ...string) {
		t.Helper()
		want := count() + len(recs)
		var batch [][]byte
		for _, r := range recs {
			batch = append(batch, []byte(r))
		}
		n := tr.Len()
		p.swallow(true)
		done := make(chan error)
		go func() { done <- tr.Append(batch) }()
		for deadline := time.Now().Add(10 * time.Second); count() != want; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the Append whose answer is lost never committed")
			}
		}
		p.cut()
		p.swallow(false)
		wantKind(t, "Append whose answer was lost", <-done, kms.KindUnavailable)
		if got := tr.Len(); got != n {
			t.Fatalf("Len() after an Append in doubt = %d, want %d", got, n)
		}
	}
	records := func() []string {
		t.Helper()
		var got []string
		err := tr.Scan(1, func(seq uint64, rec []byte) (bool, error) {
			got = append(got, string(rec))
			return true, nil
		})
		if err != nil {
			t.Fatalf("Scan(1) = %v, want nil", err)
		}
		return got
	}

	if err := tr.Append([][]byte{[]byte("1")}); err != nil {
		t.Fatalf("Append = %v, want nil", err)
	}
	// Committed: the next Append removes the records and takes their seqs.
	lose("lost 2", "lost 3")
	if err := tr.Append([][]byte{[]byte("2"), []byte("3"), []byte("4")}); err != nil {
		t.Fatalf("Append after an Append in doubt = %v, want nil", err)
	}
	if got, want := records(), []string{"1", "2", "3", "4"}; !slices.Equal(got, want) {
		t.Errorf("trail = %q, want %q", got, want)
	}

	// Not committed after all (here, removed behind its back): nothing
	// to remove.
	lose("lost 5")
	exec(t, c, "DELETE FROM kms_trail WHERE seq > 4")
	if err := tr.Append([][]byte{[]byte("5")}); err != nil {
		t.Fatalf("Append after an Append in doubt = %v, want nil", err)
	}
	if got, want := records(), []string{"1", "2", "3", "4", "5"}; !slices.Equal(got, want) {
		t.Errorf("trail = %q, want %q", got, want)
	}

	// Records other than those sent: another process wrote them, and
	// they stay.
	lose("lost 6")
	exec(t, c, "UPDATE kms_trail SET rec = 'not mine' WHERE seq = 6")
	wantKind(t, "Append after records another process appended", tr.Append([][]byte{[]byte("6")}), kms.KindConflict)
	if n := tr.Len(); n != 5 {
		t.Errorf("Len() = %d, want 5", n)
	}
	if n := count(); n != 6 {
		t.Errorf("%d rows in kms_trail, want 6", n)
	}
}

// TestAppendAfterOthers: records that another process appended are never
// overwritten nor removed: Append refuses with Conflict.
func TestAppendAfterOthers(t *testing.T) {
	dbURL := pgtest.URL(t)
	a := openStore(t, dbURL, Options{})
	b := openStore(t, dbURL, Options{})
	if err := a.Trail().Append([][]byte{[]byte("a1"), []byte("a2")}); err != nil {
		t.Fatalf("Append by the first = %v, want nil", err)
	}
	err := b.Trail().Append([][]byte{[]byte("b1")})
	wantKind(t, "Append by a second appender", err, kms.KindConflict)
	if n := b.Trail().Len(); n != 0 {
		t.Errorf("second Len() after its refused Append = %d, want 0", n)
	}
	var got []string
	a.Trail().Scan(1, func(_ uint64, rec []byte) (bool, error) { got = append(got, string(rec)); return true, nil })
	if want := []string{"a1", "a2"}; !slices.Equal(got, want) {
		t.Errorf("trail = %q, want %q", got, want)
	}
}

// TestAppendLargeBatch: a batch over 32 MiB is sent as several statements
// in one transaction: all its records are appended, or none.
func TestAppendLargeBatch(t *testing.T) {
	dbURL := pgtest.URL(t)
	s := openStore(t, dbURL, Options{})
	tr := s.Trail()
	var batch [][]byte
	for i := range 3 {
		rec := bytes.Repeat([]byte{byte('a' + i)}, 12<<20)
		rand.Read(rec[:1024])
		batch = append(batch, rec)
	}
	if err := tr.Append(batch); err != nil {
		t.Fatalf("Append(3 records of 12 MiB) = %v, want nil", err)
	}
	i := 0
	err := tr.Scan(1, func(seq uint64, rec []byte) (bool, error) {
		if !bytes.Equal(rec, batch[i]) {
			return false, fmt.Errorf("record %d differs from the one appended", seq)
		}
		i++
		return true, nil
	})
	if err != nil || i != 3 {
		t.Fatalf("Scan(1) = %v after %d records, want nil after 3", err, i)
	}

	failTrigger(t, dbURL)
	err = tr.Append(append(batch, []byte("ok"), []byte("disk full")))
	wantKind(t, "Append(36 MiB of records, the last refused)", err, kms.KindNoSpace)
	var n int
	if err := sqlConn(t, dbURL).QueryRow(t.Context(), "SELECT count(*) FROM kms_trail").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 3 || tr.Len() != 3 {
		t.Errorf("after a refused batch: %d rows, Len() %d; want 3 and 3", n, tr.Len())
	}
}

// TestTrailMissingRecords: records missing from the table are damage that
// Check and Scan report, naming the first.
func TestTrailMissingRecords(t *testing.T) {
	dbURL := pgtest.URL(t)
	s := openStore(t, dbURL, Options{})
	var recs [][]byte
	for i := 1; i <= 600; i++ {
		recs = append(recs, fmt.Appendf(nil, "record %d", i))
	}
	if err := s.Trail().Append(recs); err != nil {
		t.Fatalf("Append = %v, want nil", err)
	}
	c := sqlConn(t, dbURL)
	exec(t, c, "DELETE FROM kms_trail WHERE seq IN (300, 301) OR seq > 590")
	s2 := openStore(t, dbURL, Options{})
	tr := s2.Trail()

	tests := []struct {
		want    uint64
		message string // "" for nil
	}{
		{0, ""},
		{1, ""},
		{299, ""}, // before the gap
		{590, ""}, // the gap lies between 1 and 590: Scan finds it
		{595, "trail record 300 is missing"},
		{1000, "trail record 300 is missing"},
	}
	for _, tc := range tests {
		err := tr.Check(tc.want)
		switch {
		case tc.message == "" && err != nil:
			t.Errorf("Check(%d) = %v, want nil", tc.want, err)
		case tc.message != "":
			wantKind(t, fmt.Sprintf("Check(%d)", tc.want), err, kms.KindUnprocessable)
			if err != nil && !strings.Contains(err.Error(), tc.message) {
				t.Errorf("Check(%d) = %q, want a message containing %q", tc.want, err, tc.message)
			}
		}
	}

	var seen []uint64
	err := tr.Scan(1, func(seq uint64, rec []byte) (bool, error) {
		if want := fmt.Sprintf("record %d", seq); string(rec) != want {
			return false, fmt.Errorf("record %d = %q, want %q", seq, rec, want)
		}
		seen = append(seen, seq)
		return true, nil
	})
	wantKind(t, "Scan(1) over a gap", err, kms.KindUnprocessable)
	if err != nil && !strings.Contains(err.Error(), "trail record 300 is missing") {
		t.Errorf("Scan(1) over a gap = %q, want a message naming record 300", err)
	}
	if len(seen) != 299 || seen[298] != 299 {
		t.Errorf("Scan(1) over a gap saw %d records, want the 299 before it", len(seen))
	}

	// Records cut from the start, and from the end.
	exec(t, c, "INSERT INTO kms_trail (seq, rec) VALUES (300, 'record 300'), (301, 'record 301')")
	tr = openStore(t, dbURL, Options{}).Trail()
	if err := tr.Check(590); err != nil {
		t.Errorf("Check(590) with the gap filled = %v, want nil", err)
	}
	err = tr.Check(600)
	wantKind(t, "Check(600) of a trail that ends at 590", err, kms.KindUnprocessable)
	if err != nil && !strings.Contains(err.Error(), "trail ends after record 590") {
		t.Errorf("Check(600) = %q, want a message saying the trail ends after record 590", err)
	}
	exec(t, c, "DELETE FROM kms_trail WHERE seq = 1")
	err = tr.Check(10)
	wantKind(t, "Check(10) without record 1", err, kms.KindUnprocessable)
	if err != nil && !strings.Contains(err.Error(), "trail record 1 is missing") {
		t.Errorf("Check(10) = %q, want a message naming record 1", err)
	}
	err = tr.Scan(1, func(uint64, []byte) (bool, error) { return true, nil })
	wantKind(t, "Scan(1) without record 1", err, kms.KindUnprocessable)
}

// failTrigger makes the database answer a write of kms_kv under one of the
// keys below, or of kms_trail with one of these records, with the error
// PostgreSQL gives for a full disk (53100) or a row too large (54000). It
// uses PL/pgSQL, which the Store itself does not.
func failTrigger(t testing.TB, dbURL string) {
	t.Helper()
	c := sqlConn(t, dbURL)
	exec(t, c, `CREATE FUNCTION kms_test_fail() RETURNS trigger LANGUAGE plpgsql AS $$
		DECLARE b BYTEA;
		BEGIN
			IF TG_TABLE_NAME = 'kms_kv' THEN b := NEW.key; ELSE b := NEW.rec; END IF;
			IF b = 'disk full' THEN RAISE EXCEPTION 'could not extend file: No space left on device' USING ERRCODE = '53100'; END IF;
			IF b = 'too large' THEN RAISE EXCEPTION 'row is too big' USING ERRCODE = '54000'; END IF;
			RETURN NEW;
		END $$`)
	exec(t, c, "CREATE TRIGGER kms_test_fail BEFORE INSERT OR UPDATE ON kms_kv FOR EACH ROW EXECUTE FUNCTION kms_test_fail()")
	exec(t, c, "CREATE TRIGGER kms_test_fail BEFORE INSERT OR UPDATE ON kms_trail FOR EACH ROW EXECUTE FUNCTION kms_test_fail()")
}

// TestDatabaseErrors: a full disk is NoSpace (and Writable says so), a row
// too large is TooLarge; nothing is written, and the Store writes again
// once the cause is gone.
func TestDatabaseErrors(t *testing.T) {
	dbURL := pgtest.URL(t)
	s := openStore(t, dbURL, Options{})
	failTrigger(t, dbURL)

	update := func(key string) error {
		return s.Update(t.Context(), func(tx kms.Txn) error {
			if err := tx.Set([]byte("other"), []byte("v")); err != nil {
				return err
			}
			return tx.Set([]byte(key), []byte("v"))
		})
	}
	wantKind(t, "Update on a full disk", update("disk full"), kms.KindNoSpace)
	wantKind(t, "Writable after a write met a full disk", s.Writable(t.Context()), kms.KindNoSpace)
	wantKind(t, "Append on a full disk", s.Trail().Append([][]byte{[]byte("ok"), []byte("disk full")}), kms.KindNoSpace)
	wantKind(t, "Update of a row too large", update("too large"), kms.KindTooLarge)
	wantKind(t, "UpdateNoSync of a row too large", s.UpdateNoSync(t.Context(), func(tx kms.Txn) error {
		return tx.Set([]byte("too large"), nil)
	}), kms.KindTooLarge)
	wantKind(t, "Append of a record too large", s.Trail().Append([][]byte{[]byte("too large")}), kms.KindTooLarge)
	if _, err := getKey(t, s, "other"); !errors.Is(err, kms.ErrNotFound) {
		t.Errorf("Get(other) after failed Updates = %v, want not found", err)
	}
	if n := s.Trail().Len(); n != 0 {
		t.Errorf("Trail().Len() after failed Appends = %d, want 0", n)
	}

	time.Sleep(noSpaceHold)
	if err := s.Writable(t.Context()); err != nil {
		t.Errorf("Writable %v after the write that met a full disk = %v, want nil (the next write tries)", noSpaceHold, err)
	}
	if err := update("fine"); err != nil {
		t.Errorf("Update = %v, want nil", err)
	}
}

// TestSizeLimits: keys up to MaxKeySize and values up to MaxValueSize are
// kept; longer ones are TooLarge before anything is sent; empty keys are
// Invalid.
func TestSizeLimits(t *testing.T) {
	s := openStore(t, pgtest.URL(t), Options{})
	key := make([]byte, MaxKeySize) // random, so that no compression helps
	rand.Read(key)
	val := make([]byte, MaxValueSize)
	rand.Read(val[:1<<20])
	err := s.Update(t.Context(), func(tx kms.Txn) error { return tx.Set(key, val) })
	if err != nil {
		t.Fatalf("Update(Set(a %d-byte key, a %d-byte value)) = %v, want nil", len(key), len(val), err)
	}
	if v, err := getKey(t, s, string(key)); err != nil || !bytes.Equal(v, val) {
		t.Errorf("Get(the %d-byte key) = %d bytes, %v; want the %d written", len(key), len(v), err, len(val))
	}

	tests := []struct {
		name string
		fn   func(tx kms.Txn) error
		kind kms.Kind
	}{
		{"Set(key too large)", func(tx kms.Txn) error { return tx.Set(make([]byte, MaxKeySize+1), nil) }, kms.KindTooLarge},
		{"Delete(key too large)", func(tx kms.Txn) error { return tx.Delete(make([]byte, MaxKeySize+1)) }, kms.KindTooLarge},
		{"Set(value too large)", func(tx kms.Txn) error { return tx.Set([]byte("k"), make([]byte, MaxValueSize+1)) }, kms.KindTooLarge},
		{"Set(empty key)", func(tx kms.Txn) error { return tx.Set(nil, []byte("v")) }, kms.KindInvalid},
		{"Delete(empty key)", func(tx kms.Txn) error { return tx.Delete([]byte{}) }, kms.KindInvalid},
		{"Get(empty key)", func(tx kms.Txn) error { _, err := tx.Get(nil); return err }, kms.KindInvalid},
	}
	for _, tc := range tests {
		var opErr error
		err := s.Update(t.Context(), func(tx kms.Txn) error {
			opErr = tc.fn(tx)
			return nil
		})
		if err != nil {
			t.Errorf("Update(%s) = %v, want nil", tc.name, err)
		}
		wantKind(t, tc.name, opErr, tc.kind)
	}
	if _, err := getKey(t, s, string(make([]byte, MaxKeySize+1))); !errors.Is(err, kms.ErrNotFound) {
		t.Errorf("Get(key too large) = %v, want not found", err)
	}
	wantKind(t, "Append(record too large)", s.Trail().Append([][]byte{make([]byte, MaxRecordSize+1)}), kms.KindTooLarge)
}

// TestViewSnapshotAtStart: a View's snapshot is the store as it was when
// View began, even if fn has read nothing before another transaction
// commits (the kms journal reads, after its Update, what a View opened
// before it saw, to undo the Update).
func TestViewSnapshotAtStart(t *testing.T) {
	s := openStore(t, pgtest.URL(t), Options{})
	setKey(t, s, "k", "before")
	err := s.View(t.Context(), func(tx kms.Txn) error {
		setKey(t, s, "k", "after")
		setKey(t, s, "new", "v")
		if v, err := tx.Get([]byte("k")); err != nil || string(v) != "before" {
			t.Errorf("Get(k) in a View begun before an Update = %q, %v; want %q, nil", v, err, "before")
		}
		if _, err := tx.Get([]byte("new")); !errors.Is(err, kms.ErrNotFound) {
			t.Errorf("Get(new) in a View begun before an Update = %v, want not found", err)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("View = %v, want nil", err)
	}
}

// TestBlindWriteHoldsNoLock: an Update that only writes takes no lock
// before its commit, so a concurrent Update of the same key commits
// meanwhile without waiting; and a blind write does not conflict (as with
// Badger): the later commit wins, at the first run.
func TestBlindWriteHoldsNoLock(t *testing.T) {
	s := openStore(t, pgtest.URL(t), Options{})
	setKey(t, s, "k", "0")
	runs := 0
	err := s.Update(t.Context(), func(tx kms.Txn) error {
		runs++
		if err := tx.Set([]byte("k"), []byte("mine")); err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		done := make(chan error)
		go func() {
			done <- s.Update(ctx, func(tx kms.Txn) error { return tx.Set([]byte("k"), []byte("theirs")) })
		}()
		if err := <-done; err != nil {
			t.Errorf("concurrent Update of a key another Update has set = %v, want nil", err)
		}
		return nil
	})
	if err != nil || runs != 1 {
		t.Errorf("Update = %v after %d runs, want nil after 1", err, runs)
	}
	if v, err := getKey(t, s, "k"); err != nil || string(v) != "mine" {
		t.Errorf("Get(k) = %q, %v; want %q, nil", v, err, "mine")
	}
}

// TestTxnAfterEnd: a Txn kept past its function fails, Invalid.
func TestTxnAfterEnd(t *testing.T) {
	s := openStore(t, pgtest.URL(t), Options{})
	var kept kms.Txn
	if err := s.Update(t.Context(), func(tx kms.Txn) error { kept = tx; return tx.Set([]byte("k"), []byte("v")) }); err != nil {
		t.Fatal(err)
	}
	_, err := kept.Get([]byte("k"))
	wantKind(t, "Get after Update returned", err, kms.KindInvalid)
	wantKind(t, "Set after Update returned", kept.Set([]byte("k"), []byte("v")), kms.KindInvalid)
	wantKind(t, "Scan after Update returned", kept.Scan(kms.ScanOptions{}, func(k, v []byte) (bool, error) { return true, nil }), kms.KindInvalid)
}

// TestScanPages: scans cross page boundaries, whether a page ends at 256
// rows or at its byte budget, in both directions, while fn reads and
// writes in the same transaction.
func TestScanPages(t *testing.T) {
	s := openStore(t, pgtest.URL(t), Options{})
	const n = 700
	big := bytes.Repeat([]byte("x"), 100<<10) // ten of these fill a page's budget
	err := s.Update(t.Context(), func(tx kms.Txn) error {
		for i := range n {
			v := []byte(fmt.Sprint(i))
			if i%20 == 7 {
				v = append(v, big...)
			}
			if err := tx.Set(fmt.Appendf(nil, "p/%04d", i), v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Update = %v, want nil", err)
	}
	for _, reverse := range []bool{false, true} {
		var keys []string
		err := s.Update(t.Context(), func(tx kms.Txn) error {
			keys = keys[:0]
			return tx.Scan(kms.ScanOptions{Prefix: []byte("p/"), Reverse: reverse}, func(k, v []byte) (bool, error) {
				i := len(keys)
				if reverse {
					i = n - 1 - i
				}
				if want := fmt.Sprintf("p/%04d", i); string(k) != want || !bytes.HasPrefix(v, []byte(fmt.Sprint(i))) {
					return false, fmt.Errorf("item %d = %q, want %q", len(keys), k, want)
				}
				keys = append(keys, string(k))
				// The transaction is usable in fn: a read, and a
				// write outside the range.
				if _, err := tx.Get(k); err != nil {
					return false, err
				}
				return true, tx.Set([]byte("seen/"+string(k)), nil)
			})
		})
		if err != nil || len(keys) != n {
			t.Errorf("Scan(reverse %v) = %v after %d keys, want nil after %d", reverse, err, len(keys), n)
		}
	}
}

// TestSynchronousCommit: the Store's connections commit durably even when
// the URL asks otherwise.
func TestSynchronousCommit(t *testing.T) {
	dbURL := pgtest.URL(t)
	for _, u := range []string{dbURL, dbURL + "&synchronous_commit=off"} {
		s := openStore(t, u, Options{})
		var v string
		if err := s.pool.QueryRow(t.Context(), "SHOW synchronous_commit").Scan(&v); err != nil {
			t.Fatal(err)
		}
		if v != "on" {
			t.Errorf("synchronous_commit of a connection of Open(%s) = %q, want on", u, v)
		}
	}
	s := openStore(t, dbURL+"&synchronous_commit=remote_apply", Options{})
	var v string
	if err := s.pool.QueryRow(t.Context(), "SHOW synchronous_commit").Scan(&v); err != nil {
		t.Fatal(err)
	}
	if v != "remote_apply" {
		t.Errorf("synchronous_commit with the URL's remote_apply = %q, want remote_apply", v)
	}

	// What each kind of Update commits with, as a trigger sees it when
	// the write reaches the database.
	s = openStore(t, dbURL, Options{})
	c := sqlConn(t, dbURL)
	exec(t, c, `CREATE FUNCTION kms_test_sync() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			NEW.value := convert_to(current_setting('synchronous_commit'), 'UTF8');
			RETURN NEW;
		END $$`)
	exec(t, c, "CREATE TRIGGER kms_test_sync BEFORE INSERT OR UPDATE ON kms_kv FOR EACH ROW EXECUTE FUNCTION kms_test_sync()")
	for _, tc := range []struct {
		name   string
		update func(context.Context, func(kms.Txn) error) error
		want   string
	}{
		{"Update", s.Update, "on"},
		{"UpdateNoSync", s.UpdateNoSync, "off"},
		{"Update after UpdateNoSync", s.Update, "on"},
	} {
		if err := tc.update(t.Context(), func(tx kms.Txn) error { return tx.Set([]byte("k"), nil) }); err != nil {
			t.Fatalf("%s = %v, want nil", tc.name, err)
		}
		if got, err := getKey(t, s, "k"); err != nil || string(got) != tc.want {
			t.Errorf("%s committed with synchronous_commit %q (%v), want %q", tc.name, got, err, tc.want)
		}
	}
}

// TestOptions: MaxConns sizes the pool; the URL's pool_max_conns counts
// when it is zero; a pool of fewer than 2 connections and a URL that does
// not parse are Invalid, and the latter's message hides the password.
func TestOptions(t *testing.T) {
	dbURL := pgtest.URL(t)
	tests := []struct {
		url  string
		opts Options
		want int32
	}{
		{dbURL, Options{}, DefaultMaxConns},
		{dbURL, Options{MaxConns: 3}, 3},
		{dbURL + "&pool_max_conns=7", Options{}, 7},
		{dbURL + "&pool_max_conns=7", Options{MaxConns: 2}, 2},
	}
	for _, tc := range tests {
		s := openStore(t, tc.url, tc.opts)
		if got := s.pool.Config().MaxConns; got != tc.want {
			t.Errorf("Open(%s, %+v): pool of %d connections, want %d", tc.url, tc.opts, got, tc.want)
		}
	}
	for _, tc := range []struct {
		url  string
		opts Options
	}{
		{dbURL, Options{MaxConns: -1}},
		{dbURL, Options{MaxConns: 1}},
		{dbURL + "&pool_max_conns=1", Options{}},
	} {
		s, err := Open(t.Context(), tc.url, tc.opts)
		if err == nil {
			s.Close()
		}
		wantKind(t, fmt.Sprintf("Open(%s, %+v)", tc.url, tc.opts), err, kms.KindInvalid)
	}
	for _, bad := range []string{
		"postgres://kms:hunter2-secret@127.0.0.1:notaport/db",
		"postgres://kms:hunter2-secret@127.0.0.1:5432/db?sslmode=notamode",
		"postgres://kms:hunter2%2Dsecret@127.0.0.1:notaport/db",
		"postgres://kms:hunter2-secret@[::1/db",
		"host=127.0.0.1 port=notaport user=kms password=hunter2-secret",
	} {
		_, err := Open(t.Context(), bad, Options{})
		wantKind(t, "Open(a URL that does not parse)", err, kms.KindInvalid)
		if err == nil {
			continue
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Open(a URL that does not parse) = %q, which contains the password", err)
		}
		if !strings.Contains(err.Error(), "invalid database URL: ") {
			t.Errorf("Open(a URL that does not parse) = %q, want a message saying the URL is invalid, and why", err)
		}
	}
}

// TestService runs a kms Service on the Store: bootstrap, a ring, an
// encrypt and its decrypt, the activity chain; then again after a restart
// on the same database.
func TestService(t *testing.T) {
	dbURL := pgtest.URL(t)
	mk := kms.GenerateMasterKey()
	ctx := context.Background()

	st := openStore(t, dbURL, Options{})
	svc, err := kms.New(st, kms.Options{MasterKey: mk})
	if err != nil {
		t.Fatalf("kms.New = %v, want nil", err)
	}
	b, err := svc.Bootstrap(ctx, "")
	if err != nil || !b.Created {
		t.Fatalf("Bootstrap = %+v, %v; want a created key", b, err)
	}
	p, err := svc.Authenticate(ctx, b.Secret)
	if err != nil {
		t.Fatalf("Authenticate = %v, want nil", err)
	}
	root := kms.WithPrincipal(ctx, p)
	if _, err := svc.CreateKeyRing(root, kms.CreateKeyRingInput{Name: "pg"}); err != nil {
		t.Fatalf("CreateKeyRing = %v, want nil", err)
	}
	enc, err := svc.Encrypt(root, kms.EncryptInput{RingName: "pg"})
	if err != nil {
		t.Fatalf("Encrypt = %v, want nil", err)
	}
	dec, err := svc.Decrypt(root, kms.DecryptInput{Hash: enc.Hash, Header: enc.Header})
	if err != nil {
		t.Fatalf("Decrypt = %v, want nil", err)
	}
	if dec.RingID != enc.RingID || dec.Key.ID != enc.Key.ID || !reflect.DeepEqual(dec.Key.KeyData, enc.Key.KeyData) {
		t.Errorf("Decrypt = ring %s key %s, want the encrypt's ring %s key %s with the same key data", dec.RingID, dec.Key.ID, enc.RingID, enc.Key.ID)
	}
	res, err := svc.VerifyActivityChain(ctx)
	if err != nil || res.Records == 0 || res.Records != st.Trail().Len() {
		t.Errorf("VerifyActivityChain = %+v, %v; want all %d records, nil", res, err, st.Trail().Len())
	}
	if err := svc.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	st.Close()

	// A restart: a new Store and Service on the same database.
	st = openStore(t, dbURL, Options{})
	svc, err = kms.New(st, kms.Options{MasterKey: mk})
	if err != nil {
		t.Fatalf("kms.New after a restart = %v, want nil", err)
	}
	defer svc.Close()
	if b, err := svc.Bootstrap(ctx, ""); err != nil || b.Created {
		t.Errorf("Bootstrap after a restart = %+v, %v; want nothing created", b, err)
	}
	p, err = svc.Authenticate(ctx, b.Secret)
	if err != nil {
		t.Fatalf("Authenticate after a restart = %v, want nil", err)
	}
	root = kms.WithPrincipal(ctx, p)
	dec2, err := svc.Decrypt(root, kms.DecryptInput{Hash: enc.Hash, Header: enc.Header})
	if err != nil || dec2.Key.ID != enc.Key.ID || !reflect.DeepEqual(dec2.Key.KeyData, enc.Key.KeyData) {
		t.Errorf("Decrypt after a restart = %v; want the key of the encrypt", err)
	}
	res2, err := svc.VerifyActivityChain(ctx)
	if err != nil || res2.Records <= res.Records {
		t.Errorf("VerifyActivityChain after a restart = %+v, %v; want more than %d records, nil", res2, err, res.Records)
	}
}

// BenchmarkEncrypt is the root package's BenchmarkEncrypt on this Store:
// in-process Encrypt with its durable activity record, from 64 concurrent
// callers (b.SetParallelism with GOMAXPROCS 2), on the PostgreSQL server
// of pgtest (or KMS_TEST_POSTGRES_URL's).
func BenchmarkEncrypt(b *testing.B) {
	ctx := context.Background()
	st := openStore(b, pgtest.URL(b), Options{})
	svc, err := kms.New(st, kms.Options{MasterKey: kms.GenerateMasterKey()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { svc.Close() })
	boot, err := svc.Bootstrap(ctx, "")
	if err != nil {
		b.Fatal(err)
	}
	p, err := svc.Authenticate(ctx, boot.Secret)
	if err != nil {
		b.Fatal(err)
	}
	root := kms.WithPrincipal(ctx, p)
	if _, err := svc.CreateKeyRing(root, kms.CreateKeyRingInput{Name: "bench"}); err != nil {
		b.Fatal(err)
	}
	b.SetParallelism(32)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := svc.Encrypt(root, kms.EncryptInput{RingName: "bench"}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// TestExclusive: while an Exclusive Store is open, a second Store on the
// same database, Exclusive or not, is refused (Conflict); while a Store
// that is not Exclusive is open (a kmsd node), an Exclusive one is; each
// opens once the other is closed.
func TestExclusive(t *testing.T) {
	u := pgtest.URL(t)
	refused := func(what string, opts Options, want string) {
		t.Helper()
		st, err := Open(context.Background(), u, opts)
		if err == nil {
			st.Close()
			t.Fatalf("%s = nil error, want Conflict", what)
		}
		if kms.ErrorKind(err) != kms.KindConflict || !strings.Contains(err.Error(), want) {
			t.Fatalf("%s = %v, want Conflict saying %q", what, err, want)
		}
	}
	first := openStore(t, u, Options{Exclusive: true})
	refused("a second Exclusive Open", Options{Exclusive: true}, "another process has this database open")
	refused("Open beside an Exclusive Store", Options{}, "kmsd rekey or migrate holds this database")
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	node := openStore(t, u, Options{})
	openStore(t, u, Options{}).Close() // Stores that are not Exclusive share the database
	refused("Exclusive Open beside a Store", Options{Exclusive: true}, "another process has this database open")
	if err := node.Close(); err != nil {
		t.Fatal(err)
	}
	openStore(t, u, Options{Exclusive: true}).Close()
}

// TestOpenWaitsForALockLetGo: a Store opens when the lock another
// process held is let go within holdGrace (a session whose connection was
// closed under it keeps its locks until the server sees it end), and one
// Exclusive Open waits the same way for a Store that is closing.
func TestOpenWaitsForALockLetGo(t *testing.T) {
	u := pgtest.URL(t)
	ctx := context.Background()
	other, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	if _, err := other.Exec(ctx, "SELECT pg_advisory_lock($1)", int64(exclusiveLock)); err != nil {
		t.Fatal(err)
	}
	unlocked := make(chan struct{})
	go func() {
		defer close(unlocked)
		time.Sleep(holdGrace / 4)
		other.Exec(ctx, "SELECT pg_advisory_unlock_all()")
	}()
	st := openStore(t, u, Options{}) // fails at once without the grace
	<-unlocked                       // other is the goroutine's until then
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		time.Sleep(holdGrace / 4)
		st.Close()
	}()
	openStore(t, u, Options{Exclusive: true}).Close()
	<-closed
}

// TestDisplaced: a Store whose Watch connection is lost while an
// Exclusive Store takes the database (kmsd rekey run while the node was
// cut off) refuses every write from then on, even after the Exclusive
// Store is closed, while a Store that took the lock back at once goes on.
func TestDisplaced(t *testing.T) {
	u := pgtest.URL(t)
	s := openStore(t, u, Options{})
	stop := s.Watch([][]byte{[]byte("w/")}, func([][]byte) {})
	defer stop()
	setKey(t, s, "k", "v")
	c := sqlConn(t, u)
	// Cut the Store's Watch connection, which holds its share of the
	// lock, and take the lock exclusively before it is back.
	deadline := time.Now().Add(10 * time.Second)
	for {
		exec(t, c, "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND mode = 'ShareLock' AND pid <> pg_backend_pid()")
		var got bool
		if err := c.QueryRow(t.Context(), "SELECT pg_try_advisory_lock($1)", int64(exclusiveLock)).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the Store's shared lock was never let go")
		}
	}
	// The Watch connects again, finds the lock taken and displaces the
	// Store.
	for !s.hold.displaced.Load() {
		if time.Now().After(deadline) {
			t.Fatal("the Store was not displaced")
		}
		time.Sleep(10 * time.Millisecond)
	}
	exec(t, c, "SELECT pg_advisory_unlock($1)", int64(exclusiveLock))
	err := s.Update(t.Context(), func(tx kms.Txn) error { return tx.Set([]byte("k"), []byte("w")) })
	wantKind(t, "Update of a displaced Store", err, kms.KindUnavailable)
	if !strings.Contains(err.Error(), "restart kmsd") {
		t.Errorf("Update of a displaced Store = %v, want a message saying to restart kmsd", err)
	}
	wantKind(t, "Writable of a displaced Store", s.Writable(t.Context()), kms.KindUnavailable)
	wantKind(t, "Append of a displaced Store", s.Trail().Append([][]byte{[]byte("r")}), kms.KindUnavailable)
	if got, err := getKey(t, s, "k"); err != nil || string(got) != "v" {
		t.Errorf("k = %q, %v after the refused Update; want v", got, err)
	}
}
