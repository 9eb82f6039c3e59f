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

// proxied starts a proxy in front of a fresh database and returns a
// context that ends after timeout (or with the test), the proxy, the
// database's URL through the proxy, and its direct URL.
func proxied(t *testing.T, timeout time.Duration) (ctx context.Context, p *netproxy.Proxy, through, direct string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
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
	return ctx, p, u.String(), direct
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

// wantNoConnect fails t when a connection to u opens; when says when,
// for the message.
func wantNoConnect(t *testing.T, ctx context.Context, u, when string) {
	t.Helper()
	if c, err := pgx.Connect(ctx, u); err == nil {
		c.Close(context.Background())
		t.Errorf("connect %s: no error", when)
	}
}

// refusedUntilPass checks that p, which refuses, breaks the connection c
// open through it and refuses new ones, and that once set to Pass it
// lets a new one through; when says when it refuses, for the messages.
func refusedUntilPass(t *testing.T, ctx context.Context, p *netproxy.Proxy, c *pgx.Conn, through, when string) {
	t.Helper()
	if err := ping(ctx, c); err == nil {
		t.Errorf("SELECT 1 on a connection open %s: no error", when)
	}
	wantNoConnect(t, ctx, through, when)
	p.SetMode(netproxy.Pass)
	if err := ping(ctx, connect(t, ctx, through)); err != nil {
		t.Errorf("SELECT 1 on a new connection after Pass: %v", err)
	}
}

// heldUntilPass checks that the answer of the call what, which comes on
// done, is held while p holds (300ms of it), and that it comes, without
// an error, once p is set to Pass.
func heldUntilPass(t *testing.T, p *netproxy.Proxy, done <-chan error, what string) {
	t.Helper()
	select {
	case err := <-done:
		t.Fatalf("%s returned %v while holding, want it held", what, err)
	case <-time.After(300 * time.Millisecond):
	}
	p.SetMode(netproxy.Pass)
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("%s, held and released: %v", what, err)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: no answer 20s after Pass", what)
	}
}

func TestPass(t *testing.T) {
	ctx, _, through, _ := proxied(t, 30*time.Second)
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
	ctx, p, through, _ := proxied(t, 30*time.Second)
	c := connect(t, ctx, through)
	p.SetMode(netproxy.Refuse)
	refusedUntilPass(t, ctx, p, c, through, "while refusing")
}

// TestBreak: Break, here while holding, breaks open connections, drops
// what they held, and lets new ones through.
func TestBreak(t *testing.T) {
	ctx, p, through, _ := proxied(t, 30*time.Second)
	c := connect(t, ctx, through)
	p.SetMode(netproxy.Hold)
	done := make(chan error, 1)
	go func() { done <- ping(ctx, c) }()
	time.Sleep(100 * time.Millisecond)
	p.Break()
	if err := <-done; err == nil {
		t.Errorf("SELECT 1 held on a connection that Break broke: no error")
	}
	if m := p.Mode(); m != netproxy.Pass {
		t.Errorf("Mode() after Break = %v, want Pass", m)
	}
	if err := ping(ctx, connect(t, ctx, through)); err != nil {
		t.Errorf("SELECT 1 on a new connection after Break: %v", err)
	}
}

// TestHold: nothing passes while holding, neither on open connections nor
// on new ones; what was held goes through once the proxy passes again.
func TestHold(t *testing.T) {
	ctx, p, through, _ := proxied(t, time.Minute)
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
	wantNoConnect(t, short, through, "while holding")
	cancelShort()

	done := make(chan error, 1)
	go func() { done <- ping(ctx, released) }()
	heldUntilPass(t, p, done, "SELECT 1")
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
			ctx, p, through, direct := proxied(t, time.Minute)
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
	ctx, p, through, _ := proxied(t, time.Minute)
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
	refusedUntilPass(t, ctx, p, other, through, "after the cut")
}

// TestHoldOn: the hook holds every connection once a client has sent the
// pattern, after the server got it: the server ran the statement (its
// advisory lock is held) while its answer waits in the proxy, and other
// connections are held too. Pass releases the answer.
func TestHoldOn(t *testing.T) {
	ctx, p, through, direct := proxied(t, time.Minute)
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
	heldUntilPass(t, p, done, "the statement that set off the hold")
}
