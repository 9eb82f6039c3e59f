package pgstore

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/pgtest"
)

// setReadOnly makes the database of dbURL read-only, as a hot standby or a
// primary demoted is, or a primary again (on false): it sets
// default_transaction_read_only for the database's sessions and ends
// those open (but the caller's), and the pools of stores, so that they
// reconnect to sessions with the new setting. (A standby's promotion
// ends no session; the setting of a session cannot be changed from
// outside it.)
func setReadOnly(t testing.TB, admin *pgx.Conn, on bool, stores ...*Store) {
	t.Helper()
	var db string
	if err := admin.QueryRow(t.Context(), "SELECT current_database()").Scan(&db); err != nil {
		t.Fatal(err)
	}
	q := "ALTER DATABASE " + pgx.Identifier{db}.Sanitize() + " RESET default_transaction_read_only"
	if on {
		q = "ALTER DATABASE " + pgx.Identifier{db}.Sanitize() + " SET default_transaction_read_only = on"
	}
	exec(t, admin, q)
	exec(t, admin, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")
	for _, s := range stores {
		s.pool.Reset()
	}
}

// wantReadOnly checks that err says the database is read-only, with kind
// Unavailable.
func wantReadOnly(t testing.TB, what string, err error) {
	t.Helper()
	if kms.ErrorKind(err) != kms.KindUnavailable || !strings.HasPrefix(kms.ErrorMessage(err), readOnlyMessage) {
		t.Errorf("%s = %v (kind %v), want kind Unavailable with message %q", what, err, kms.ErrorKind(err), readOnlyMessage)
	}
}

// TestReadOnlyServer: on a read-only server, writes and Writable answer
// Unavailable saying so, reads still answer, a Store opens on a database
// that has the schema and says why it cannot on one without; and once the
// server takes writes again, the same Store writes, without reopening.
func TestReadOnlyServer(t *testing.T) {
	url := pgtest.URL(t)
	s := openStore(t, url, Options{})
	setKey(t, s, "a", "1")
	admin := sqlConn(t, url)
	setReadOnly(t, admin, true, s)

	err := s.Update(t.Context(), func(tx kms.Txn) error { return tx.Set([]byte("b"), []byte("2")) })
	wantReadOnly(t, "Update on a read-only server", err)
	wantReadOnly(t, "Writable on a read-only server", s.Writable(t.Context()))
	// Reads keep answering, and do not make Writable forget.
	for range 3 {
		if v, err := getKey(t, s, "a"); err != nil || string(v) != "1" {
			t.Fatalf("Get(a) on a read-only server = %q, %v, want 1, nil", v, err)
		}
	}
	time.Sleep(writableTTL + 50*time.Millisecond)
	wantReadOnly(t, "Writable on a read-only server, asked again", s.Writable(t.Context()))
	tr := s.Trail().(*Trail)
	err = tr.AppendIn(t.Context(), func(kms.Txn) (uint64, [][]byte, error) {
		return tr.Len() + 1, [][]byte{[]byte("r")}, nil
	})
	wantReadOnly(t, "Trail.AppendIn on a read-only server", err)
	wantReadOnly(t, "Trail.Append on a read-only server", tr.Append([][]byte{[]byte("r")}))

	// A node starting on a read-only server opens a store that exists.
	s2 := openStore(t, url, Options{})
	wantReadOnly(t, "Writable of a Store opened on a read-only server", s2.Writable(t.Context()))
	if v, err := getKey(t, s2, "a"); err != nil || string(v) != "1" {
		t.Fatalf("Get(a) of a Store opened on a read-only server = %q, %v, want 1, nil", v, err)
	}
	// One without the schema cannot be made there.
	empty := pgtest.URL(t)
	setReadOnly(t, sqlConn(t, empty), true)
	_, err = Open(t.Context(), empty, Options{})
	wantReadOnly(t, "Open of an empty database on a read-only server", err)
	if !strings.Contains(kms.ErrorMessage(err), "no kmsd schema") {
		t.Errorf("Open of an empty database on a read-only server = %q, want it to say the schema is missing", kms.ErrorMessage(err))
	}

	setReadOnly(t, admin, false, s, s2) // promoted
	waitNil(t, 5*time.Second, "Writable of both Stores after promotion", func() error {
		return errors.Join(s.Writable(t.Context()), s2.Writable(t.Context()))
	})
	setKey(t, s, "b", "2")
	setKey(t, s2, "c", "3")
}

// TestIsReadOnly: what a hot standby answers (which a test cannot get
// from a database made read-only) is recognised, and translated to
// Unavailable with the read-only message, never to Internal.
func TestIsReadOnly(t *testing.T) {
	pe := func(code, msg string) error { return &pgconn.PgError{Severity: "ERROR", Code: code, Message: msg} }
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"write in a read-only transaction", pe("25006", "cannot execute INSERT in a read-only transaction"), true},
		{"LISTEN during recovery", pe("25006", "cannot execute LISTEN during recovery"), true},
		{"serializable on a hot standby", pe("0A000", "cannot use serializable mode in a hot standby"), true},
		{"read-write during recovery", pe("0A000", "cannot set transaction read-write mode during recovery"), true},
		{"serializable refused in another language", beginFailed(pe("0A000", "kann serialisierbaren Modus nicht verwenden")), true},
		{"serializable refused, wrapped", beginFailed(&standbyBegin{pe("0A000", "nicht unterstützt")}), true},
		{"another feature not supported", pe("0A000", "cannot use ORDER BY here"), false},
		{"a conflict at BEGIN", beginFailed(pe("40001", "could not serialize access")), false},
		{"a conflict", pe("40001", "could not serialize access"), false},
		{"not a server error", errors.New("cannot use serializable mode in a hot standby"), false},
		{"nil", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := isReadOnly(tt.err); got != tt.want {
				t.Errorf("isReadOnly(%v) = %v, want %v", tt.err, got, tt.want)
			}
			if !tt.want || tt.err == nil {
				return
			}
			s := &Store{}
			wantReadOnly(t, "translate", s.translate(context.Background(), "commit", tt.err))
			if !s.health.unproven.Load() {
				t.Errorf("translate(%v) left Writable trusting the database's answers", tt.err)
			}
		})
	}
}
