package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ringkms/kms/internal/pgtest"
)

// readOnlyMessage is the start of what kmsd answers on a read-only
// server (store/pgstore's message).
const readOnlyMessage = "service unavailable: the database is read-only (a standby, or a primary that was demoted); kmsd waits for a primary"

// setReadOnly makes the database of url read-only for its new sessions,
// as a hot standby is, or takes writes again (on false, as a standby
// promoted), and ends its sessions so that kmsd reconnects to sessions
// with the new setting.
func setReadOnly(t *testing.T, url string, on bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	var db string
	if err := c.QueryRow(ctx, "SELECT current_database()").Scan(&db); err != nil {
		t.Fatal(err)
	}
	q := "ALTER DATABASE " + pgx.Identifier{db}.Sanitize() + " RESET default_transaction_read_only"
	if on {
		q = "ALTER DATABASE " + pgx.Identifier{db}.Sanitize() + " SET default_transaction_read_only = on"
	}
	for _, q := range []string{"SET default_transaction_read_only = off", q, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"} {
		if _, err := c.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// TestRunReadOnlyDatabase: kmsd started on a read-only server (a
// standby) does not exit: /healthz and writes answer 503 saying the
// database is read-only, and once the server takes writes, the same
// process serves them, without a restart. On a database without a store
// yet, it waits the same way, and bootstraps once it can.
func TestRunReadOnlyDatabase(t *testing.T) {
	for _, tt := range []struct {
		name  string
		fresh bool // no store in the database yet
	}{{"with a store", false}, {"empty", true}} {
		t.Run(tt.name, func(t *testing.T) {
			url := pgtest.URL(t)
			e := env{"KMS_MASTER_KEY": newKey(), "KMS_BOOTSTRAP_API_KEY": "readonly-bootstrap-secret-0123456789", "KMS_STORE": url}
			root := e["KMS_BOOTSTRAP_API_KEY"]
			args := []string{"-data", t.TempDir(), "-addr", "127.0.0.1:0"}
			if !tt.fresh {
				s := startRun(t, args, e)
				if code, body := call(t, nil, "POST", s.url+"/ks/keyrings", root, map[string]any{"name": "before"}); code != 200 {
					t.Fatalf("create ring = %d %v", code, body)
				}
				s.stop(t)
			}
			setReadOnly(t, url, true)
			s := startRun(t, args, e)
			for _, c := range []struct{ method, path string }{{"GET", "/healthz"}, {"POST", "/ks/keyrings"}} {
				code, body := call(t, nil, c.method, s.url+c.path, root, map[string]any{"name": "during"})
				if msg, _ := body["message"].(string); code != 503 || !strings.HasPrefix(msg, readOnlyMessage) {
					t.Errorf("%s %s on a read-only database = %d %v, want 503 saying %q", c.method, c.path, code, body, readOnlyMessage)
				}
			}
			select {
			case err := <-s.done:
				t.Fatalf("kmsd on a read-only database exited: %v; stderr:\n%s", err, s.stderr)
			default:
			}

			setReadOnly(t, url, false) // promoted
			waitFor(t, 20*time.Second, "/healthz to answer 200 once the database takes writes", func() bool {
				code, _ := call(t, nil, "GET", s.url+"/healthz", "", nil)
				return code == 200
			})
			var code int
			var body map[string]any
			waitFor(t, 10*time.Second, "a ring to be created once the database takes writes", func() bool {
				code, body = call(t, nil, "POST", s.url+"/ks/keyrings", root, map[string]any{"name": "after"})
				return code != 503
			})
			if code != 200 {
				t.Fatalf("create ring after promotion = %d %v", code, body)
			}
			s.stop(t)
		})
	}
}
