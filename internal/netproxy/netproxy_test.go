package netproxy_test

import (
	"context"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/ringkms/kms/internal/netproxy"
	"github.com/ringkms/kms/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// proxied starts a proxy in front of a fresh database and returns it, the
// database's URL through the proxy, and its direct URL.
func proxied(t *testing.T) (p *netproxy.Proxy, through, direct string) {
	t.Helper()
	direct = pgtest.URL(t)
	cfg, err := pgx.ParseConfig(direct)
	if err != nil {
		t.Fatalf("ParseConfig(%s): %v", direct, err)
	}
	if strings.HasPrefix(cfg.Host, "/") {
		t.Fatalf("database %s is on a Unix socket; a TCP proxy needs a TCP server", direct)
	}
	p, err = netproxy.New(cfg.Host + ":" + strconv.Itoa(int(cfg.Port)))
	if err != nil {
		t.Fatalf("netproxy.New: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	u, err := url.Parse(direct)
	if err != nil {
		t.Fatalf("url.Parse(%s): %v", direct, err)
	}
	u.Host = p.Addr()
	return p, u.String(), direct
}

func connect(t *testing.T, ctx context.Context, u string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatalf("connect %s: %v", u, err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func ping(ctx context.Context, c *pgx.Conn) error {
	var one int
	return c.QueryRow(ctx, "SELECT 1").Scan(&one)
}

func TestPass(t *testing.T) {
	_, through, _ := proxied(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := connect(t, ctx, through)
	for i := range 3 {
		if err := ping(ctx, c); err != nil {
			t.Fatalf("SELECT 1 through the proxy (%d): %v", i, err)
		}
	}
}

// TestRefuse: Refuse breaks open connections and new ones; Pass lets new
// ones through again.
func TestRefuse(t *testing.T) {
	p, through, _ := proxied(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := connect(t, ctx, through)
	p.SetMode(netproxy.Refuse)
	if err := ping(ctx, c); err == nil {
		t.Errorf("SELECT 1 on a connection open when refusing: no error")
	}
	if c, err := pgx.Connect(ctx, through); err == nil {
		c.Close(ctx)
		t.Errorf("connect while refusing: no error")
	}
	p.SetMode(netproxy.Pass)
	if err := ping(ctx, connect(t, ctx, through)); err != nil {
		t.Errorf("SELECT 1 on a new connection after Pass: %v", err)
	}
}

// TestHold: nothing passes while holding, neither on open connections nor
// on new ones; what was held goes through once the proxy passes again.
func TestHold(t *testing.T) {
	p, through, _ := proxied(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	timedOut := connect(t, ctx, through)
	released := connect(t, ctx, through)
	p.SetMode(netproxy.Hold)

	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	start := time.Now()
	err := ping(short, timedOut)
	cancelShort()
	if err == nil {
		t.Errorf("SELECT 1 while holding: no error")
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("SELECT 1 while holding with a 300ms deadline returned after %v", d)
	}
	short, cancelShort = context.WithTimeout(ctx, 300*time.Millisecond)
	if c, err := pgx.Connect(short, through); err == nil {
		c.Close(ctx)
		t.Errorf("connect while holding: no error")
	}
	cancelShort()

	done := make(chan error, 1)
	go func() { done <- ping(ctx, released) }()
	select {
	case err := <-done:
		t.Fatalf("SELECT 1 while holding returned %v, want it held", err)
	case <-time.After(300 * time.Millisecond):
	}
	p.SetMode(netproxy.Pass)
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("SELECT 1 held and released: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("SELECT 1 held and released: no answer after 20s")
	}
	if err := ping(ctx, connect(t, ctx, through)); err != nil {
		t.Errorf("SELECT 1 on a new connection after Pass: %v", err)
	}
}

// TestCutCommit: a transaction whose COMMIT is cut before it reaches the
// server is not there; one cut after it reached the server is, though
// the client saw an error in both cases. The hook fires once.
func TestCutCommit(t *testing.T) {
	for _, tc := range []struct {
		name  string
		where netproxy.Cut
		want  int
	}{
		{"commit not sent", netproxy.CutBefore, 0},
		{"commit sent, answer lost", netproxy.CutAfter, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, through, direct := proxied(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			d := connect(t, ctx, direct)
			if _, err := d.Exec(ctx, "CREATE TABLE t (k int primary key)"); err != nil {
				t.Fatalf("create table: %v", err)
			}

			cut := p.CutOn(pgtest.QueryMessage("commit"), tc.where)
			c := connect(t, ctx, through)
			tx, err := c.Begin(ctx)
			if err != nil {
				t.Fatalf("begin: %v", err)
			}
			if _, err := tx.Exec(ctx, "INSERT INTO t VALUES (1)"); err != nil {
				t.Fatalf("insert: %v", err)
			}
			if err := tx.Commit(ctx); err == nil {
				t.Errorf("commit through a cut connection: no error")
			}
			select {
			case <-cut:
			case <-time.After(30 * time.Second):
				t.Fatalf("cut not complete after 30s")
			}
			var n int
			if err := d.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil || n != tc.want {
				t.Errorf("rows after the cut = %d, %v; want %d", n, err, tc.want)
			}

			// Disarmed: the next commit goes through.
			c = connect(t, ctx, through)
			if _, err := c.Exec(ctx, "BEGIN"); err != nil {
				t.Fatalf("begin: %v", err)
			}
			if _, err := c.Exec(ctx, "INSERT INTO t VALUES (2)"); err != nil {
				t.Fatalf("insert: %v", err)
			}
			if _, err := c.Exec(ctx, "commit"); err != nil {
				t.Errorf("commit after the cut fired: %v", err)
			}
		})
	}
}

// TestCutThenRefuse: CutOnThen switches the proxy at the cut: the other
// open connection and every new one are refused from then on, until Pass.
func TestCutThenRefuse(t *testing.T) {
	p, through, _ := proxied(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	other := connect(t, ctx, through)
	c := connect(t, ctx, through)
	cut := p.CutOnThen(pgtest.QueryMessage("commit"), netproxy.CutAfter, netproxy.Refuse)
	if _, err := c.Exec(ctx, "BEGIN"); err != nil {
		t.Fatalf("begin: %v", err)
	}
	if _, err := c.Exec(ctx, "commit"); err == nil {
		t.Errorf("commit through a cut connection: no error")
	}
	<-cut
	if p.Mode() != netproxy.Refuse {
		t.Errorf("mode after the cut = %v, want %v", p.Mode(), netproxy.Refuse)
	}
	if err := ping(ctx, other); err == nil {
		t.Errorf("SELECT 1 on the other connection after the cut: no error")
	}
	if c, err := pgx.Connect(ctx, through); err == nil {
		c.Close(ctx)
		t.Errorf("connect after the cut: no error")
	}
	p.SetMode(netproxy.Pass)
	if err := ping(ctx, connect(t, ctx, through)); err != nil {
		t.Errorf("SELECT 1 on a new connection after Pass: %v", err)
	}
}

// TestHoldOn: the hook holds every connection once a client has sent the
// pattern, after the server got it: the server ran the statement (its
// advisory lock is held) while its answer waits in the proxy, and other
// connections are held too. Pass releases the answer.
func TestHoldOn(t *testing.T) {
	p, through, direct := proxied(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, other, d := connect(t, ctx, through), connect(t, ctx, through), connect(t, ctx, direct)
	const lock = "SELECT pg_advisory_lock(4242)"
	held := p.HoldOn([]byte(lock))
	if err := ping(ctx, c); err != nil {
		t.Fatalf("SELECT 1 with the hook armed: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.Exec(ctx, lock)
		done <- err
	}()
	select {
	case <-held:
	case <-time.After(20 * time.Second):
		t.Fatalf("not holding 20s after the pattern was sent")
	}
	var locked bool
	waitLock := time.Now().Add(20 * time.Second)
	for !locked && time.Now().Before(waitLock) {
		if err := d.QueryRow(ctx, "SELECT count(*) > 0 FROM pg_locks WHERE locktype = 'advisory' AND objid = 4242 AND granted").Scan(&locked); err != nil {
			t.Fatalf("read pg_locks: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !locked {
		t.Errorf("the server did not take the lock whose statement went through before the hold")
	}
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	if err := ping(short, other); err == nil {
		t.Errorf("SELECT 1 on another connection while holding: no error")
	}
	cancelShort()
	select {
	case err := <-done:
		t.Fatalf("the statement that set off the hold returned %v while holding", err)
	case <-time.After(300 * time.Millisecond):
	}
	p.SetMode(netproxy.Pass)
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("the statement that set off the hold, released: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("the statement that set off the hold: no answer 20s after Pass")
	}
}
