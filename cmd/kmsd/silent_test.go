package main

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/ringkms/kms/internal/kmsdtest"
	"github.com/ringkms/kms/internal/netproxy"
	"github.com/ringkms/kms/internal/pgtest"
)

// outcome is one call of the load of TestSilentNode.
type outcome struct {
	node       string // "a" or "b"
	kind       string // "ring" (a ring creation, named name), "lim" (an encrypt with lim), "rotate"
	name       string
	code       int // 0: no answer
	start, end time.Time
}

func (o outcome) took() time.Duration { return o.end.Sub(o.start) }

// send posts body to path of the node at base and keeps in o how it went
// (a code of 0 for no answer); it never fails the test, so that it may
// run outside the test's goroutine.
func send(client *http.Client, base, key, path string, o outcome, body any) outcome {
	o.start = time.Now()
	o.code, _, _ = kmsdtest.Do(client, "POST", base+path, key, body)
	o.end = time.Now()
	return o
}

// silentLoad keeps the calls of TestSilentNode's callers, each named
// after its node and its kind.
type silentLoad struct {
	client *http.Client
	key    string
	wg     sync.WaitGroup

	mu   sync.Mutex
	outs []outcome
}

// caller starts a caller that sends one kind of call to the node at base
// (a ring creation, or an encrypt with the ring lim) until stop is
// closed, 50 ms apart; name tells it from the others.
func (l *silentLoad) caller(base, node, name, kind string, stop <-chan struct{}) {
	l.wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			o := outcome{node: node, kind: kind, name: fmt.Sprintf("%s-%s-%d", name, kind, i)}
			if kind == "ring" {
				o = send(l.client, base, l.key, "/ks/keyrings", o, map[string]any{"name": o.name})
			} else {
				o = send(l.client, base, l.key, "/ks/encrypt", o, map[string]any{"ringname": "lim"})
			}
			l.keep(o)
		}
	})
}

func (l *silentLoad) keep(o outcome) {
	l.mu.Lock()
	l.outs = append(l.outs, o)
	l.mu.Unlock()
}

// TestSilentNode: of two nodes on one database, with -store-timeout T, B
// reaches it through a proxy that holds B's traffic (the connections stay
// open and nothing passes, as with a frozen host or a partition) from the
// moment B sends the COMMIT of a rotation of the ring lim, which has a
// maxEncryptCount: that rotation's outcome is unknown until the traffic
// passes again, and B's encrypts with lim take turns with it. Then:
//
//   - A answers 200 throughout, each call within T;
//   - every call sent to B while its traffic is held (ring creations,
//     encrypts with lim) ends in 503 within 2T and a little, T/2 here
//     (docs/OPERATIONS.md, "A silent node"), so that the hold, 4T, sees
//     some of each begin and end; B's /healthz answers 503;
//   - every call of B, the rotation whose COMMIT met the hold included,
//     ends within 2T after the traffic passes again, and the rotation
//     is answered 200 (its COMMIT reached the server);
//   - B serves by itself afterwards; every ring either node acknowledged
//     exists, and no ring whose creation answered an error does.
//
// The bounds are multiples of T, which is large beside a loaded machine's
// delays; the calls that must end within the hold begin after it began,
// so that none of them can have ridden in the batch whose COMMIT met it.
func TestSilentNode(t *testing.T) {
	const (
		timeout = 3 * time.Second
		during  = 2*timeout + timeout/2 // a call sent to B during the hold ends within it
		after   = 2 * timeout           // every call of B ends within it after the hold
		hold    = 4 * timeout
	)
	dbURL := pgtest.URL(t)
	p, heldURL := pgtest.Proxy(t, dbURL) // closed after the nodes stop, which write as they do
	e := env{"KMS_MASTER_KEY": newKey(), "KMS_BOOTSTRAP_API_KEY": "silent-bootstrap-secret-0123456789", "KMS_STORE": dbURL}
	root := e["KMS_BOOTSTRAP_API_KEY"]
	args := []string{"-data", t.TempDir(), "-addr", "127.0.0.1:0", "-store-timeout", timeout.String()}
	a := startRun(t, args, e)
	eb := env{"KMS_MASTER_KEY": e["KMS_MASTER_KEY"], "KMS_BOOTSTRAP_API_KEY": root, "KMS_STORE": heldURL}
	b := startRun(t, []string{"-data", t.TempDir(), "-addr", "127.0.0.1:0", "-store-timeout", timeout.String()}, eb)

	client := &http.Client{Timeout: 30 * time.Second}
	if code, body := call(t, client, "POST", a.url+"/ks/keyrings", root, map[string]any{"name": "lim"}); code != 200 {
		t.Fatalf("create ring lim = %d %v", code, body)
	}
	config := map[string]any{"ringname": "lim", "config": map[string]any{"algos": map[string]any{"aes256": map[string]any{"maxEncryptCount": 1000}}}}
	if code, body := call(t, client, "PUT", a.url+"/ks/config", root, config); code != 200 {
		t.Fatalf("set lim's maxEncryptCount = %d %v", code, body)
	}
	l := &silentLoad{client: client, key: root}
	stop, stopEarly := make(chan struct{}), make(chan struct{})
	for w := range 2 {
		l.caller(a.url, "a", fmt.Sprint("a", w), "ring", stop)
		l.caller(a.url, "a", fmt.Sprint("a", w), "lim", stop)
	}
	// B serves a while, then does nothing but the rotation, so that the
	// COMMIT the proxy holds at is the rotation's.
	var early silentLoad
	early.client, early.key = client, root
	early.caller(b.url, "b", "b-early", "ring", stopEarly)
	early.caller(b.url, "b", "b-early", "lim", stopEarly)
	time.Sleep(time.Second)
	close(stopEarly)
	early.wg.Wait()
	held := p.HoldOn(pgtest.PreparedMessage("COMMIT"))
	rotated := make(chan outcome, 1)
	go func() {
		rotated <- send(client, b.url, root, "/ks/rotate", outcome{node: "b", kind: "rotate", name: "lim"}, map[string]any{"ringname": "lim"})
	}()
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatal("B sent no COMMIT for its rotation within 10 s; has pgstore's COMMIT changed?")
	}
	heldAt := time.Now()
	for w := range 2 {
		l.caller(b.url, "b", fmt.Sprint("b", w), "ring", stop)
		l.caller(b.url, "b", fmt.Sprint("b", w), "lim", stop)
	}

	// B's /healthz answers 503 once its connections have been found
	// silent, and for as long as the traffic is held, each time within
	// about a second (docs/OPERATIONS.md): the bound of the store's
	// ping, not the store timeout of a read.
	time.Sleep(timeout)
	const healthBound = 2 * time.Second
	for range 3 {
		start := time.Now()
		code, body := call(t, client, "GET", b.url+"/healthz", "", nil)
		if code != 503 {
			t.Errorf("/healthz of B %s after its traffic was held = %d %v, want 503", time.Since(heldAt).Round(time.Millisecond), code, body)
		}
		if took := time.Since(start); took > healthBound {
			t.Errorf("/healthz of B while its traffic is held answered in %s, want within %s", took.Round(time.Millisecond), healthBound)
		}
		time.Sleep(time.Second)
	}
	if code, body := call(t, client, "GET", a.url+"/healthz", "", nil); code != 200 {
		t.Errorf("/healthz of A while B's traffic is held = %d %v, want 200", code, body)
	}
	time.Sleep(time.Until(heldAt.Add(hold)))
	p.SetMode(netproxy.Pass)
	passedAt := time.Now()
	took := waitHealthy(t, b, timeout+10*time.Second)
	t.Logf("B healthy %s after its traffic passes again", took)
	if code, body := call(t, client, "POST", b.url+"/ks/keyrings", root, map[string]any{"name": "b-after"}); code != 200 {
		t.Errorf("create ring on B after its traffic passes again = %d %v", code, body)
	}
	time.Sleep(500 * time.Millisecond)
	close(stop)
	l.wg.Wait()
	rotation := <-rotated
	l.keep(rotation)

	l.outs = append(l.outs, early.outs...)
	var slowestA, slowestB time.Duration
	heldCalls := map[string]int{} // B's calls that began and ended during the hold, by kind
	for _, o := range l.outs {
		if o.node == "a" {
			if o.end.After(heldAt) && o.start.Before(passedAt) {
				slowestA = max(slowestA, o.took())
				if o.code != 200 || o.took() > timeout {
					t.Errorf("A's call %s while B's traffic was held = %d after %s, want 200 within %s", o.name, o.code, o.took(), timeout)
				}
			}
			continue
		}
		if o.start.After(heldAt) && o.start.Before(passedAt) {
			slowestB = max(slowestB, o.took())
			if o.took() > during {
				t.Errorf("B's call %s, sent %s into the hold, took %s, want at most %s", o.name,
					o.start.Sub(heldAt).Round(time.Millisecond), o.took().Round(time.Millisecond), during)
			}
			if o.end.Before(passedAt) {
				heldCalls[o.kind]++
				if o.code != 503 {
					t.Errorf("B's call %s while its traffic was held = %d, want 503", o.name, o.code)
				}
			}
		}
		if o.end.After(passedAt.Add(after)) {
			t.Errorf("B's call %s (%s to %s after the hold began) ended %s after the traffic passed again, want within %s", o.name,
				o.start.Sub(heldAt).Round(time.Millisecond), o.end.Sub(heldAt).Round(time.Millisecond),
				o.end.Sub(passedAt).Round(time.Millisecond), after)
		}
	}
	t.Logf("slowest call during the hold: A %s, B %s (B's calls that began and ended within it: %v); the rotation ended %s after the traffic passed again",
		slowestA.Round(time.Millisecond), slowestB.Round(time.Millisecond), heldCalls, rotation.end.Sub(passedAt).Round(time.Millisecond))
	for _, kind := range []string{"ring", "lim"} {
		if heldCalls[kind] == 0 {
			t.Errorf("no call of B of kind %s began and ended while its traffic was held", kind)
		}
	}
	if rotation.code != 200 {
		t.Errorf("B's rotation, whose COMMIT reached the server as the hold began, = %d, want 200", rotation.code)
	}

	// Every ring acknowledged exists; no ring whose creation answered an
	// error does: an error answer means nothing was done.
	acked, failed := []string{"b-after"}, 0
	for _, o := range l.outs {
		if o.kind != "ring" {
			continue
		}
		want := 404
		if o.code == 200 {
			acked, want = append(acked, o.name), 200
		} else {
			failed++
		}
		if code, _ := call(t, client, "GET", a.url+"/ks/keyrings/"+o.name, root, nil); code != want {
			t.Errorf("ring %s, whose creation answered %d, afterwards = %d, want %d", o.name, o.code, code, want)
		}
	}
	t.Logf("%d rings acknowledged, all found; %d answered an error, none found", len(acked), failed)
}
