package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ringkms/kms/client"
)

// kmsdPath is the kmsd binary that TestMain builds once; empty with
// -short.
var kmsdPath string

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "ringkms-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	kmsdPath = filepath.Join(dir, "kmsd")
	cmd := exec.Command(goTool(), "build", "-o", kmsdPath, "github.com/ringkms/kms/cmd/kmsd")
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: go build kmsd: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// goTool is the go command of the toolchain that runs the tests.
func goTool() string {
	p := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	return "go"
}

// needKmsd skips the test with -short.
func needKmsd(t *testing.T) {
	t.Helper()
	if testing.Short() || kmsdPath == "" {
		t.Skip("end-to-end: builds and runs kmsd; skipped with -short")
	}
}

// instance is the configuration of one kmsd data directory: it outlives
// the processes that run on it.
type instance struct {
	data      string // -data
	outbox    string // -mail-outbox
	masterKey string // KMS_MASTER_KEY
	bootstrap string // KMS_BOOTSTRAP_API_KEY: the root API key
}

// newInstance makes a fresh data directory, mail outbox, random master
// key and bootstrap API key.
func newInstance(t *testing.T) *instance {
	t.Helper()
	needKmsd(t)
	dir := t.TempDir()
	mk := make([]byte, 32)
	rand.Read(mk)
	return &instance{
		data:      filepath.Join(dir, "data"),
		outbox:    filepath.Join(dir, "outbox"),
		masterKey: base64.StdEncoding.EncodeToString(mk),
		bootstrap: "rk_e2e_" + rand.Text() + rand.Text(),
	}
}

// env is the child's environment: ours without KMS_*, plus the instance's.
func (in *instance) env() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KMS_") {
			out = append(out, kv)
		}
	}
	return append(out, "KMS_MASTER_KEY="+in.masterKey, "KMS_BOOTSTRAP_API_KEY="+in.bootstrap)
}

// proc is a running kmsd.
type proc struct {
	cmd    *exec.Cmd
	url    string
	stderr *syncBuffer
	exited chan struct{}
}

var listening = regexp.MustCompile(`kmsd listening on (http://\S+)`)

// start runs kmsd on the instance, on 127.0.0.1:0, and waits until it
// listens. It is killed at the end of the test if it still runs. Flags in
// extra come after the defaults (a later flag wins).
func (in *instance) start(t *testing.T, extra ...string) *proc {
	t.Helper()
	p := &proc{stderr: &syncBuffer{}, exited: make(chan struct{})}
	args := append([]string{"-addr", "127.0.0.1:0", "-data", in.data, "-mail-outbox", in.outbox, "-log-level", "warn"}, extra...)
	p.cmd = exec.Command(kmsdPath, args...)
	p.cmd.Env = in.env()
	p.cmd.Stdout, p.cmd.Stderr = p.stderr, p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			p.cmd.Process.Kill()
			<-p.exited
		}
	})
	waitFor(t, 30*time.Second, "kmsd to listen", func() bool {
		select {
		case <-p.exited:
			t.Fatalf("kmsd exited before listening: %v\n%s", p.cmd.ProcessState, p.stderr)
		default:
		}
		return listening.MatchString(p.stderr.String())
	})
	p.url = listening.FindStringSubmatch(p.stderr.String())[1]
	return p
}

// kill sends SIGKILL and waits for kmsd to die.
func (p *proc) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("SIGKILL: %v", err)
	}
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("kmsd did not die within 10s of SIGKILL")
	}
}

// stop sends SIGTERM and requires a clean exit within 20 s.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	select {
	case <-p.exited:
		if code := p.cmd.ProcessState.ExitCode(); code != 0 {
			t.Fatalf("kmsd exited %d after SIGTERM, want 0\n%s", code, p.stderr)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("kmsd did not exit within 20s of SIGTERM\n%s", p.stderr)
	}
}

// verifyAudit runs kmsd verify-audit on the instance's data directory
// (kmsd must not be running) and requires exit 0.
func (in *instance) verifyAudit(t *testing.T) string {
	t.Helper()
	cmd := exec.Command(kmsdPath, "verify-audit", "-data", in.data)
	cmd.Env = in.env()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kmsd verify-audit: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "activity chain intact") {
		t.Fatalf("kmsd verify-audit printed:\n%s", out)
	}
	return string(out)
}

// client returns a client of p with the secret (none when empty) whose
// every request and answer v validates.
func (p *proc) client(t *testing.T, v *validator, secret string) *client.Client {
	t.Helper()
	hc := v.client()
	hc.Timeout = 30 * time.Second
	opts := []client.Option{client.WithHTTPClient(hc)}
	if secret != "" {
		opts = append(opts, client.WithAPIKey(secret))
	}
	c, err := client.New(p.url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// mail is one message of the outbox.
type mail struct {
	name, to, subject, body string
}

// link returns the first URL of the mail whose path is path, and its
// token query parameter.
func (m mail) link(t *testing.T, path string) (string, string) {
	t.Helper()
	for _, f := range strings.Fields(m.body) {
		u, err := url.Parse(f)
		if err == nil && u.Path == path && u.Query().Get("token") != "" {
			return f, u.Query().Get("token")
		}
	}
	t.Fatalf("mail %s to %s holds no link to %s:\n%s", m.name, m.to, path, m.body)
	return "", ""
}

// waitMail waits for a message to the address that the outbox did not
// hold before (skip lists the names already read) and returns it.
func (in *instance) waitMail(t *testing.T, to string, skip map[string]bool) mail {
	t.Helper()
	var found mail
	waitFor(t, 20*time.Second, "a mail to "+to, func() bool {
		entries, err := os.ReadDir(in.outbox)
		if err != nil {
			return false
		}
		var names []string
		for _, e := range entries {
			if !e.IsDir() && strings.HasSuffix(e.Name(), ".txt") && !skip[e.Name()] {
				names = append(names, e.Name())
			}
		}
		slices.Sort(names)
		for _, name := range names {
			b, err := os.ReadFile(filepath.Join(in.outbox, name))
			if err != nil {
				continue
			}
			head, body, _ := strings.Cut(string(b), "\n\n")
			m := mail{name: name, body: body}
			for _, line := range strings.Split(head, "\n") {
				if v, ok := strings.CutPrefix(line, "To: "); ok {
					m.to = v
				}
				if v, ok := strings.CutPrefix(line, "Subject: "); ok {
					m.subject = v
				}
			}
			if strings.EqualFold(m.to, to) {
				found = m
				skip[name] = true
				return true
			}
		}
		return false
	})
	return found
}

// waitFor polls cond every 20 ms until it holds, failing the test when it
// does not within timeout.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// bg is the context of requests that need no mark.
var bg = context.Background()
