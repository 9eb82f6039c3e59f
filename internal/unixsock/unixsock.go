// Package unixsock makes the Unix socket of a local interface: a socket
// file that only the process's user can open (mode 0600 from the start),
// put in place of a stale socket that a process which stopped left
// behind, and never in place of anything else.
package unixsock

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
)

// MaxPath is one more than the longest path of a Unix socket (sun_path
// holds 108 bytes on Linux, its terminating NUL included).
const MaxPath = 108

// ErrRefused is the error of Listen when path holds something that is
// not a stale socket: a file, a directory, or a socket that a process
// listens on. Listen leaves it as it was.
var ErrRefused = errors.New("refused")

// umaskMu serializes the umask changes of Listen: the umask is the
// process's.
var umaskMu sync.Mutex

// dialTimeout bounds the check that a socket file found at the path is
// stale: a process that listens on it answers a connection at once.
const dialTimeout = time.Second

// Listen listens on a new Unix socket at path, mode 0600, and removes
// the file when the listener is closed. A socket file already at path
// that no process listens on is replaced; anything else there is refused
// (an error that wraps ErrRefused), and left as it is.
func Listen(path string) (net.Listener, error) {
	if len(path) >= MaxPath {
		return nil, fmt.Errorf("socket path %s has %d bytes: a Unix socket's path has at most %d", path, len(path), MaxPath-1)
	}
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, err
	case fi.Mode().Type() != fs.ModeSocket:
		return nil, fmt.Errorf("%w: %s exists and is not a socket (%s)", ErrRefused, path, kind(fi.Mode()))
	default:
		if c, err := net.DialTimeout("unix", path, dialTimeout); err == nil {
			c.Close()
			return nil, fmt.Errorf("%w: a process listens on the socket %s already", ErrRefused, path)
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("remove the stale socket %s: %w", path, err)
		}
	}
	// The socket is made with the umask's bits taken away: with 0177, no
	// one but the owner can connect from the moment it exists.
	umaskMu.Lock()
	old := syscall.Umask(0o177)
	ln, err := net.Listen("unix", path)
	syscall.Umask(old)
	umaskMu.Unlock()
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// kind names the type of a file by its mode.
func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m.IsRegular():
		return "a regular file"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "a file of mode " + m.String()
}
