package pgstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/pgtest"
)

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
