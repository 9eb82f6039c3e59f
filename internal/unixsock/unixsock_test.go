package unixsock

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/ringkms/kms/internal/kmsdtest"
)

// The socket is 0600 whatever the umask, answers connections, and is
// gone once the listener is closed.
func TestListenMode(t *testing.T) {
	old := syscall.Umask(0) // the widest umask: every bit would be given
	defer syscall.Umask(old)
	path := filepath.Join(kmsdtest.SocketDir(t), "k.sock")
	ln, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %s, want a socket of mode 0600", fi.Mode())
	}
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Close()
		}
	}()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("dial the socket: %v", err)
	}
	c.Close()
	ln.Close()
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket file after Close: %v, want it removed", err)
	}
}

// A socket that a stopped process left behind is replaced.
func TestListenStale(t *testing.T) {
	path := filepath.Join(kmsdtest.SocketDir(t), "k.sock")
	stale, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	stale.(*net.UnixListener).SetUnlinkOnClose(false) // as a killed process leaves it
	stale.Close()
	if _, err := os.Lstat(path); err != nil {
		t.Fatalf("the stale socket is not there: %v", err)
	}
	ln, err := Listen(path)
	if err != nil {
		t.Fatalf("Listen over a stale socket = %v, want it replaced", err)
	}
	ln.Close()
}

// Anything else at the path is refused and left as it was: a file, a
// directory, a symbolic link, a socket that a process listens on.
func TestListenRefused(t *testing.T) {
	dir := kmsdtest.SocketDir(t)
	file := filepath.Join(dir, "file")
	os.WriteFile(file, []byte("precious"), 0o644)
	sub := filepath.Join(dir, "dir")
	os.Mkdir(sub, 0o755)
	link := filepath.Join(dir, "link")
	os.Symlink(file, link)
	live := filepath.Join(dir, "live.sock")
	ln, err := Listen(live)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	for _, tt := range []struct{ path, want string }{
		{file, "a regular file"}, {sub, "a directory"}, {link, "a symbolic link"}, {live, "listens"},
	} {
		_, err := Listen(tt.path)
		if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Listen(%s) = %v, want ErrRefused saying %q", tt.path, err, tt.want)
		}
	}
	if b, _ := os.ReadFile(file); string(b) != "precious" {
		t.Errorf("the file refused holds %q now", b)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode().Type() != os.ModeSymlink {
		t.Errorf("the link refused: %v, %v", fi, err)
	}
	if c, err := net.Dial("unix", live); err != nil {
		t.Errorf("the live socket refused no longer answers: %v", err)
	} else {
		c.Close()
	}
}

// A path too long for a socket, or in a directory that does not exist,
// is an error that says so.
func TestListenPath(t *testing.T) {
	if _, err := Listen("/" + strings.Repeat("x", MaxPath)); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Errorf("Listen of a long path = %v", err)
	}
	if _, err := Listen(filepath.Join(kmsdtest.SocketDir(t), "no", "k.sock")); err == nil {
		t.Error("Listen in a missing directory succeeded")
	}
}
