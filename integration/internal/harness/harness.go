// Package harness runs the real kmsd for the integration tests: it
// builds kmsd once per test binary from the root module, starts it on a
// fresh data directory with a random master key and bootstrap API key,
// and gives the tests kmsd's own client and API keys with chosen flags.
package harness

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/client"
	"github.com/ringkms/kms/internal/kmsdtest"
	"github.com/ringkms/kms/internal/pgtest"
)

// kmsdPath is the kmsd binary that Main builds.
var kmsdPath string

// Main builds kmsd from the root module and runs the tests, which share
// one PostgreSQL server (pgtest.Main) when they ask for databases: call
// it from TestMain as os.Exit(harness.Main(m)).
func Main(m *testing.M) int {
	dir, err := os.MkdirTemp("", "ringkms-integration-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	root, err := rootDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration:", err)
		return 1
	}
	kmsdPath = filepath.Join(dir, "kmsd")
	cmd := exec.Command(kmsdtest.GoTool(), "build", "-o", kmsdPath, "./cmd/kmsd")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "integration: go build kmsd: %v\n%s", err, out)
		return 1
	}
	return pgtest.Main(m)
}

// rootDir is the root module's folder, where the replace directive of
// this module's go.mod points.
func rootDir() (string, error) {
	out, err := exec.Command(kmsdtest.GoTool(), "list", "-m", "-f", "{{.Dir}}", "github.com/ringkms/kms").Output()
	if err != nil {
		return "", fmt.Errorf("go list -m github.com/ringkms/kms: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// Instance is one kmsd data directory, with the keys kmsd starts with.
type Instance struct {
	Data      string // -data
	MasterKey string // KMS_MASTER_KEY
	Bootstrap string // KMS_BOOTSTRAP_API_KEY: the root API key
}

// New makes a fresh data directory, random master key and bootstrap API
// key.
func New(t testing.TB) *Instance {
	t.Helper()
	track.Do(kmsdtest.TrackSources)
	mk := make([]byte, 32)
	rand.Read(mk)
	return &Instance{
		Data:      filepath.Join(t.TempDir(), "data"),
		MasterKey: base64.StdEncoding.EncodeToString(mk),
		Bootstrap: "rk_it_" + rand.Text() + rand.Text(),
	}
}

// track makes go test's cache run the tests again when the root
// module's sources change, since kmsd is built from them.
var track sync.Once

func (in *Instance) env() []string {
	return kmsdtest.Env("KMS_MASTER_KEY="+in.MasterKey, "KMS_BOOTSTRAP_API_KEY="+in.Bootstrap)
}

// Start runs kmsd on the instance on a loopback port with the flags
// given, and waits until it listens; it is killed at the end of the test
// if it still runs.
func (in *Instance) Start(t testing.TB, flags ...string) *kmsdtest.Proc {
	t.Helper()
	return in.StartBinary(t, kmsdPath, flags...)
}

// StartBinary is Start with the kmsd binary bin: a release's (Release),
// to write a store that this tree's kmsd then opens.
func (in *Instance) StartBinary(t testing.TB, bin string, flags ...string) *kmsdtest.Proc {
	t.Helper()
	return kmsdtest.Start(t, bin, in.env(), StartTimeout, in.args(flags)...)
}

// Launch is Start without waiting for kmsd to listen, so that several
// nodes start together; wait with p.Listen(t, harness.StartTimeout).
func (in *Instance) Launch(t testing.TB, flags ...string) *kmsdtest.Proc {
	t.Helper()
	return kmsdtest.Launch(t, kmsdPath, in.env(), in.args(flags)...)
}

// StartTimeout bounds the wait for a kmsd to listen.
const StartTimeout = 30 * time.Second

// args are kmsd's arguments on the instance with flags (which come last,
// so that they win).
func (in *Instance) args(flags []string) []string {
	return append([]string{"-addr", "127.0.0.1:0", "-data", in.Data, "-log-level", "warn"}, flags...)
}

// Release builds kmsd as the commit rev of the root module's repository
// has it, from the commit's files (git archive), and returns the
// binary's path. The build may fetch the commit's modules from the
// module proxy. A repository without the commit (a shallow clone), or
// without git, skips the test, or fails it under CI=true; a commit that
// does not build fails it.
func Release(t testing.TB, rev string) string {
	t.Helper()
	root, err := rootDir()
	if err != nil {
		t.Fatal(err)
	}
	find := exec.Command("git", "cat-file", "-e", rev+"^{commit}")
	find.Dir = root
	if out, err := find.CombinedOutput(); err != nil {
		msg := fmt.Sprintf("harness: commit %s is not in the repository at %s (a shallow clone? git fetch --unshallow): %v %s", rev, root, err, strings.TrimSpace(string(out)))
		if os.Getenv("CI") != "true" {
			t.Skip(msg)
		}
		t.Fatal(msg)
	}
	src := t.TempDir()
	archive := exec.Command("git", "archive", rev)
	archive.Dir = root
	tarball, err := archive.Output()
	if err != nil {
		t.Fatalf("harness: git archive %s: %v", rev, err)
	}
	extract := exec.Command("tar", "-x", "-C", src)
	extract.Stdin = bytes.NewReader(tarball)
	if out, err := extract.CombinedOutput(); err != nil {
		t.Fatalf("harness: tar -x of git archive %s: %v\n%s", rev, err, out)
	}
	bin := filepath.Join(t.TempDir(), "kmsd-"+rev)
	build := exec.Command(kmsdtest.GoTool(), "build", "-trimpath", "-o", bin, "./cmd/kmsd")
	build.Dir = src
	build.Env = append(os.Environ(), "GOFLAGS=-mod=mod -buildvcs=false", "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("harness: go build kmsd of %s: %v\n%s", rev, err, out)
	}
	return bin
}

// VerifyAudit runs kmsd verify-audit on the instance's store (kmsd must
// be stopped) and fails the test unless the activity chain is intact.
func (in *Instance) VerifyAudit(t testing.TB) {
	t.Helper()
	cmd := exec.Command(kmsdPath, "verify-audit", "-data", in.Data)
	cmd.Env = in.env()
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "activity chain intact") {
		t.Fatalf("kmsd verify-audit: %v\n%s", err, out)
	}
}

// Client is kmsd's own client of p acting with secret.
func Client(t testing.TB, p *kmsdtest.Proc, secret string) *client.Client {
	t.Helper()
	c, err := client.New(p.URL, client.WithAPIKey(secret))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// APIKey creates an API key of the bootstrap account holding flags and
// returns its secret.
func (in *Instance) APIKey(t testing.TB, p *kmsdtest.Proc, flags ...string) string {
	t.Helper()
	return in.NewAPIKey(t, p, flags...).Key
}

// NewAPIKey creates an API key of the bootstrap account holding flags and
// returns it with its ID and secret: an AWS client's access key ID and
// secret access key.
func (in *Instance) NewAPIKey(t testing.TB, p *kmsdtest.Proc, flags ...string) *kms.APIKey {
	t.Helper()
	f := kms.Flags{}
	for _, name := range flags {
		f[name] = true
	}
	k, err := Client(t, p, in.Bootstrap).CreateAPIKey(context.Background(),
		kms.APIKeyInput{AccountID: kms.BootstrapAccountUID, AccountByUID: true, Flags: f})
	if err != nil {
		t.Fatalf("create an API key with %v: %v", flags, err)
	}
	return k
}

// Actions returns the actions of the first page of the activity records
// that f selects, in the trail's order, separated by spaces.
func Actions(t testing.TB, c *client.Client, f client.ActivityFilter) string {
	t.Helper()
	recs, err := c.SearchActivity(context.Background(), f, kms.PageRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, a := range recs.Data {
		actions = append(actions, a.Action)
	}
	return strings.Join(actions, " ")
}
