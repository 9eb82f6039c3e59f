package harness

// The real sops command line (Mozilla SOPS, github.com/getsops/sops),
// built from its Go module at a pinned version and kept in the user's
// cache directory, so that it is built once per machine and version. The
// build needs the Go module proxy (or a module cache that holds sops's
// modules) the first time only.
//
// KMS_TEST_SOPS names a sops binary to use instead. Without one, and when
// the build fails, SOPS skips the test, or fails it under CI=true.

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/ringkms/kms/internal/kmsdtest"
)

// SOPSVersion is the sops release the tests run.
const SOPSVersion = "v3.13.3"

// sopsModule is what go install builds.
const sopsModule = "github.com/getsops/sops/v3/cmd/sops@" + SOPSVersion

var (
	sopsOnce  sync.Once
	sopsPath  string
	sopsBuilt error
)

// SOPS returns the path of the sops command, building it on first use.
func SOPS(t testing.TB) string {
	t.Helper()
	sopsOnce.Do(func() { sopsPath, sopsBuilt = findSOPS() })
	if sopsBuilt != nil {
		if os.Getenv("CI") != "true" {
			t.Skipf("sops: %v", sopsBuilt)
		}
		t.Fatalf("sops: %v", sopsBuilt)
	}
	return sopsPath
}

// findSOPS returns KMS_TEST_SOPS, or the cached build of SOPSVersion, building it
// when it is not there.
func findSOPS() (string, error) {
	if p := os.Getenv("KMS_TEST_SOPS"); p != "" {
		return p, nil
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory for the sops build: %w", err)
	}
	dir := filepath.Join(cache, "ringkms", "sops-"+SOPSVersion)
	bin := filepath.Join(dir, "sops")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// Test binaries of several packages may build at once: one does, the
	// others wait for it.
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", err
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	// go install writes the binary into GOBIN once it is linked, so a
	// build cut short leaves none behind.
	tmp, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	cmd := exec.Command(kmsdtest.GoTool(), "install", sopsModule)
	cmd.Env = append(os.Environ(), "GOBIN="+tmp, "GOFLAGS=-buildvcs=false", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go install %s: %v\n%s", sopsModule, err, strings.TrimSpace(string(out)))
	}
	if err := os.Rename(filepath.Join(tmp, "sops"), bin); err != nil {
		return "", err
	}
	return bin, nil
}

// RunSOPS runs the real sops command line with args in dir, with env as
// its whole environment (HOME is dir, so that nothing of the machine's
// home is read), and returns what it printed.
func RunSOPS(t testing.TB, dir string, env []string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := exec.Command(SOPS(t), args...)
	cmd.Dir = dir
	for _, kv := range env {
		if !strings.HasPrefix(kv, "SOPS_") && !strings.HasPrefix(kv, "HOME=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "HOME="+dir)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	return out.String(), errb.String(), err
}
