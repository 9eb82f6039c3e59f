package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ringkms/kms/client"
	"github.com/ringkms/kms/internal/kmsdtest"
	"github.com/ringkms/kms/internal/pgtest"
)

// kmsdPath and kmsctlPath are the kmsd and kmsctl binaries that TestMain
// builds once; empty with -short.
var kmsdPath, kmsctlPath string

// revision is the checkout's git revision, which the binaries were built
// with; empty when the tests do not run in a git checkout.
var revision string

// TestMain builds kmsd and kmsctl and runs the tests with one PostgreSQL server for
// those that ask for a database (pgtest.URL).
func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(pgtest.Main(m))
	}
	dir, err := os.MkdirTemp("", "ringkms-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	kmsdPath, kmsctlPath = filepath.Join(dir, "kmsd"), filepath.Join(dir, "kmsctl")
	// Built with the revision of the checkout, when it is one, as a
	// release build is, so that the version commands have it to print.
	build := []string{"build"}
	if out, err := exec.Command("git", "rev-parse", "HEAD").Output(); err == nil {
		revision = strings.TrimSpace(string(out))
		build = append(build, "-buildvcs=true")
	}
	for name, path := range map[string]string{"kmsd": kmsdPath, "kmsctl": kmsctlPath} {
		cmd := exec.Command(kmsdtest.GoTool(), append(build, "-o", path, "github.com/ringkms/kms/cmd/"+name)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: go build %s: %v\n%s", name, err, out)
			os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	code := pgtest.Main(m)
	os.RemoveAll(dir)
	os.Exit(code)
}

// needKmsd skips the test with -short.
func needKmsd(t *testing.T) {
	t.Helper()
	if testing.Short() || kmsdPath == "" {
		t.Skip("end-to-end: builds and runs kmsd; skipped with -short")
	}
	// A change to kmsd's sources runs these tests again. (Looked at from
	// a test: what TestMain looks at before m.Run, go test's cache misses.)
	trackOnce.Do(kmsdtest.TrackSources)
}

var trackOnce sync.Once

// instance is the configuration of one kmsd data directory: it outlives
// the processes that run on it.
type instance struct {
	data      string // -data
	store     string // -store: a PostgreSQL URL; empty for the embedded store in data
	outbox    string // -mail-outbox
	masterKey string // KMS_MASTER_KEY; none when empty
	bootstrap string // KMS_BOOTSTRAP_API_KEY: the root API key
	// vars are more KEY=value pairs for the child: the master key given
	// another way (KMS_MASTER_KEY_PKCS11 and the token's SOFTHSM2_CONF), a
	// next master key. A copy of the instance with other keys is kmsd
	// given those keys on the same store.
	vars []string
}

// newInstance makes a fresh data directory, mail outbox, random master
// key and bootstrap API key.
func newInstance(t *testing.T) *instance {
	t.Helper()
	needKmsd(t)
	dir := t.TempDir()
	return &instance{
		data:      filepath.Join(dir, "data"),
		outbox:    filepath.Join(dir, "outbox"),
		masterKey: newMasterKey(),
		bootstrap: "rk_e2e_" + rand.Text() + rand.Text(),
	}
}

// newMasterKey returns a random master key, as KMS_MASTER_KEY takes it.
func newMasterKey() string {
	mk := make([]byte, 32)
	rand.Read(mk)
	return base64.StdEncoding.EncodeToString(mk)
}

// env is the child's environment: ours without KMS_*, plus the instance's.
func (in *instance) env() []string {
	kv := []string{"KMS_BOOTSTRAP_API_KEY=" + in.bootstrap}
	if in.masterKey != "" {
		kv = append(kv, "KMS_MASTER_KEY="+in.masterKey)
	}
	return kmsdtest.Env(append(kv, in.vars...)...)
}

// with returns a copy of the instance whose child also gets vars.
func (in *instance) with(vars ...string) *instance {
	c := *in
	c.vars = append(slices.Clip(in.vars), vars...)
	return &c
}

// storeArgs are the flags that name the instance's store.
func (in *instance) storeArgs() []string {
	args := []string{"-data", in.data}
	if in.store != "" {
		args = append(args, "-store", in.store)
	}
	return args
}

// proc is a running kmsd.
type proc = kmsdtest.Proc

// start runs kmsd on the instance, on 127.0.0.1:0, and waits until it
// listens. It is killed at the end of the test if it still runs. Flags in
// extra come after the defaults (a later flag wins).
func (in *instance) start(t *testing.T, extra ...string) *proc {
	t.Helper()
	p := in.launch(t, extra...)
	p.Listen(t, startTimeout)
	return p
}

// startTimeout bounds the start of kmsd, until it listens.
const startTimeout = 30 * time.Second

// launch runs kmsd as start does, without waiting for it to listen.
func (in *instance) launch(t *testing.T, extra ...string) *proc {
	t.Helper()
	args := []string{"-addr", "127.0.0.1:0", "-data", in.data, "-mail-outbox", in.outbox, "-log-level", "warn"}
	if in.store != "" {
		args = append(args, "-store", in.store)
	}
	args = append(args, extra...)
	return kmsdtest.Launch(t, kmsdPath, in.env(), args...)
}

// refuses runs kmsd on the instance and requires it to exit non-zero,
// saying want, without ever listening.
func (in *instance) refuses(t *testing.T, want string, extra ...string) {
	t.Helper()
	p := in.launch(t, extra...)
	waitFor(t, startTimeout, "kmsd to refuse the store", func() bool {
		if strings.Contains(p.Stderr.String(), "kmsd listening on") {
			t.Fatalf("kmsd started; want it to refuse the store saying %q", want)
		}
		select {
		case <-p.Exited:
			return true
		default:
			return false
		}
	})
	if code := p.Cmd.ProcessState.ExitCode(); code == 0 || !strings.Contains(p.Stderr.String(), want) {
		t.Fatalf("kmsd exited %d, want non-zero saying %q; stderr:\n%s", code, want, p.Stderr)
	}
}

// kmsdCmd runs a kmsd subcommand on the instance's environment and
// returns its output, failing the test unless it exits 0.
func (in *instance) kmsdCmd(t *testing.T, args ...string) string {
	t.Helper()
	out, err := in.kmsdRun(args...)
	if err != nil {
		t.Fatalf("kmsd %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// kmsdRun runs a kmsd subcommand on the instance's environment and
// returns its output and how it exited.
func (in *instance) kmsdRun(args ...string) (string, error) {
	cmd := exec.Command(kmsdPath, args...)
	cmd.Env = in.env()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// verifyAudit runs kmsd verify-audit on the instance's store (kmsd must
// not be running) and requires exit 0.
func (in *instance) verifyAudit(t *testing.T) string {
	t.Helper()
	out := in.kmsdCmd(t, append([]string{"verify-audit"}, in.storeArgs()...)...)
	if !strings.Contains(out, "activity chain intact") {
		t.Fatalf("kmsd verify-audit printed:\n%s", out)
	}
	return out
}

// clientOf returns a client of p with the secret (none when empty) whose
// every request and answer v validates.
func clientOf(p *proc, t *testing.T, v *validator, secret string) *client.Client {
	t.Helper()
	hc := v.client()
	hc.Timeout = 30 * time.Second
	opts := []client.Option{client.WithHTTPClient(hc)}
	if secret != "" {
		opts = append(opts, client.WithAPIKey(secret))
	}
	c, err := client.New(p.URL, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// serve starts kmsd on a new instance with the flags extra, and returns
// the instance, kmsd, the validator of its calls and a client of its root
// API key (clientOf gives others).
func serve(t *testing.T, extra ...string) (*instance, *proc, *validator, *client.Client) {
	t.Helper()
	in := newInstance(t)
	v := newValidator(t)
	p, root := in.serve(t, v, extra...)
	return in, p, v, root
}

// serve starts kmsd on the instance with the flags extra and returns it
// with a client of its root API key whose calls v validates.
func (in *instance) serve(t *testing.T, v *validator, extra ...string) (*proc, *client.Client) {
	t.Helper()
	p := in.start(t, extra...)
	return p, clientOf(p, t, v, in.bootstrap)
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

// waitFor polls cond until it holds, failing the test at the timeout.
var waitFor = kmsdtest.WaitFor

// bg is the context of requests that need no mark.
var bg = context.Background()
