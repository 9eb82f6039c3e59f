// Package kmsdtest runs the real kmsd binary for tests: it builds it,
// starts it on a loopback port, waits until it listens, and stops or kills
// it. The end-to-end tests of several packages share it.
package kmsdtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Buffer is a bytes.Buffer safe for concurrent use: the output of a
// process that a test reads while it runs.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// WaitFor polls cond every 10 ms until it holds, failing the test when it
// does not within timeout.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// GoTool is the go command of the toolchain that runs the tests.
func GoTool() string {
	if root := runtime.GOROOT(); root != "" {
		p := filepath.Join(root, "bin", "go")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return "go"
}

// Env is this process's environment without any KMS_* variable, plus the
// given KEY=value pairs: a child sees only the configuration the test
// gives it.
func Env(extra ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KMS_") {
			out = append(out, kv)
		}
	}
	return append(out, extra...)
}

// Proc is a running kmsd.
type Proc struct {
	Cmd    *exec.Cmd
	URL    string  // http://127.0.0.1:PORT
	Stdout *Buffer // what it printed to stdout
	Stderr *Buffer // what it printed to stderr: its log
	Exited chan struct{}
}

var listening = regexp.MustCompile(`kmsd listening on (https?://\S+)`)

// Start runs the kmsd binary bin with args and env and waits until it
// listens (within timeout). It is killed at the end of the test if it
// still runs.
func Start(t testing.TB, bin string, env []string, timeout time.Duration, args ...string) *Proc {
	t.Helper()
	p := Launch(t, bin, env, args...)
	p.Listen(t, timeout)
	return p
}

// Launch runs the kmsd binary bin with args and env, without waiting for
// it to listen (Listen does), so that several can start together. It is
// killed at the end of the test if it still runs.
func Launch(t testing.TB, bin string, env []string, args ...string) *Proc {
	t.Helper()
	p := &Proc{Stdout: &Buffer{}, Stderr: &Buffer{}, Exited: make(chan struct{})}
	p.Cmd = exec.Command(bin, args...)
	p.Cmd.Env = env
	p.Cmd.Stdout, p.Cmd.Stderr = p.Stdout, p.Stderr
	if err := p.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.Cmd.Wait()
		close(p.Exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.Exited:
		default:
			p.Cmd.Process.Kill()
			<-p.Exited
		}
	})
	return p
}

// Listen waits until a launched kmsd listens (within timeout) and sets
// its URL.
func (p *Proc) Listen(t testing.TB, timeout time.Duration) {
	t.Helper()
	WaitFor(t, timeout, "kmsd to listen", func() bool {
		select {
		case <-p.Exited:
			t.Fatalf("kmsd exited before listening: %v\nstderr:\n%s", p.Cmd.ProcessState, p.Stderr)
		default:
		}
		return listening.MatchString(p.Stderr.String())
	})
	p.URL = listening.FindStringSubmatch(p.Stderr.String())[1]
}

// Signal sends sig to kmsd.
func (p *Proc) Signal(t testing.TB, sig os.Signal) {
	t.Helper()
	if err := p.Cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v: %v", sig, err)
	}
}

// Wait waits for kmsd to exit within timeout and returns its exit code
// (-1 when a signal killed it).
func (p *Proc) Wait(t testing.TB, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.Exited:
		return p.Cmd.ProcessState.ExitCode()
	case <-time.After(timeout):
		t.Fatalf("kmsd did not exit within %v; stderr:\n%s", timeout, p.Stderr)
		return 0
	}
}

// Kill sends SIGKILL and waits for kmsd to die.
func (p *Proc) Kill(t testing.TB) {
	t.Helper()
	p.Signal(t, syscall.SIGKILL)
	p.Wait(t, 10*time.Second)
}

// Stop sends SIGTERM and requires kmsd to exit 0 within 20 s.
func (p *Proc) Stop(t testing.TB) {
	t.Helper()
	p.Signal(t, syscall.SIGTERM)
	if code := p.Wait(t, 20*time.Second); code != 0 {
		t.Fatalf("kmsd exited %d after SIGTERM, want 0; stderr:\n%s", code, p.Stderr)
	}
}

// TrackSources looks at (stats) every Go file of the module, and its
// go.mod and go.sum, from a test: go test's cache, which records the
// files a test looks at, then runs the test again when any of them
// changes. A test that builds kmsd itself needs it, since the cache
// otherwise knows only the packages linked into the test binary.
func TrackSources() {
	dir, err := os.Getwd()
	if err != nil {
		return
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return
		}
		dir = parent
	}
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "data") {
			return filepath.SkipDir
		}
		if name := d.Name(); strings.HasSuffix(name, ".go") || name == "go.mod" || name == "go.sum" {
			os.Stat(p)
		}
		return nil
	})
}

// Do sends one request to url with body JSON-encoded (no body when nil)
// and the bearer credential key ("" for none), through client
// (http.DefaultClient when nil), and returns the status and the raw
// answer. A transport error or an unreadable answer is an error.
func Do(client *http.Client, method, url, key string, body any) (int, []byte, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, url, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, raw, fmt.Errorf("%s %s: read body: %w", method, url, err)
	}
	return resp.StatusCode, raw, nil
}

// NoSecretsIn fails the test for each file under dir that holds one of
// secrets (named by what each is), and when dir holds no file at all: a
// scan of nothing would prove nothing.
func NoSecretsIn(t testing.TB, dir string, secrets map[string][]byte) {
	t.Helper()
	files := 0
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		for name, s := range secrets {
			if bytes.Contains(b, s) {
				t.Errorf("%s holds the %s", path, name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files == 0 {
		t.Fatalf("no files under %s", dir)
	}
}

// SocketDir is a fresh directory, removed at the end of the test, whose
// path is short enough for Unix sockets in it (a socket's path has at
// most 107 bytes, which t.TempDir's may pass).
func SocketDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sock")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}
