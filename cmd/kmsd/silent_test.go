package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/ringkms/kms/internal/netproxy"
	"github.com/ringkms/kms/internal/pgtest"
	"github.com/ringkms/kms/store/pgstore"
)

// outcome is one call of the load of TestSilentNode.
type outcome struct {
	name       string
	code       int // 0: no answer
	start, end time.Time
}

// createRing asks for a ring named name, and says how it went; it never
// fails the test, so that it may run outside the test's goroutine.
func createRing(client *http.Client, base, key, name string) outcome {
	o := outcome{name: name, start: time.Now()}
	body, _ := json.Marshal(map[string]any{"name": name})
	req, _ := http.NewRequest("POST", base+"/ks/keyrings", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	if resp, err := client.Do(req); err == nil {
		o.code = resp.StatusCode
		resp.Body.Close()
	}
	o.end = time.Now()
	return o
}

// TestSilentNode: of two nodes on one database, B reaches it through a
// proxy that, under a light load on both, holds B's traffic (the
// connections stay open and nothing passes, as with a frozen host or a
// partition). A keeps answering, each call within the store timeout; B's
// calls sent during the hold end in 503 within twice the store timeout
// (one whose COMMIT was in flight waits for its outcome), and its /healthz
// answers 503; once the traffic passes again, B serves by itself; and
// every ring either node acknowledged exists afterwards, and no ring whose
// creation answered an error does.
func TestSilentNode(t *testing.T) {
	const timeout = pgstore.DefaultQueryTimeout
	dbURL := pgtest.URL(t)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	p, err := netproxy.New(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	u.Host = p.Addr()
	e := env{"KMS_MASTER_KEY": newKey(), "KMS_BOOTSTRAP_API_KEY": "silent-bootstrap-secret-0123456789", "KMS_STORE": dbURL}
	root := e["KMS_BOOTSTRAP_API_KEY"]
	a := startRun(t, []string{"-data", t.TempDir(), "-addr", "127.0.0.1:0"}, e)
	eb := env{"KMS_MASTER_KEY": e["KMS_MASTER_KEY"], "KMS_BOOTSTRAP_API_KEY": root, "KMS_STORE": u.String()}
	b := startRun(t, []string{"-data", t.TempDir(), "-addr", "127.0.0.1:0"}, eb)

	client := &http.Client{Timeout: 30 * time.Second}
	var (
		mu   sync.Mutex
		outs = map[string][]outcome{}
		wg   sync.WaitGroup
	)
	stop := make(chan struct{})
	for _, n := range []struct {
		name string
		s    *server
	}{{"a", a}, {"b", b}} {
		// Two callers a node: a call whose COMMIT met the hold waits for
		// the network (its outcome is unknown until then), and the other
		// caller's calls are those that must end in 503 meanwhile.
		for w := range 2 {
			wg.Go(func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					case <-time.After(50 * time.Millisecond):
					}
					o := createRing(client, n.s.url, root, fmt.Sprintf("%s%d-%d", n.name, w, i))
					mu.Lock()
					outs[n.name] = append(outs[n.name], o)
					mu.Unlock()
				}
			})
		}
	}

	time.Sleep(time.Second)
	p.SetMode(netproxy.Hold)
	heldAt := time.Now()
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
	// The hold lasts past the bound of a call that waited behind B's
	// batch in doubt (twice the timeout), so that calls of B both begin
	// and end within it.
	time.Sleep(time.Until(heldAt.Add(2*timeout + 2*time.Second)))
	p.SetMode(netproxy.Pass)
	passedAt := time.Now()
	took := waitHealthy(t, b, timeout+10*time.Second)
	t.Logf("B healthy %s after its traffic passes again", took)
	if code, body := call(t, client, "POST", b.url+"/ks/keyrings", root, map[string]any{"name": "b-after"}); code != 200 {
		t.Errorf("create ring on B after its traffic passes again = %d %v", code, body)
	}
	time.Sleep(500 * time.Millisecond)
	close(stop)
	wg.Wait()

	var acked []string
	var slowestA, slowestB time.Duration
	for _, o := range outs["a"] {
		d := o.end.Sub(o.start)
		if o.end.After(heldAt) && o.start.Before(passedAt) {
			slowestA = max(slowestA, d)
			if o.code != 200 || d > timeout {
				t.Errorf("A's call %s while B's traffic was held = %d after %s, want 200 within %s", o.name, o.code, d, timeout)
			}
		}
	}
	bHeld := 0
	for _, o := range outs["b"] {
		d := o.end.Sub(o.start)
		if o.start.After(heldAt) && o.end.Before(passedAt) {
			bHeld++
			slowestB = max(slowestB, d)
			if o.code != 503 {
				t.Errorf("B's call %s while its traffic was held = %d, want 503", o.name, o.code)
			}
		}
		// A call sent before the hold may have had its COMMIT in flight:
		// it waits for its outcome, which its answer must agree with
		// (checked below); the others end within the bound.
		if o.start.After(heldAt) && o.start.Before(passedAt) && d > 2*timeout+3*time.Second {
			t.Errorf("B's call %s while its traffic was held took %s, want at most %s", o.name, d, 2*timeout+3*time.Second)
		}
	}
	if bHeld == 0 {
		t.Errorf("no call of B began and ended while its traffic was held")
	}
	t.Logf("slowest call during the hold: A %s, B %s (%d calls of B)", slowestA, slowestB, bHeld)
	for _, n := range []string{"a", "b"} {
		for _, o := range outs[n] {
			if o.code == 200 {
				acked = append(acked, o.name)
			}
		}
	}
	acked = append(acked, "b-after")
	for _, name := range acked {
		if code, body := call(t, client, "GET", a.url+"/ks/keyrings/"+name, root, nil); code != 200 {
			t.Errorf("acknowledged ring %s afterwards = %d %v", name, code, body)
		}
	}
	// An error answer means nothing was done.
	failed := 0
	for _, n := range []string{"a", "b"} {
		for _, o := range outs[n] {
			if o.code != 200 {
				failed++
				if code, _ := call(t, client, "GET", a.url+"/ks/keyrings/"+o.name, root, nil); code != 404 {
					t.Errorf("ring %s, whose creation answered %d, afterwards = %d, want 404", o.name, o.code, code)
				}
			}
		}
	}
	t.Logf("%d rings acknowledged, all found; %d answered an error, none found", len(acked), failed)
}
