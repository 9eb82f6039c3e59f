package pgtest

import (
	"context"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/ringkms/kms/internal/netproxy"
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

// TestProxy: the URL through the proxy reaches the same database, and
// the proxy's mode decides whether it does.
func TestProxy(t *testing.T) {
	direct := URL(t)
	p, through := Proxy(t, direct)
	if through == direct {
		t.Fatalf("Proxy URL = %s, the direct one", through)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, through)
	if err != nil {
		t.Fatalf("connect through the proxy: %v", err)
	}
	defer conn.Close(ctx)
	var db string
	if err := conn.QueryRow(ctx, "SELECT current_database()").Scan(&db); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(direct)
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.TrimPrefix(u.Path, "/"); db != want {
		t.Errorf("database through the proxy = %s, want %s", db, want)
	}
	if p.Mode() != netproxy.Pass {
		t.Errorf("Proxy's mode = %v, want Pass", p.Mode())
	}
}
