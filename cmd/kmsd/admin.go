package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringkms/kms"
)

// A running kmsd on the embedded store holds the store open, so the
// subcommands that read it (kmsd backup, kmsd audit export) ask that kmsd
// instead, on a Unix socket in its data
// directory. Whoever may use the socket may read the data directory
// already, which holds the same sealed secrets.
//
// The socket lies in a directory of its own, admin/, of mode 0700, made
// before the socket: so the socket is out of other users' reach from the
// moment it exists, whatever the process umask (and without changing the
// umask, which is the whole process's). A socket made beside the data and
// chmod-ed after would be open, between the two calls, to what the umask
// lets through.
const (
	adminDirName    = "admin"
	adminSocketName = "kmsd.sock"

	// legacyAdminSocket is where kmsd kept the socket before it had a
	// directory of its own: the subcommands still ask there, so that a
	// new binary reaches a kmsd started before an upgrade.
	legacyAdminSocket = "admin.sock"
)

func adminDir(data string) string    { return filepath.Join(data, adminDirName) }
func adminSocket(data string) string { return filepath.Join(adminDir(data), adminSocketName) }

// adminClient is an HTTP client of the admin socket at sock.
func adminClient(sock string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
}

// maxSocketPath is the longest path of a Unix socket that every Unix
// takes (sun_path is 104 bytes on the BSDs, 108 on Linux, with its NUL).
const maxSocketPath = 104

// dialAdmin finds the admin socket of a kmsd running on the data
// directory data: its path, or an error saying why none answers there.
func dialAdmin(data string) (string, error) {
	sock := adminSocket(data)
	if len(sock) >= maxSocketPath {
		return "", fmt.Errorf("the path of %s is too long for a Unix socket, so kmsd serves none", sock)
	}
	conn, err := net.Dial("unix", sock)
	if err == nil {
		conn.Close()
		return sock, nil
	}
	if legacy := filepath.Join(data, legacyAdminSocket); len(legacy) < maxSocketPath {
		if conn, lerr := net.Dial("unix", legacy); lerr == nil {
			conn.Close()
			return legacy, nil
		}
	}
	return "", err
}

// prepareAdminDir makes dir, the admin socket's directory, anew: a
// directory of mode 0700 that this process created, so that no one else
// can have put anything in it nor can reach into it.
func prepareAdminDir(dir string) error {
	// kmsd holds the store's lock: whatever is here is stale.
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	// Mkdir fails on anything made here since: what it makes is ours,
	// and its mode no wider than 0700 whatever the umask.
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	return os.Chmod(dir, 0o700) // the owner's bits, should the umask have taken some
}

// serveAdmin serves GET /backup and GET /audit (kmsd audit export) on the
// admin socket of the data directory until the returned function is
// called.
func serveAdmin(data string, svc *kms.Service, st kms.Store, log *zerolog.Logger) (stop func(), err error) {
	dir, path := adminDir(data), adminSocket(data)
	if len(path) >= maxSocketPath {
		log.Warn().Str("socket", path).Msg("no admin socket: the data directory's path is too long for a Unix socket; kmsd backup and audit export work with kmsd stopped")
		return func() {}, nil
	}
	if err := os.Remove(filepath.Join(data, legacyAdminSocket)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("admin socket: remove the stale %s: %w", legacyAdminSocket, err)
	}
	if err := prepareAdminDir(dir); err != nil {
		return nil, fmt.Errorf("admin socket directory: %w", err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("admin socket %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("admin socket: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /backup", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		info, err := svc.Backup(r.Context(), w)
		if err != nil {
			// Nothing written yet: say why. Once bytes went out, the
			// backup ends without its end frame, which kmsd backup
			// detects; the reason is in the log.
			log.Error().Err(err).Msg("backup failed")
			http.Error(w, kms.ErrorMessage(err), http.StatusInternalServerError)
			return
		}
		log.Info().Uint64("entries", info.Entries).Uint64("records", info.Records).Msg("backup taken")
	})
	mux.HandleFunc("GET /audit", serveExport(st))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		srv.Shutdown(ctx)
		os.Remove(path)
		os.Remove(dir)
	}, nil
}
