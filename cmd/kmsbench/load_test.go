package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ringkms/kms/internal/kmsdtest"
	"github.com/ringkms/kms/internal/pgtest"
)

// fakeServer answers POSTs: every fifth request (in arrival order) a 500,
// the others a 200. It counts the requests and checks the bearer key.
type fakeServer struct {
	*httptest.Server
	hits    atomic.Int64
	badAuth atomic.Int64
}

func newFakeServer(t testing.TB, delay time.Duration) *fakeServer {
	t.Helper()
	f := &fakeServer{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := f.hits.Add(1)
		// Read the body, as a real handler does: only then does the
		// server notice a client that goes away.
		io.Copy(io.Discard, r.Body)
		if r.Header.Get("Authorization") != "Bearer k" {
			f.badAuth.Add(1)
		}
		if delay > 0 {
			select {
			case <-time.After(delay):
			case <-r.Context().Done():
				return
			}
		}
		if n%5 == 0 {
			w.WriteHeader(http.StatusInternalServerError)
			w.Write([]byte(`{"message":"internal error"}`))
			return
		}
		w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(f.Close)
	return f
}

func newTestLoad(url string, c int, d time.Duration, n int64, more ...string) *load {
	urls := append([]string{url}, more...)
	work := []*workload{{mode: "encrypt", produce: request{path: "/ks/encrypt", body: []byte(`{"ringname":"r"}`)}}}
	return &load{
		calls:       newHTTPCalls(newClient(c, 5*time.Second, nil), urls, "k", work),
		nodes:       len(urls),
		concurrency: c,
		duration:    d,
		requests:    n,
	}
}

func TestLoadCountsErrorsByStatus(t *testing.T) {
	f := newFakeServer(t, 0)
	st := newTestLoad(f.URL, 4, time.Minute, 100).run(context.Background())
	if st.requests != 100 || f.hits.Load() != 100 {
		t.Fatalf("requests = %d, server saw %d; want 100 and 100", st.requests, f.hits.Load())
	}
	if st.errors != 20 || st.byStatus["500"] != 20 || len(st.byStatus) != 1 {
		t.Errorf("errors = %d, by status %v; want 20, all 500", st.errors, st.byStatus)
	}
	if st.hist.Count() != 100 {
		t.Errorf("latencies recorded = %d, want 100 (every answer)", st.hist.Count())
	}
	if f.badAuth.Load() != 0 {
		t.Errorf("%d requests without the bearer key", f.badAuth.Load())
	}
}

// TestLoadSpreadsClientsOverNodes loads two servers as the nodes of one
// target: both get requests, and the counts of each node are what it saw.
func TestLoadSpreadsClientsOverNodes(t *testing.T) {
	a, b := newFakeServer(t, time.Millisecond), newFakeServer(t, time.Millisecond)
	st := newTestLoad(a.URL, 4, time.Minute, 200, b.URL).run(context.Background())
	if st.requests != 200 || len(st.nodes) != 2 {
		t.Fatalf("requests = %d, nodes %d; want 200 over 2 nodes", st.requests, len(st.nodes))
	}
	for i, f := range []*fakeServer{a, b} {
		hits := f.hits.Load()
		n := st.nodes[i]
		// The fake server fails every fifth request it gets.
		if hits == 0 || n.requests != hits || n.errors != hits/5 {
			t.Errorf("node %d: counted %d requests, %d errors; it saw %d requests (and failed %d); want all counted, and some",
				i+1, n.requests, n.errors, hits, hits/5)
		}
	}
	if st.errors != st.nodes[0].errors+st.nodes[1].errors {
		t.Errorf("errors = %d, the nodes' add up to %d", st.errors, st.nodes[0].errors+st.nodes[1].errors)
	}
}

func TestLoadRespectsN(t *testing.T) {
	f := newFakeServer(t, 0)
	for _, tt := range []struct {
		name string
		c    int
		n    int64
	}{
		{"fewer requests than clients", 8, 3},
		{"one client", 1, 7},
		{"many", 16, 1000},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := f.hits.Load()
			st := newTestLoad(f.URL, tt.c, time.Minute, tt.n).run(context.Background())
			if st.requests != tt.n || f.hits.Load()-before != tt.n {
				t.Errorf("requests = %d, server saw %d; want %d", st.requests, f.hits.Load()-before, tt.n)
			}
		})
	}
}

func TestLoadRespectsDuration(t *testing.T) {
	f := newFakeServer(t, time.Millisecond)
	const d = 300 * time.Millisecond
	t0 := time.Now()
	st := newTestLoad(f.URL, 4, d, 0).run(context.Background())
	took := time.Since(t0)
	if took < d || took > d+2*time.Second {
		t.Errorf("run took %v, want about %v", took, d)
	}
	if st.elapsed < d || st.requests == 0 || st.requests != f.hits.Load() {
		t.Errorf("elapsed %v, requests %d, server saw %d; want >= %v and all counted", st.elapsed, st.requests, f.hits.Load(), d)
	}
	// -n larger than what fits in -d: -d ends it.
	st = newTestLoad(f.URL, 2, d, 1_000_000).run(context.Background())
	if st.requests >= 1_000_000 || st.elapsed > d+2*time.Second {
		t.Errorf("with -n 1e6: %d requests in %v, want -d to end it", st.requests, st.elapsed)
	}
}

func TestLoadStopsOnCancel(t *testing.T) {
	f := newFakeServer(t, time.Hour) // every request hangs until cancelled
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	t0 := time.Now()
	st := newTestLoad(f.URL, 8, time.Hour, 0).run(ctx)
	if took := time.Since(t0); took > 5*time.Second {
		t.Errorf("run took %v after cancel at 200ms", took)
	}
	if st.requests != 0 || st.errors != 0 {
		t.Errorf("requests %d, errors %d; want requests cut short not counted", st.requests, st.errors)
	}
}

func TestLoadTransportErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now
	st := newTestLoad(url, 2, time.Minute, 10).run(context.Background())
	if st.requests != 10 || st.errors != 10 || st.byStatus["transport"] != 10 || st.hist.Count() != 0 {
		t.Errorf("requests %d, errors %d, by status %v, latencies %d; want 10 transport errors, no latency",
			st.requests, st.errors, st.byStatus, st.hist.Count())
	}
}

func TestLoadProgress(t *testing.T) {
	f := newFakeServer(t, time.Millisecond)
	var out kmsdtest.Buffer
	l := newTestLoad(f.URL, 2, 1300*time.Millisecond, 0)
	l.progress, l.label = &out, "fake"
	l.run(context.Background())
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "fake ") || !strings.Contains(lines[0], "ops/s") || !strings.Contains(lines[0], "errors") {
		t.Errorf("progress = %q, want one line: fake, elapsed, ops/s, errors", out.String())
	}
	out = kmsdtest.Buffer{}
	l.tty = true
	l.run(context.Background())
	if got := out.String(); !strings.HasPrefix(got, "\rfake ") || !strings.HasSuffix(got, "\n") {
		t.Errorf("tty progress = %q, want \\r-rewritten line ended by a newline", got)
	}
}

func TestBaselineHandler(t *testing.T) {
	srv := httptest.NewServer(baselineHandler())
	t.Cleanup(srv.Close)
	for _, tt := range []struct {
		name, method, body string
		status             int
	}{
		{"encrypt body", "POST", `{"ringname":"r"}`, 200},
		{"decrypt body", "POST", `{"hash":"h","header":"x"}`, 200},
		{"not JSON", "POST", `{`, 400},
		{"GET", "GET", ``, 405},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, srv.URL+"/ks/encrypt", strings.NewReader(tt.body))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var out map[string]any
			if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != tt.status {
				t.Errorf("status %d, body %v (%v); want %d and a JSON object", resp.StatusCode, out, err, tt.status)
			}
		})
	}
}

// TestMain makes the test binary the baseline server when startBaseline
// runs it as one, as the kmsbench binary is. The tests share one
// PostgreSQL server (pgtest) and one kmsd binary (testKmsd).
func TestMain(m *testing.M) {
	if os.Getenv(baselineEnv) == "1" {
		baselineMain()
		os.Exit(0)
	}
	code := pgtest.Main(m)
	if builtKmsd.dir != "" {
		os.RemoveAll(builtKmsd.dir)
	}
	os.Exit(code)
}

// TestStartBaseline starts the baseline server as a process, calls it and
// stops it.
func TestStartBaseline(t *testing.T) {
	srv, err := startBaseline(context.Background(), nil)
	if err != nil {
		t.Fatalf("startBaseline = %v", err)
	}
	resp, err := http.Post(srv.url+"/ks/encrypt", "application/json", strings.NewReader(`{"ringname":"r"}`))
	if err != nil {
		srv.terminate()
		t.Fatal(err)
	}
	var out struct {
		RingName string `json:"ringname"`
	}
	json.NewDecoder(resp.Body).Decode(&out)
	resp.Body.Close()
	if resp.StatusCode != 200 || out.RingName != "r" {
		t.Errorf("POST to the baseline server = %d, ringname %q; want 200 and r", resp.StatusCode, out.RingName)
	}
	http.DefaultClient.CloseIdleConnections()
	if err := srv.terminate(); err != nil {
		t.Errorf("terminate = %v, want nil: the server stops cleanly on SIGTERM", err)
	}
	if _, err := http.Post(srv.url+"/ks/encrypt", "application/json", strings.NewReader(`{}`)); err == nil {
		t.Errorf("the baseline server still answers after terminate")
	}
}

// TestMeasureTakesTurns checks that two targets are loaded in rounds that
// take turns (kmsd, baseline, kmsd, ...), each with its share of -n and
// its own workload, that each target's stats add up its rounds, and that
// the CPU time is read for a target with a process (here, the test's
// own), and only for it.
func TestMeasureTakesTurns(t *testing.T) {
	var (
		mu    sync.Mutex
		order []string // the target of each request, in arrival order
	)
	var wrongBody atomic.Int64
	server := func(name string) *httptest.Server {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			if string(body) != `{"ringname":"`+name+`"}` {
				wrongBody.Add(1)
			}
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
			w.Write([]byte(`{"ok":true}`))
		}))
		t.Cleanup(s.Close)
		return s
	}
	a, b := server("a"), server("b")
	o := &options{concurrency: 4, duration: time.Minute, requests: 31, embedded: true, rounds: 3}
	client := newClient(o.concurrency, 5*time.Second, nil)
	bn := &bench{o: o, client: client, stderr: io.Discard}
	calls := func(url, ring string) *httpCalls {
		return newHTTPCalls(client, []string{url}, "", []*workload{{mode: "encrypt", produce: newEncrypt(ring, false, 1)}})
	}
	all, err := bn.measure(context.Background(), []target{
		{name: "a", urls: []string{a.URL}, pids: []int{os.Getpid()}, calls: calls(a.URL, "a")},
		{name: "b", urls: []string{b.URL}, calls: calls(b.URL, "b")},
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, st := range all {
		if st.requests != 31 || st.errors != 0 || st.hist.Count() != 31 || st.elapsed <= 0 {
			t.Errorf("target %d: %d requests, %d errors, %d latencies, elapsed %v; want 31 requests, all answered", i, st.requests, st.errors, st.hist.Count(), st.elapsed)
		}
	}
	if n := wrongBody.Load(); n != 0 {
		t.Errorf("%d requests carried the other target's workload", n)
	}
	if _, err := readCPU(os.Getpid()); err == nil && (len(all[0].cpu) != 1 || all[0].cpu[0] < 0) {
		t.Errorf("CPU of target a = %v, want the time of its one process", all[0].cpu)
	}
	if all[1].cpu != nil {
		t.Errorf("CPU of target b = %v, want none: it has no process", all[1].cpu)
	}
	// The arrival order is runs of one target: a 11, b 11, a 10, b 10,
	// a 10, b 10.
	var runs []string
	for i, name := range order {
		if i == 0 || name != order[i-1] {
			runs = append(runs, name)
		}
	}
	if got := strings.Join(runs, ""); got != "ababab" {
		t.Errorf("targets in arrival order took turns as %q, want ababab", got)
	}
}

func TestShare(t *testing.T) {
	for _, tt := range []struct {
		n      int64
		rounds int
		want   []int64
	}{
		{0, 3, []int64{0, 0, 0}},
		{31, 3, []int64{11, 10, 10}},
		{5, 5, []int64{1, 1, 1, 1, 1}},
		{7, 1, []int64{7}},
	} {
		var got []int64
		for r := range tt.rounds {
			got = append(got, share(tt.n, tt.rounds, r))
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("share(%d, %d, ...) = %v, want %v", tt.n, tt.rounds, got, tt.want)
		}
	}
}
