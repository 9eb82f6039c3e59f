package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/ringkms/kms/internal/kmsdtest"
	"github.com/ringkms/kms/internal/pgtest"

	"github.com/rs/zerolog"
)

func TestMain(m *testing.M) {
	// Tests that call run() serve from this process; do not mlockall it.
	lockMemory = func(*zerolog.Logger) {}
	code := pgtest.Main(m)
	cleanupBinary()
	os.Exit(code)
}

// env is a fake environment for run.
type env map[string]string

func (e env) get(k string) string { return e[k] }

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer = kmsdtest.Buffer

// waitFor polls cond until it holds or timeout passes.
var waitFor = kmsdtest.WaitFor

func newKey() string {
	b := make([]byte, 32)
	rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}

var listeningRE = regexp.MustCompile(`kmsd listening on (https?://\S+)`)

// server is a kmsd run() in this process.
type server struct {
	url    string
	stderr *syncBuffer
	stdout *syncBuffer
	cancel context.CancelFunc
	done   chan error
}

// startRun runs kmsd in this process and waits until it listens. The
// server is stopped at the end of the test if stop was not called.
func startRun(t *testing.T, args []string, e env) *server {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &server{stderr: &syncBuffer{}, stdout: &syncBuffer{}, cancel: cancel, done: make(chan error, 1)}
	go func() { s.done <- run(ctx, args, e.get, s.stdout, s.stderr) }()
	var runErr error
	waitFor(t, 20*time.Second, "kmsd to listen", func() bool {
		select {
		case runErr = <-s.done:
			return true
		default:
		}
		return listeningRE.MatchString(s.stderr.String())
	})
	if !listeningRE.MatchString(s.stderr.String()) {
		cancel()
		t.Fatalf("run = %v before listening; stderr:\n%s", runErr, s.stderr)
	}
	s.url = listeningRE.FindStringSubmatch(s.stderr.String())[1]
	t.Cleanup(func() { s.stop(t) })
	return s
}

// stop cancels the server's context and waits for run to return nil.
func (s *server) stop(t *testing.T) {
	t.Helper()
	if s.cancel == nil {
		return
	}
	s.cancel()
	s.cancel = nil
	select {
	case err := <-s.done:
		if err != nil {
			t.Errorf("run after cancel = %v, want nil; stderr:\n%s", err, s.stderr)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("run did not return after cancel")
	}
}

// call sends a JSON request with a bearer key and decodes the answer.
func call(t testing.TB, client *http.Client, method, url, key string, body any) (int, map[string]any) {
	t.Helper()
	code, raw, err := kmsdtest.Do(client, method, url, key, body)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("%s %s: %d %q is not JSON: %v", method, url, code, raw, err)
		}
	}
	return code, out
}

func TestHelp(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-h"}, env{}.get, &out, io.Discard); err != nil {
		t.Fatalf("run(-h) = %v, want nil", err)
	}
	for _, s := range settings {
		if !strings.Contains(out.String(), "-"+s.flag) || !strings.Contains(out.String(), s.env) {
			t.Errorf("kmsd -h does not list -%s and %s:\n%s", s.flag, s.env, out.String())
		}
	}
	for _, e := range envOnly {
		if !strings.Contains(out.String(), e[0]) {
			t.Errorf("kmsd -h does not list %s", e[0])
		}
	}
	if _, err := parseConfig("verify-audit", []string{"-help"}, env{}.get, io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("verify-audit -help = %v, want flag.ErrHelp", err)
	}
}

// runErr runs kmsd with a context that is already canceled, for the cases
// where it must refuse to start.
func runErr(t *testing.T, args []string, e env) (error, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var stderr syncBuffer
	err := run(ctx, args, e.get, io.Discard, &stderr)
	return err, stderr.String()
}

func TestRunBootstrapKeyTooShort(t *testing.T) {
	err, _ := runErr(t, []string{"-data", t.TempDir(), "-addr", "127.0.0.1:0"},
		env{"KMS_MASTER_KEY": newKey(), "KMS_BOOTSTRAP_API_KEY": "short-secret"})
	if err == nil || !strings.Contains(err.Error(), "at least 32") {
		t.Fatalf("run = %v, want an error about the bootstrap key's length", err)
	}
	if strings.Contains(err.Error(), "short-secret") {
		t.Errorf("error %q repeats the secret", err)
	}
}

func TestRunSMTPNeedsSender(t *testing.T) {
	err, _ := runErr(t, []string{"-data", t.TempDir(), "-addr", "127.0.0.1:0"},
		env{"KMS_MASTER_KEY": newKey(), "KMS_SMTP_ADDR": "mail.example.com:587"})
	if err == nil || !strings.Contains(err.Error(), "KMS_SMTP_FROM") {
		t.Fatalf("run = %v, want an error about KMS_SMTP_FROM", err)
	}
}

var bootstrapRE = regexp.MustCompile(`bootstrap API key \(shown once\): (rk_\S+)`)

func TestRunDevGeneratesThenReusesMasterKey(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	args := []string{"-dev", "-data", data, "-addr", "127.0.0.1:0"}

	// First start: a new key in <data>/master.key, a generated bootstrap key.
	s := startRun(t, args, env{})
	keyFile := filepath.Join(data, "master.key")
	fi, err := os.Stat(keyFile)
	if err != nil {
		t.Fatalf("-dev did not write %s: %v", keyFile, err)
	}
	if mode := fi.Mode().Perm(); mode != 0o600 {
		t.Errorf("%s has mode %o, want 600", keyFile, mode)
	}
	mk1, _ := os.ReadFile(keyFile)
	logs := s.stderr.String()
	if !strings.Contains(logs, "DEV MODE") {
		t.Errorf("no dev mode warning in:\n%s", logs)
	}
	if strings.Contains(logs, strings.TrimSpace(string(mk1))) {
		t.Errorf("the master key was logged")
	}
	m := bootstrapRE.FindStringSubmatch(logs)
	if m == nil {
		t.Fatalf("no bootstrap API key printed:\n%s", logs)
	}
	apiKey := m[1]
	if n := strings.Count(logs, apiKey); n != 1 {
		t.Errorf("the bootstrap key appears %d times on stderr, want once", n)
	}
	if code, body := call(t, nil, "POST", s.url+"/ks/keyrings", apiKey, map[string]any{"name": "kept"}); code != 200 {
		t.Fatalf("create ring = %d %v", code, body)
	}
	s.stop(t)

	// Second start: the same key, the ring still there, no new bootstrap.
	s = startRun(t, args, env{})
	mk2, _ := os.ReadFile(keyFile)
	if !bytes.Equal(mk1, mk2) {
		t.Errorf("-dev replaced master.key on the second start")
	}
	if bootstrapRE.MatchString(s.stderr.String()) {
		t.Errorf("second start printed a bootstrap key again")
	}
	if code, body := call(t, nil, "GET", s.url+"/ks/keyrings/kept", apiKey, nil); code != 200 {
		t.Errorf("GET ring after restart = %d %v", code, body)
	}
	s.stop(t)

	// A store without its master.key is refused, not given a new key.
	os.Remove(keyFile)
	err, _ = runErr(t, args, env{})
	if err == nil || !strings.Contains(err.Error(), "holds a store") {
		t.Errorf("run -dev on a store without master.key = %v, want a refusal", err)
	}
	if _, err := os.Stat(keyFile); err == nil {
		t.Errorf("-dev wrote a new master.key for an existing store")
	}
}

func TestRunBootstrapKeyFromEnvironment(t *testing.T) {
	secret := "test-bootstrap-secret-0123456789abcdef"
	s := startRun(t, []string{"-data", t.TempDir(), "-addr", "127.0.0.1:0"},
		env{"KMS_MASTER_KEY": newKey(), "KMS_BOOTSTRAP_API_KEY": secret})
	if code, body := call(t, nil, "GET", s.url+"/ks/keyrings", secret, nil); code != 200 {
		t.Errorf("GET /ks/keyrings with the bootstrap key = %d %v", code, body)
	}
	logs := s.stderr.String()
	if strings.Contains(logs, secret) || bootstrapRE.MatchString(logs) {
		t.Errorf("a given bootstrap key must be neither printed nor logged:\n%s", logs)
	}
	if !strings.Contains(logs, "bootstrap: created") {
		t.Errorf("bootstrap was not logged:\n%s", logs)
	}
}

func TestRunMailOutbox(t *testing.T) {
	outbox := filepath.Join(t.TempDir(), "outbox")
	startRun(t, []string{"-data", t.TempDir(), "-addr", "127.0.0.1:0", "-mail-outbox", outbox}, env{"KMS_MASTER_KEY": newKey()})
	fi, err := os.Stat(outbox)
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Errorf("-mail-outbox did not create a 0700 directory: %v %v", fi, err)
	}
}

// TestRunGarbageCollector: kmsd runs the collector at defaultGCPercent
// and under defaultMemoryLimit unless GOGC and GOMEMLIMIT say otherwise.
// (Not parallel: it sets this process's runtime.)
func TestRunGarbageCollector(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))
	for _, c := range []struct {
		e         env
		gc        int
		memLimit  int64
		situation string
	}{
		{env{}, defaultGCPercent, defaultMemoryLimit, "neither set"},
		{env{"GOGC": "100", "GOMEMLIMIT": "1GiB"}, 100, math.MaxInt64, "both set"},
	} {
		debug.SetGCPercent(100)
		debug.SetMemoryLimit(math.MaxInt64)
		c.e["KMS_MASTER_KEY"] = newKey()
		s := startRun(t, []string{"-data", t.TempDir(), "-addr", "127.0.0.1:0"}, c.e)
		gc, limit := debug.SetGCPercent(-1), debug.SetMemoryLimit(-1)
		debug.SetGCPercent(gc)
		s.stop(t)
		if gc != c.gc || limit != c.memLimit {
			t.Errorf("%s: GOGC %d, memory limit %d; want %d, %d", c.situation, gc, limit, c.gc, c.memLimit)
		}
	}
}
