package kmstest

import (
	"encoding/pem"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// AppBody is what a mux that Serve mounts a handler in answers, with 418
// I'm a teapot, on every path outside the mount: the application the
// handler is mounted in.
const AppBody = "the app"

// Serve serves h on a loopback HTTP server until the end of the test, and
// returns the server and the base URL at which h answers. With mount empty
// h is the server's handler and the base URL the server's. With mount (a
// path ending in "/", as "/kms/"), h is served under that prefix of a mux,
// with the prefix stripped, the mux answers AppBody everywhere else, and
// the base URL ends in mount.
func Serve(t testing.TB, h http.Handler, mount string) (*httptest.Server, string) {
	t.Helper()
	if mount != "" {
		if !strings.HasPrefix(mount, "/") || !strings.HasSuffix(mount, "/") {
			t.Fatalf("Serve: mount %q does not start and end with /", mount)
		}
		mux := http.NewServeMux()
		mux.Handle(mount, http.StripPrefix(strings.TrimSuffix(mount, "/"), h))
		mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { http.Error(w, AppBody, http.StatusTeapot) })
		h = mux
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, srv.URL + mount
}

// ServeTLS serves h on a loopback HTTPS server until the end of the test,
// with a certificate of httptest's own CA, which no system trusts, and
// returns the server, the CA's certificate (PEM) and a file that holds it,
// for a client to be given. The server's log of refused handshakes is
// discarded: refusing them is what such a test is after.
func ServeTLS(t testing.TB, h http.Handler) (srv *httptest.Server, caPEM []byte, caFile string) {
	t.Helper()
	srv = httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	caFile = filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	return srv, caPEM, caFile
}
