package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ringkms/kms/internal/docblock"
	"github.com/ringkms/kms/internal/kmsdtest"
)

// quickStart returns the script of the README's quick start: the first sh
// block of its section.
func quickStart(t *testing.T) string {
	t.Helper()
	section := docblock.Section(t, "README.md", "## Quick start")
	m := regexp.MustCompile("(?s)```sh\n(.*?)```").FindStringSubmatch(section)
	if m == nil {
		t.Fatal("README.md has no sh block under ## Quick start")
	}
	return m[1]
}

// quickStartDir makes a directory that holds what the root of a clone
// holds, as symbolic links, but for what the quick start writes there:
// the script runs in it as at the root of the clone.
func quickStartDir(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	written := regexp.MustCompile(`^(\.git|data|kmsd|kmsctl|kmsd\.log|quickstart\.sh|.*\.key|report.*)$`)
	for _, e := range entries {
		if written.MatchString(e.Name()) {
			continue
		}
		if err := os.Symlink(filepath.Join(root, e.Name()), filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// runScript runs script with sh in dir, in a process group of its own,
// and returns its exit status and output once sh has exited. It fails
// the test if anything of the group (kmsd) outlives sh, and kills it.
func runScript(t *testing.T, dir, script string, env []string) (int, string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "quickstart.sh"), []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "quickstart.sh")
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// A kmsd left running holds the output open: Wait returns anyway.
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	err := cmd.Wait()
	if err := syscall.Kill(-pgid, 0); !errors.Is(err, syscall.ESRCH) {
		syscall.Kill(-pgid, syscall.SIGKILL)
		t.Errorf("a process of the quick start outlived it (kill -0 of its group = %v): kmsd left running\n%s", err, &out)
	}
	if ctx.Err() != nil || cmd.ProcessState == nil {
		t.Fatalf("sh quickstart.sh: %v (%v)\n%s", err, ctx.Err(), &out)
	}
	return cmd.ProcessState.ExitCode(), out.String()
}

// TestQuickStart runs the README's quick start as a script, as it says
// to, twice in a row in one directory, on a free port: each run succeeds
// (a file encrypted and decrypted back, the Go client's tour), and kmsd
// is gone after each. With a step that fails, the script stops there and
// kmsd is gone too.
func TestQuickStart(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds and runs kmsd, kmsctl and examples/client; skipped with -short")
	}
	kmsdtest.TrackSources()
	script := quickStart(t)
	const defaultAddr = "127.0.0.1:8200"
	if strings.Count(script, defaultAddr) != 1 {
		t.Fatalf("the quick start names %s %d times, want once (KMS_ADDR)", defaultAddr, strings.Count(script, defaultAddr))
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	script = strings.Replace(script, defaultAddr, addr, 1)
	env := kmsdtest.Env("KMS_LISTEN="+addr, "KMSCTL_CONFIG_DIR="+t.TempDir())
	dir := quickStartDir(t)

	for run := 1; run <= 2; run++ {
		code, out := runScript(t, dir, script, env)
		if code != 0 {
			t.Fatalf("run %d: sh quickstart.sh exited %d\n%s", run, code, out)
		}
		for _, want := range []string{"private key:   written to documents.key", "decrypt gave it back: true"} {
			if !strings.Contains(out, want) {
				t.Errorf("run %d: the output lacks %q\n%s", run, want, out)
			}
		}
		if got, err := os.ReadFile(filepath.Join(dir, "report-decrypted.txt")); err != nil || string(got) != "Q3 revenue: up 12%\n" {
			t.Errorf("run %d: report-decrypted.txt = %q, %v", run, got, err)
		}
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			t.Errorf("run %d: something still listens on %s after the quick start", run, addr)
		}
	}

	// A step that fails (the ring exists by then): the script stops
	// there, nothing after it runs, and kmsd stops with it.
	create := "./kmsctl ring create -private-key-out documents.key documents\n"
	if !strings.Contains(script, create) {
		t.Fatalf("the quick start has no line %q", create)
	}
	failing := strings.Replace(script, create, create+"./kmsctl ring create documents\n", 1)
	code, out := runScript(t, dir, failing, env)
	if code == 0 {
		t.Fatalf("the quick start with a failing step exited 0\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(dir, "report.txt.rkms")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the steps after the failing one ran (report.txt.rkms: %v)\n%s", err, out)
	}
	if !strings.Contains(out, "kmsctl: ") {
		t.Errorf("the output does not show the failing step's error\n%s", out)
	}
	t.Logf("with a failing step, exit %d:\n%s", code, out)
}
