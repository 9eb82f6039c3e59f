package pgstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

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

// newService runs a Service on st with opts, as a kmsd node does, closed
// at the end of t.
func newService(t testing.TB, st *Store, opts kms.Options) *kms.Service {
	t.Helper()
	svc, err := kms.New(st, opts)
	if err != nil {
		t.Fatalf("kms.New = %v, want nil", err)
	}
	t.Cleanup(func() { svc.Close() })
	return svc
}

// rootOf returns the context of a caller of svc with the root API key
// secret.
func rootOf(t testing.TB, svc *kms.Service, secret string) context.Context {
	t.Helper()
	p, err := svc.Authenticate(context.Background(), secret)
	if err != nil {
		t.Fatalf("Authenticate = %v, want nil", err)
	}
	return kms.WithPrincipal(context.Background(), p)
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
	root := rootOf(t, svc, b.Secret)
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
	root = rootOf(t, svc, b.Secret)
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
	svc := newService(b, openStore(b, pgtest.URL(b), Options{}), kms.Options{MasterKey: kms.GenerateMasterKey()})
	boot, err := svc.Bootstrap(ctx, "")
	if err != nil {
		b.Fatal(err)
	}
	root := rootOf(b, svc, boot.Secret)
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
