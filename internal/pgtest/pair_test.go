package pgtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestPairFailover: a row committed on the primary is on the standby once
// the primary has been killed and the standby promoted, and the
// multi-host URL reaches whichever of the two takes writes.
func TestPairFailover(t *testing.T) {
	p := StartPair(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	multi, err := pgx.Connect(ctx, p.MultiURL())
	if err != nil {
		t.Fatalf("connect %s: %v", p.MultiURL(), err)
	}
	if got, want := multi.PgConn().Conn().RemoteAddr().String(), p.PrimaryAddr(); got != want {
		t.Errorf("multi-host URL before failover reached %s, want the primary %s", got, want)
	}
	if _, err := multi.Exec(ctx, "CREATE TABLE t (k int primary key)"); err != nil {
		t.Fatalf("create table: %v", err)
	}
	if _, err := multi.Exec(ctx, "INSERT INTO t VALUES (1)"); err != nil {
		t.Fatalf("insert: %v", err)
	}

	// The standby serves reads and refuses writes while it is one.
	standby, err := pgx.Connect(ctx, p.StandbyURL())
	if err != nil {
		t.Fatalf("connect standby: %v", err)
	}
	defer standby.Close(context.Background())
	// Synchronous commit (on) waits until the standby has flushed the
	// commit, not until it has applied it: the row shows soon after.
	var n int
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		err = standby.QueryRow(ctx, "SELECT count(*) FROM t WHERE k = 1").Scan(&n)
		if err == nil && n == 1 || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || n != 1 {
		t.Errorf("standby: count = %d, %v; want 1 (synchronous commit)", n, err)
	}
	_, err = standby.Exec(ctx, "INSERT INTO t VALUES (2)")
	if pe := (*pgconn.PgError)(nil); !errors.As(err, &pe) || pe.Code != "25006" {
		t.Errorf("insert on standby = %v, want read_only_sql_transaction (25006)", err)
	}

	p.KillPrimary()
	if _, err := multi.Exec(ctx, "SELECT 1"); err == nil {
		t.Errorf("query on a connection to the killed primary succeeded")
	}
	multi.Close(context.Background())
	if c, err := pgx.Connect(ctx, p.PrimaryURL()); err == nil {
		c.Close(context.Background())
		t.Errorf("connect to killed primary succeeded")
	}

	p.Promote()
	after, err := pgx.Connect(ctx, p.MultiURL())
	if err != nil {
		t.Fatalf("connect %s after failover: %v", p.MultiURL(), err)
	}
	defer after.Close(context.Background())
	if got, want := after.PgConn().Conn().RemoteAddr().String(), p.StandbyAddr(); got != want {
		t.Errorf("multi-host URL after failover reached %s, want the promoted standby %s", got, want)
	}
	if err := after.QueryRow(ctx, "SELECT count(*) FROM t WHERE k = 1").Scan(&n); err != nil || n != 1 {
		t.Errorf("promoted standby: count = %d, %v; want 1", n, err)
	}
	if _, err := after.Exec(ctx, "INSERT INTO t VALUES (2)"); err != nil {
		t.Errorf("insert on promoted standby: %v", err)
	}
}

// TestMultiURLParses: pgx takes both hosts and the session attribute.
func TestMultiURLParses(t *testing.T) {
	p := &Pair{db: "d", primary: &server{port: 5001}, standby: &server{port: 5002}}
	cfg, err := pgx.ParseConfig(p.MultiURL())
	if err != nil {
		t.Fatalf("ParseConfig(%s): %v", p.MultiURL(), err)
	}
	if cfg.Port != 5001 || len(cfg.Fallbacks) != 1 || cfg.Fallbacks[0].Port != 5002 {
		t.Errorf("ParseConfig(%s): port %d, fallbacks %+v; want 5001 then 5002", p.MultiURL(), cfg.Port, cfg.Fallbacks)
	}
	if cfg.ValidateConnect == nil {
		t.Errorf("ParseConfig(%s): no ValidateConnect, want target_session_attrs=read-write honoured", p.MultiURL())
	}
}

// TestQueryMessage: the bytes pgx writes for tx.Commit.
func TestQueryMessage(t *testing.T) {
	got := string(QueryMessage("commit"))
	want := "Q\x00\x00\x00\x0bcommit\x00"
	if got != want {
		t.Errorf("QueryMessage(commit) = %q, want %q", got, want)
	}
}
