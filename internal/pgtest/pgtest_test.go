package pgtest

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// TestURL: each test gets its own empty database, on which it can write.
func TestURL(t *testing.T) {
	a, b := URL(t), URL(t)
	if a == b {
		t.Fatalf("URL twice = %s, want two databases", a)
	}
	for _, u := range []string{a, b} {
		conn, err := pgx.Connect(context.Background(), u)
		if err != nil {
			t.Fatalf("connect %s: %v", u, err)
		}
		if _, err := conn.Exec(context.Background(), "CREATE TABLE t (k int primary key)"); err != nil {
			t.Fatalf("create table in %s: %v", u, err)
		}
		conn.Close(context.Background())
	}
}
