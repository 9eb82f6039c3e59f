package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ringkms/kms/internal/kmsdtest"
	"github.com/ringkms/kms/internal/pgtest"
)

// builtKmsd is the kmsd binary that the tests share, built once;
// TestMain removes its directory.
var builtKmsd struct {
	once      sync.Once
	dir, path string
	err       error
}

// testKmsd returns the path of kmsd built from this module, skipping the
// test with -short.
func testKmsd(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end: builds and runs kmsd; skipped with -short")
	}
	b := &builtKmsd
	b.once.Do(func() {
		kmsdtest.TrackSources() // go test reruns this when kmsd's sources change
		if b.dir, b.err = os.MkdirTemp("", "kmsbench-test-bin-"); b.err == nil {
			b.path, b.err = buildKmsd(context.Background(), b.dir)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// jsonSummary is the part of the JSON summary the tests read.
type jsonSummary struct {
	Nodes    int       `json:"nodes"`
	Store    string    `json:"store"`
	Embedded bool      `json:"embedded"`
	EmbNodes int       `json:"embeddedNodes"`
	RSS      []nodeRSS `json:"rss"`
	Rows     []row     `json:"rows"`
	Ratios   *ratios   `json:"ratios"`
	Batch    int       `json:"batch"`
	KeyType  string    `json:"keyType"`
}

// runJSON runs kmsbench with args and -json, and returns its summary and
// what it wrote to stderr.
func runJSON(t *testing.T, getenv func(string) string, args ...string) (*jsonSummary, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	args = append(args, "-json")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := run(ctx, args, getenv, &stdout, &stderr); err != nil {
		t.Fatalf("run %q = %v; stderr:\n%s", args, err, stderr.String())
	}
	var sum jsonSummary
	if err := json.Unmarshal(stdout.Bytes(), &sum); err != nil {
		t.Fatalf("stdout is not the JSON summary: %v\n%s", err, stdout.String())
	}
	return &sum, stderr.String()
}

var pidRE = regexp.MustCompile(`kmsd(?: node \d+)? \(pid (\d+)\) listening`)

// startedPIDs are the process IDs of the kmsd that kmsbench's stderr says
// it started.
func startedPIDs(t *testing.T, stderr string) []int {
	t.Helper()
	var pids []int
	for _, m := range pidRE.FindAllStringSubmatch(stderr, -1) {
		pid, err := strconv.Atoi(m[1])
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
	}
	return pids
}

// checkStopped fails the test for every process of pids that still runs:
// kmsbench leaves none behind.
func checkStopped(t *testing.T, pids []int) {
	t.Helper()
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("kmsd (pid %d) still runs after kmsbench returned (kill 0: %v)", pid, err)
		}
	}
}

// checkNodes checks that the kmsd row spread n requests, without error,
// over the nodes urls, each getting some.
func checkNodes(t *testing.T, sum *jsonSummary, urls []string, n int64) {
	t.Helper()
	if len(sum.Rows) != 1 || sum.Rows[0].Target != "kmsd" {
		t.Fatalf("rows = %+v, want kmsd's", sum.Rows)
	}
	r := sum.Rows[0]
	if r.Requests != n || r.Errors != 0 {
		t.Errorf("kmsd row = %+v, want %d requests, no error", r, n)
	}
	if sum.Nodes != len(urls) || r.URL != strings.Join(urls, ",") {
		t.Errorf("summary names %d nodes, %s; want %q", sum.Nodes, r.URL, urls)
	}
	if len(urls) == 1 {
		return
	}
	if len(r.Nodes) != len(urls) {
		t.Fatalf("nodes = %+v, want %d", r.Nodes, len(urls))
	}
	var total int64
	for i, node := range r.Nodes {
		if node.URL != urls[i] || node.Requests == 0 || node.Errors != 0 {
			t.Errorf("node %d = %+v, want %s with requests and no error", i+1, node, urls[i])
		}
		total += node.Requests
	}
	if total != n {
		t.Errorf("the nodes' requests add up to %d, want %d", total, n)
	}
}

// runningKmsd starts a kmsd (serving the transit interface too when
// transit) for a test to load as a running one, stopped at the test's
// end, and returns its URL and API key.
func runningKmsd(t *testing.T, transit bool) (url, key string) {
	config := newKmsdConfig(testKmsd(t), "warn", "", false, nil)
	config.transit = transit
	return startRunning(t, config).url, config.key
}

// startRunning starts a kmsd of config, stopped at the test's end.
func startRunning(t *testing.T, config *kmsdConfig) *kmsd {
	t.Helper()
	cl, err := startCluster(context.Background(), config, 1, "kmsd", func(*kmsd) {})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.stop() })
	return cl.nodes[0]
}

// envOf is the environment of vars.
func envOf(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// TestRunTwoURLs loads one kmsd given twice in -url: kmsbench counts
// traffic on both "nodes", and decrypts on the second what it encrypted
// through the first.
func TestRunTwoURLs(t *testing.T) {
	u, key := runningKmsd(t, false)
	getenv := envOf(map[string]string{"KMSBENCH_KEY": key})
	sum, _ := runJSON(t, getenv, "-url", u+","+u, "-mode", "decrypt", "-c", "4", "-n", "100", "-warmup", "0", "-pool", "20")
	checkNodes(t, sum, []string{u, u}, 100)
	if sum.Store != "" || sum.RSS != nil {
		t.Errorf("store %q, rss %+v; want neither for a kmsd kmsbench did not start", sum.Store, sum.RSS)
	}
}

// TestRunStartStore starts one kmsd on PostgreSQL and loads it.
func TestRunStartStore(t *testing.T) {
	bin := testKmsd(t)
	sum, stderr := runJSON(t, noEnv, "-start", "-kmsd", bin, "-kmsd-log-level", "warn", "-store", pgtest.URL(t),
		"-mode", "mix", "-c", "4", "-n", "100", "-warmup", "100ms", "-pool", "20", "-rss")
	pids := startedPIDs(t, stderr)
	if len(pids) != 1 {
		t.Fatalf("kmsbench started %d kmsd, want 1; stderr:\n%s", len(pids), stderr)
	}
	checkStopped(t, pids)
	if len(sum.Rows) != 1 {
		t.Fatalf("rows = %+v, want kmsd's", sum.Rows)
	}
	checkNodes(t, sum, []string{sum.Rows[0].URL}, 100)
	if sum.Store != "postgres" || len(sum.RSS) != 1 || sum.RSS[0].PeakBytes <= 0 {
		t.Errorf("store %q, rss %+v; want postgres and kmsd's memory", sum.Store, sum.RSS)
	}
}

// TestRunInterruptedStopsNodes cancels a run during its load: kmsbench
// returns, and no kmsd it started is left running.
func TestRunInterruptedStopsNodes(t *testing.T) {
	bin := testKmsd(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr kmsdtest.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-start", "-kmsd", bin, "-kmsd-log-level", "warn", "-store", pgtest.URL(t),
			"-c", "2", "-d", "1h", "-warmup", "0"}, noEnv, &bytes.Buffer{}, &stderr)
	}()
	kmsdtest.WaitFor(t, time.Minute, "the load's first progress line", func() bool {
		return strings.Contains(stderr.String(), "ops/s")
	})
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("run = %v, want context.Canceled", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("run did not return within a minute of its cancellation")
	}
	pids := startedPIDs(t, stderr.String())
	if len(pids) != 1 {
		t.Fatalf("kmsbench started %d kmsd, want 1; stderr:\n%s", len(pids), stderr.String())
	}
	checkStopped(t, pids)
}

// TestRunStartCluster starts two kmsd on one PostgreSQL database and
// loads both: each decrypts hashes that the first encrypted, and both
// are stopped at the end.
func TestRunStartCluster(t *testing.T) {
	bin := testKmsd(t)
	sum, stderr := runJSON(t, noEnv, "-start", "-kmsd", bin, "-kmsd-log-level", "warn", "-store", pgtest.URL(t), "-nodes", "2",
		"-mode", "decrypt", "-c", "4", "-n", "60", "-warmup", "0", "-pool", "20", "-rss")
	pids := startedPIDs(t, stderr)
	if len(pids) != 2 {
		t.Fatalf("kmsbench started %d kmsd, want 2; stderr:\n%s", len(pids), stderr)
	}
	checkStopped(t, pids)
	if len(sum.Rows) != 1 || len(sum.Rows[0].Nodes) != 2 {
		t.Fatalf("rows = %+v, want kmsd's over 2 nodes", sum.Rows)
	}
	urls := []string{sum.Rows[0].Nodes[0].URL, sum.Rows[0].Nodes[1].URL}
	if urls[0] == urls[1] {
		t.Errorf("both nodes are %s, want two kmsd", urls[0])
	}
	checkNodes(t, sum, urls, 60)
	if sum.Store != "postgres" || len(sum.RSS) != 2 {
		t.Fatalf("store %q, rss %+v; want postgres and the memory of 2 nodes", sum.Store, sum.RSS)
	}
	for i, r := range sum.RSS {
		if r.Node != urls[i] || r.PeakBytes <= 0 {
			t.Errorf("rss of node %d = %+v, want %s's", i+1, r, urls[i])
		}
	}
}

// TestRunEmbedded loads two kmsd nodes on PostgreSQL and one kmsd on the
// embedded store, taking turns: each target decrypts what was encrypted
// on it (the other's master key would refuse it), and the summary gives
// the ratios and the CPU time per request of each target and node.
func TestRunEmbedded(t *testing.T) {
	bin := testKmsd(t)
	sum, stderr := runJSON(t, noEnv, "-start", "-kmsd", bin, "-kmsd-log-level", "warn", "-store", pgtest.URL(t), "-nodes", "2", "-embedded",
		"-mode", "mix", "-c", "4", "-d", "2s", "-rounds", "2", "-warmup", "100ms", "-pool", "20", "-rss")
	pids := startedPIDs(t, stderr)
	if len(pids) != 3 {
		t.Fatalf("kmsbench started %d kmsd, want 3; stderr:\n%s", len(pids), stderr)
	}
	checkStopped(t, pids)
	if len(sum.Rows) != 2 || sum.Rows[0].Target != "postgres" || sum.Rows[1].Target != "embedded" {
		t.Fatalf("rows = %+v, want postgres and embedded", sum.Rows)
	}
	if sum.Store != "postgres" || !sum.Embedded || sum.Nodes != 2 {
		t.Errorf("summary: store %q, embedded %v, %d nodes; want postgres, true, 2", sum.Store, sum.Embedded, sum.Nodes)
	}
	for _, r := range sum.Rows {
		if r.Requests == 0 || r.Errors != 0 || len(r.ErrorsByStatus) != 0 {
			t.Errorf("%s row: %d requests, %d errors %v; want requests, and every encrypt and decrypt answered", r.Target, r.Requests, r.Errors, r.ErrorsByStatus)
		}
		if r.CPUUsPerReq == nil || *r.CPUUsPerReq <= 0 || r.CPUSeconds == nil || *r.CPUSeconds <= 0 {
			t.Errorf("%s row: CPU %v s, %v µs a request; want both above 0", r.Target, r.CPUSeconds, r.CPUUsPerReq)
		}
	}
	if len(sum.Rows[0].Nodes) != 2 || len(sum.Rows[1].Nodes) != 0 {
		t.Fatalf("postgres over %d nodes, embedded over %d; want 2 and 1", len(sum.Rows[0].Nodes), len(sum.Rows[1].Nodes))
	}
	for i, n := range sum.Rows[0].Nodes {
		if n.Requests == 0 || n.Errors != 0 || n.CPUUsPerReq == nil || *n.CPUUsPerReq <= 0 || n.CPUSeconds == nil || *n.CPUSeconds <= 0 {
			t.Errorf("postgres node %d = %+v, want requests without error and its CPU above 0", i+1, n)
		}
	}
	embURL := sum.Rows[1].URL
	if slices.Contains(strings.Split(sum.Rows[0].URL, ","), embURL) {
		t.Errorf("the embedded kmsd %s is one of the postgres nodes %s", embURL, sum.Rows[0].URL)
	}
	r := sum.Ratios
	if r == nil || r.Of != "postgres" || r.To != "embedded" || r.ThroughputPct <= 0 || r.P99Factor <= 0 ||
		r.CPUFactor == nil || *r.CPUFactor <= 0 || len(r.NodeCPUFactors) != 2 {
		t.Errorf("ratios = %+v, want postgres to embedded, with the CPU of each node", r)
	}
	if len(sum.RSS) != 3 || sum.RSS[0].Target != "postgres" || sum.RSS[2].Target != "embedded" || sum.RSS[2].Node != embURL || sum.RSS[2].PeakBytes <= 0 {
		t.Errorf("rss = %+v, want the memory of the 2 postgres nodes and of the embedded kmsd", sum.RSS)
	}
}

// TestRunEmbeddedNodes loads two kmsd nodes on PostgreSQL against two
// kmsd on embedded stores of their own: each of the two embedded kmsd
// decrypts what was encrypted on it (the other has no record of it), and
// the summary gives the CPU time per request of each.
func TestRunEmbeddedNodes(t *testing.T) {
	bin := testKmsd(t)
	sum, stderr := runJSON(t, noEnv, "-start", "-kmsd", bin, "-kmsd-log-level", "warn", "-store", pgtest.URL(t), "-nodes", "2",
		"-embedded", "-embedded-nodes", "2", "-mode", "decrypt", "-c", "4", "-d", "2s", "-rounds", "2", "-warmup", "100ms", "-pool", "20")
	pids := startedPIDs(t, stderr)
	if len(pids) != 4 {
		t.Fatalf("kmsbench started %d kmsd, want 4; stderr:\n%s", len(pids), stderr)
	}
	checkStopped(t, pids)
	if len(sum.Rows) != 2 || sum.Rows[1].Target != "embedded" || !sum.Embedded || sum.EmbNodes != 2 {
		t.Fatalf("summary = %+v, want postgres against 2 embedded kmsd", sum)
	}
	for _, r := range sum.Rows {
		if len(r.Nodes) != 2 {
			t.Fatalf("%s over %d nodes, want 2", r.Target, len(r.Nodes))
		}
		for i, n := range r.Nodes {
			if n.Requests == 0 || n.Errors != 0 || n.CPUUsPerReq == nil || *n.CPUUsPerReq <= 0 {
				t.Errorf("%s node %d = %+v, want decrypts without error and its CPU above 0", r.Target, i+1, n)
			}
		}
	}
	emb := strings.Split(sum.Rows[1].URL, ",")
	if len(emb) != 2 || emb[0] == emb[1] || slices.ContainsFunc(emb, func(u string) bool { return slices.Contains(strings.Split(sum.Rows[0].URL, ","), u) }) {
		t.Errorf("embedded kmsd at %q, nodes on PostgreSQL at %q: want two of their own", sum.Rows[1].URL, sum.Rows[0].URL)
	}
	if r := sum.Ratios; r == nil || r.CPUFactor == nil || len(r.NodeCPUFactors) != 2 {
		t.Errorf("ratios = %+v, want the CPU of each node against the embedded kmsd's", r)
	}
}

// TestRunTLS: with -tls, kmsd and the baseline serve HTTPS with the run's
// certificate, the load goes over it, and each row has the CPU per
// request of its server and of kmsbench itself.
func TestRunTLS(t *testing.T) {
	bin := testKmsd(t)
	sum, stderr := runJSON(t, noEnv, "-start", "-tls", "-baseline", "-kmsd", bin, "-kmsd-log-level", "warn",
		"-c", "4", "-d", "2s", "-rounds", "2", "-warmup", "100ms")
	checkStopped(t, startedPIDs(t, stderr))
	if len(sum.Rows) != 2 || sum.Rows[0].Target != "kmsd" || sum.Rows[1].Target != "baseline" {
		t.Fatalf("rows = %+v, want kmsd and baseline", sum.Rows)
	}
	for _, r := range sum.Rows {
		if !strings.HasPrefix(r.URL, "https://127.0.0.1:") {
			t.Errorf("%s served at %s, want https", r.Target, r.URL)
		}
		if r.Requests == 0 || r.Errors != 0 {
			t.Errorf("%s row: %d requests, %d errors %v", r.Target, r.Requests, r.Errors, r.ErrorsByStatus)
		}
		if r.CPUUsPerReq == nil || *r.CPUUsPerReq <= 0 || r.ClientCPUUsPerReq == nil || *r.ClientCPUUsPerReq <= 0 {
			t.Errorf("%s row: server %v, client %v µs a request; want both above 0", r.Target, r.CPUUsPerReq, r.ClientCPUUsPerReq)
		}
	}
	if r := sum.Ratios; r == nil || r.CPUFactor == nil {
		t.Errorf("ratios = %+v, want a CPU factor", r)
	}
}

// TestRunBatch: with -batch, kmsbench sends the batch routes, encrypt and
// decrypt, and reports keys per second: the calls per second times the
// batch size; every item of every batch succeeds.
func TestRunBatch(t *testing.T) {
	bin := testKmsd(t)
	for _, mode := range []string{"encrypt", "decrypt"} {
		sum, stderr := runJSON(t, noEnv, "-start", "-kmsd", bin, "-kmsd-log-level", "warn", "-mode", mode, "-pool", "40",
			"-batch", "25", "-c", "4", "-d", "1s", "-warmup", "100ms")
		checkStopped(t, startedPIDs(t, stderr))
		if len(sum.Rows) != 1 || sum.Batch != 25 {
			t.Fatalf("%s: batch %d, rows %+v", mode, sum.Batch, sum.Rows)
		}
		r := sum.Rows[0]
		if r.Requests == 0 || r.Errors != 0 || r.KeysPerSec != r.OpsPerSec*25 {
			t.Fatalf("%s row: %d requests, %d errors %v, %.0f keys/s at %.0f ops/s; want keys/s 25 times ops/s", mode, r.Requests, r.Errors, r.ErrorsByStatus, r.KeysPerSec, r.OpsPerSec)
		}
	}
	if _, err := parseFlags([]string{"-start", "-batch", "1001"}, noEnv, io.Discard); err == nil {
		t.Error("-batch 1001 was accepted")
	}
}

// TestRunAgainst: with -against, kmsbench starts a second kmsd from the
// binary given, loads the two taking turns, each with a ring and pool of
// its own, and reports kmsd as a share of it, CPU included; both stop.
func TestRunAgainst(t *testing.T) {
	bin := testKmsd(t)
	sum, stderr := runJSON(t, noEnv, "-start", "-kmsd", bin, "-against", bin, "-kmsd-log-level", "warn", "-mode", "decrypt", "-pool", "20",
		"-c", "4", "-d", "2s", "-rounds", "2", "-warmup", "100ms")
	pids := startedPIDs(t, stderr)
	if len(pids) != 2 {
		t.Errorf("kmsbench started kmsd %v, want two", pids)
	}
	checkStopped(t, pids)
	if len(sum.Rows) != 2 || sum.Rows[0].Target != "kmsd" || sum.Rows[1].Target != "against" {
		t.Fatalf("rows = %+v, want kmsd and against", sum.Rows)
	}
	if sum.Rows[0].URL == sum.Rows[1].URL {
		t.Errorf("both targets at %s, want two kmsd", sum.Rows[0].URL)
	}
	for _, r := range sum.Rows {
		if r.Requests == 0 || r.Errors != 0 || r.CPUUsPerReq == nil || *r.CPUUsPerReq <= 0 {
			t.Errorf("%s row: %d requests, %d errors %v, cpu %v; want requests, no error, a CPU figure", r.Target, r.Requests, r.Errors, r.ErrorsByStatus, r.CPUUsPerReq)
		}
	}
	if r := sum.Ratios; r == nil || r.Of != "kmsd" || r.To != "against" || r.ThroughputPct <= 0 || r.CPUFactor == nil {
		t.Errorf("ratios = %+v, want kmsd to against with a CPU factor", r)
	}
}

// TestRunTransit: the transit modes start kmsd with -transit, make the
// transit key of the type asked (and, to decrypt, the ciphertexts) and
// load Vault's encrypt, decrypt, sign and hmac, alone and in batches,
// with no error.
func TestRunTransit(t *testing.T) {
	bin := testKmsd(t)
	for _, c := range []struct {
		mode, batch, keyType string
		want                 string // the key's type
	}{
		{"transit-encrypt", "1", "", "aes256-gcm96"}, {"transit-decrypt", "1", "", "aes256-gcm96"},
		{"transit-encrypt", "10", "chacha20-poly1305", "chacha20-poly1305"}, {"transit-decrypt", "10", "", "aes256-gcm96"},
		{"transit-sign", "1", "", "ed25519"}, {"transit-sign", "10", "ecdsa-p256", "ecdsa-p256"}, {"transit-sign", "1", "ml-dsa", "ml-dsa-65"},
		{"transit-hmac", "1", "", "hmac"}, {"transit-hmac", "10", "", "hmac"},
	} {
		args := []string{"-start", "-kmsd", bin, "-kmsd-log-level", "warn", "-mode", c.mode, "-pool", "20",
			"-batch", c.batch, "-c", "4", "-d", "1s", "-warmup", "100ms"}
		if c.keyType != "" {
			args = append(args, "-key-type", c.keyType)
		}
		sum, stderr := runJSON(t, noEnv, args...)
		checkStopped(t, startedPIDs(t, stderr))
		if len(sum.Rows) != 1 {
			t.Fatalf("%s: rows %+v", c.mode, sum.Rows)
		}
		if r := sum.Rows[0]; r.Requests == 0 || r.Errors != 0 || r.Mode != c.mode || sum.KeyType != c.want {
			t.Fatalf("%s batch %s row: %d requests, %d errors %v, mode %q, key %q; want key %s", c.mode, c.batch, r.Requests, r.Errors, r.ErrorsByStatus, r.Mode, sum.KeyType, c.want)
		}
		if made := "created transit key kmsbench (" + c.want + ")"; !strings.Contains(stderr, made) {
			t.Errorf("%s: stderr does not say %q:\n%s", c.mode, made, stderr)
		}
	}
	if _, err := parseFlags([]string{"-start", "-mode", "transit-encrypt", "-asset"}, noEnv, io.Discard); err == nil {
		t.Error("-asset with a transit mode was accepted")
	}
}

// TestRunTransitKeyType loads a running kmsd -transit: transit-sign
// makes the key with the type of -key-type, as kmsd then answers it; a
// run asking for another type on that key fails, saying so, while
// transit-hmac computes HMACs with it.
func TestRunTransitKeyType(t *testing.T) {
	u, key := runningKmsd(t, true)
	getenv := envOf(map[string]string{"KMS_API_KEY": key})
	sum, _ := runJSON(t, getenv, "-url", u, "-mode", "transit-sign", "-key-type", "ml-dsa-44", "-c", "2", "-n", "20", "-warmup", "0")
	if r := sum.Rows[0]; r.Requests != 20 || r.Errors != 0 || sum.KeyType != "ml-dsa-44" {
		t.Fatalf("row %+v, key %q; want 20 signatures of ml-dsa-44", r, sum.KeyType)
	}
	var got struct {
		Data map[string]any `json:"data"`
	}
	if _, err := call(t.Context(), http.DefaultClient, u, key, http.MethodGet, "/v1/transit/keys/kmsbench", nil, &got); err != nil {
		t.Fatal(err)
	}
	if got.Data["type"] != "ml-dsa" || got.Data["parameter_set"] != "44" || got.Data["supports_signing"] != true {
		t.Errorf("kmsd answers the key %v, want an ml-dsa key of parameter set 44", got.Data)
	}

	var stdout, stderr bytes.Buffer
	err := run(t.Context(), []string{"-url", u, "-mode", "transit-sign", "-key-type", "ed25519", "-n", "1", "-warmup", "0"}, getenv, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "the key is ml-dsa-44, not ed25519 (-key-type): name another key with -ring") {
		t.Errorf("transit-sign with -key-type ed25519 on an ml-dsa-44 key = %v, want the types and what to do", err)
	}

	sum, _ = runJSON(t, getenv, "-url", u, "-mode", "transit-hmac", "-key-type", "ml-dsa-44", "-c", "2", "-n", "20", "-warmup", "0", "-batch", "5")
	if r := sum.Rows[0]; r.Requests != 20 || r.Errors != 0 || r.KeysPerSec <= 0 {
		t.Fatalf("transit-hmac row %+v, want 20 batches of HMACs of the ml-dsa-44 key", r)
	}
}
