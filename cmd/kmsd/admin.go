package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringkms/kms"
)

// A running kmsd on the embedded store holds the store open, so the
// subcommands that read it (kmsd backup, kmsd audit export, kmsd
// verify-audit) ask that kmsd instead, on a Unix socket in its data
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
	err := fmt.Errorf("the path of %s is too long for a Unix socket, so kmsd serves none", sock)
	if len(sock) < maxSocketPath {
		var conn net.Conn
		if conn, err = net.Dial("unix", sock); err == nil {
			conn.Close()
			return sock, nil
		}
	}
	if legacy := filepath.Join(data, legacyAdminSocket); len(legacy) < maxSocketPath {
		if conn, lerr := net.Dial("unix", legacy); lerr == nil {
			conn.Close()
			return legacy, nil
		}
	}
	return "", err
}

// errStoreInUse is openStore's error when another process has the
// embedded store open.
var errStoreInUse = errors.New("another process (a running kmsd, or another kmsd command) has it open")

// storeInUse says that the store of c is in use, and why no running kmsd
// answered on the admin socket (adminErr), for the subcommands that asked
// it before they opened the store; err is openStore's error, returned as
// it is when it is another.
func storeInUse(c *config, err, adminErr error) error {
	if !errors.Is(err, errStoreInUse) || adminErr == nil {
		return err
	}
	remedy := "stop that process first"
	if errors.Is(adminErr, os.ErrPermission) {
		remedy = "run this as the user kmsd runs as, or stop that process first"
	}
	return fmt.Errorf("the store in %s is in use by another process (a running kmsd, or another kmsd command), "+
		"and no kmsd answers on its admin socket (%v): %s", c.data, adminErr, remedy)
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

// serveAdmin serves GET /backup, GET /audit (kmsd audit export) and GET
// /verify (kmsd verify-audit) on the admin socket of the data directory
// until the returned function is called.
func serveAdmin(data string, svc *kms.Service, st kms.Store, log *zerolog.Logger) (stop func(), err error) {
	dir, path := adminDir(data), adminSocket(data)
	if len(path) >= maxSocketPath {
		log.Warn().Str("socket", path).Msg("no admin socket: the data directory's path is too long for a Unix socket; kmsd backup, audit export and verify-audit work with kmsd stopped")
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
	mux.HandleFunc("GET /verify", serveVerify(svc, log))
	mux.HandleFunc("POST /rekey", func(w http.ResponseWriter, r *http.Request) {
		res, err := svc.Rekey(r.Context())
		if err != nil {
			if kms.ErrorKind(err) == kms.KindInvalid {
				log.Warn().Err(err).Msg("rekey refused; nothing was changed")
			} else {
				log.Error().Err(err).Msg("rekey failed")
			}
			http.Error(w, strings.TrimPrefix(kms.ErrorMessage(err), "rekey: "), http.StatusConflict)
			return
		}
		log.Info().Int("signingKeys", res.SigningKeys).Int("asymRings", res.AsymRings).Int("splitRings", res.SplitRings).Int("users", res.Users).Int("apiKeys", res.APIKeys).Msg("master key rotated: this kmsd goes on under its next master key")
		fmt.Fprintln(w, rekeySummary(res))
	})
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

// verifyAnswer is the admin socket's answer to GET /verify: the chain's
// check, with Broken saying what is wrong when it is broken.
type verifyAnswer struct {
	Records uint64 `json:"records"`
	Head    string `json:"head,omitempty"`
	Broken  string `json:"broken,omitempty"`
}

// serveVerify answers GET /verify: the running Service checks its
// activity chain, with its master key, as kmsd verify-audit would.
func serveVerify(svc *kms.Service, log *zerolog.Logger) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		res, err := svc.VerifyActivityChain(r.Context())
		ans := verifyAnswer{Records: res.Records, Head: res.Head}
		if err != nil {
			if kms.ErrorKind(err) != kms.KindUnprocessable {
				log.Error().Err(err).Msg("verify-audit failed")
				http.Error(w, kms.ErrorMessage(err), http.StatusInternalServerError)
				return
			}
			ans.Head, ans.Broken = "", kms.ErrorMessage(err)
		}
		log.Info().Uint64("records", ans.Records).Bool("intact", ans.Broken == "").Msg("activity chain verified")
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(ans)
	}
}

// verifyOnline asks the kmsd on the admin socket sock to check its chain.
func verifyOnline(ctx context.Context, sock string) (verifyAnswer, error) {
	var ans verifyAnswer
	body, err := askAdmin(ctx, sock, http.MethodGet, "/verify", "verify the chain")
	if err != nil {
		return ans, err
	}
	if err := json.Unmarshal(body, &ans); err != nil {
		return ans, fmt.Errorf("the running kmsd's answer: %w", err)
	}
	return ans, nil
}

// rekeyOnline asks the running kmsd at sock to rekey its store to its next
// master key, and returns what it resealed.
func rekeyOnline(ctx context.Context, sock string) (string, error) {
	body, err := askAdmin(ctx, sock, http.MethodPost, "/rekey", "rekey")
	return strings.TrimSpace(string(body)), err
}

// askAdmin sends a request to the admin socket at sock and returns the
// body of a 200 answer (at most 64 KiB), or an error with the answer's
// text; what names the request for a kmsd too old to serve it.
func askAdmin(ctx context.Context, sock, method, path, what string) ([]byte, error) {
	req, _ := http.NewRequestWithContext(ctx, method, "http://kmsd"+path, nil)
	resp, err := adminClient(sock).Do(req)
	if err != nil {
		return nil, fmt.Errorf("ask the running kmsd: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	switch {
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed:
		return nil, fmt.Errorf("the running kmsd is of a version that cannot %s while it runs: stop it first, or upgrade it", what)
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("the running kmsd: %s", strings.TrimSpace(string(body)))
	case err != nil:
		return nil, fmt.Errorf("the running kmsd's answer: %w", err)
	}
	return body, nil
}
