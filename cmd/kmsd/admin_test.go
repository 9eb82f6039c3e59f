//go:build unix

package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/rs/zerolog"
)

// TestAdminSocketPrivateFromTheStart: the admin socket is made inside a
// directory of its own, of mode 0700, which exists before the socket: so
// even under a umask of 0 (which makes the socket 0777 as it is created)
// in a data directory of mode 0755, no other user can reach it at any
// moment. Whatever stood in the directory's place (a symlink to a
// directory others may write, a stale socket of an earlier kmsd beside
// the data) does not survive.
func TestAdminSocketPrivateFromTheStart(t *testing.T) {
	data := t.TempDir()
	if err := os.Chmod(data, 0o755); err != nil {
		t.Fatal(err)
	}
	elsewhere := t.TempDir()
	if err := os.Chmod(elsewhere, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, filepath.Join(data, adminDirName)); err != nil {
		t.Fatal(err)
	}
	legacy := filepath.Join(data, legacyAdminSocket)
	if err := os.WriteFile(legacy, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	old := syscall.Umask(0) // the tests of this package do not run in parallel
	defer syscall.Umask(old)

	log := zerolog.Nop()
	stop, err := serveAdmin(data, nil, nil, &log)
	if err != nil {
		t.Fatalf("serveAdmin = %v", err)
	}
	sock := adminSocket(data)
	dir := filepath.Dir(sock)
	if dir == data {
		t.Fatalf("the admin socket %s lies in the data directory itself (mode 0755)", sock)
	}
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Fatalf("the admin socket's directory %s: %v, %v; want a directory of mode 0700", dir, fi.Mode(), err)
	}
	if fi, err := os.Lstat(sock); err != nil || fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != 0o600 {
		t.Errorf("admin socket %s: %v, %v; want a socket of mode 0600", sock, fi.Mode(), err)
	}
	if entries, _ := os.ReadDir(elsewhere); len(entries) != 0 {
		t.Errorf("serveAdmin followed a symlink in place of its directory and made %s in %s", entries[0].Name(), elsewhere)
	}
	if _, err := os.Lstat(legacy); !os.IsNotExist(err) {
		t.Errorf("a stale %s beside the data is still there: %v", legacyAdminSocket, err)
	}
	if got, err := dialAdmin(data); err != nil || got != sock {
		t.Errorf("dialAdmin = %q, %v; want %q", got, err, sock)
	}
	stop()
	if _, err := os.Lstat(dir); !os.IsNotExist(err) {
		t.Errorf("after stop, %s is still there: %v", dir, err)
	}
}

// TestDialAdminLegacy: a kmsd started before an upgrade serves on
// admin.sock beside the data, and the subcommands still find it there.
func TestDialAdminLegacy(t *testing.T) {
	data := t.TempDir()
	legacy := filepath.Join(data, legacyAdminSocket)
	ln, err := net.Listen("unix", legacy)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if got, err := dialAdmin(data); err != nil || got != legacy {
		t.Errorf("dialAdmin = %q, %v; want %q", got, err, legacy)
	}
	ln.Close()
	if got, err := dialAdmin(data); err == nil {
		t.Errorf("dialAdmin with no kmsd = %q, nil; want an error", got)
	}
}

// TestDataDirModeWarning: kmsd warns at start when its data directory is
// open in any way to its group or to others, reading included (0750,
// 0704), and not when it is 0700.
func TestDataDirModeWarning(t *testing.T) {
	for _, c := range []struct {
		mode os.FileMode
		warn bool
	}{
		{0o700, false}, {0o750, true}, {0o740, true}, {0o710, true},
		{0o705, true}, {0o704, true}, {0o701, true}, {0o777, true},
	} {
		dir := t.TempDir()
		if err := os.Chmod(dir, c.mode); err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		log := zerolog.New(&buf)
		warnDataDirMode(dir, &log)
		if got := strings.Contains(buf.String(), "accessible to its group or other users"); got != c.warn {
			t.Errorf("data directory of mode %04o: warned %v, want %v (log: %q)", c.mode, got, c.warn, buf.String())
		}
	}
}

// TestVerifyAuditOnline: verify-audit on the data directory of a running
// kmsd is answered by that kmsd through its admin socket, without a
// master key of its own. When no kmsd answers there and the store is
// locked, it says so plainly (exit status 1), not in Badger's words.
func TestVerifyAuditOnline(t *testing.T) {
	data := t.TempDir()
	e := env{"KMS_MASTER_KEY": newKey(), "KMS_BOOTSTRAP_API_KEY": "verify-online-bootstrap-secret-0123456789"}
	s := startRun(t, []string{"-data", data, "-addr", "127.0.0.1:0", "-log-level", "warn"}, e)
	for _, ring := range []string{"ra", "rb"} {
		if code, body := call(t, nil, "POST", s.url+"/ks/keyrings", e["KMS_BOOTSTRAP_API_KEY"], map[string]any{"name": ring}); code != 200 {
			t.Fatalf("create ring = %d %v", code, body)
		}
	}

	var out bytes.Buffer
	if err := run(context.Background(), []string{"verify-audit", "-data", data, "-log-level", "warn"}, env{}.get, &out, io.Discard); err != nil {
		t.Fatalf("verify-audit beside a running kmsd, no master key = %v; printed:\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "activity chain intact") || !regexp.MustCompile(`records checked: [1-9]`).MatchString(out.String()) ||
		!regexp.MustCompile(`head digest: [0-9a-f]{64}`).MatchString(out.String()) {
		t.Errorf("verify-audit beside a running kmsd printed:\n%s", out.String())
	}

	// The socket gone, the store still locked by the running kmsd.
	if err := os.Remove(adminSocket(data)); err != nil {
		t.Fatal(err)
	}
	err := run(context.Background(), []string{"verify-audit", "-data", data, "-log-level", "warn"}, e.get, io.Discard, io.Discard)
	if err == nil || exitCode(err) != 1 {
		t.Fatalf("verify-audit with the store locked, no socket = %v (exit %d), want exit 1", err, exitCode(err))
	}
	msg := err.Error()
	if !strings.Contains(msg, "in use by another process") || !strings.Contains(msg, "stop that process first") ||
		strings.Contains(msg, "Badger") || strings.Contains(msg, "directory lock") {
		t.Errorf("verify-audit with the store locked, no socket = %q; want it to say the store is in use and to stop that process, in no words of Badger's", msg)
	}
	s.stop(t)

	// Stopped: verify-audit opens the store itself, with the master key.
	out.Reset()
	if err := run(context.Background(), []string{"verify-audit", "-data", data, "-log-level", "warn"}, e.get, &out, io.Discard); err != nil || !strings.Contains(out.String(), "intact") {
		t.Errorf("verify-audit with kmsd stopped = %v; printed:\n%s", err, out.String())
	}
}
