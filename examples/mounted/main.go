// Command mounted serves ringkms inside an existing application: the
// httpapi handler is mounted under /kms/ of the application's own
// http.ServeMux, next to the application's routes.
//
// It listens on 127.0.0.1 (a free port) for a moment, calls a few
// endpoints through the /kms prefix with package client and the
// application's own route with plain net/http, then shuts down.
//
//	go run ./examples/mounted            # a temporary data directory
//	go run ./examples/mounted -data DIR  # DIR, kept: run it again on it
package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/client"
	"github.com/ringkms/kms/httpapi"
	"github.com/ringkms/kms/store/badgerstore"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "mounted:", err)
		os.Exit(1)
	}
}

func run() error {
	data := flag.String("data", "", "data directory of the Badger store (default: a new temporary directory, removed at the end)")
	flag.Parse()
	if *data == "" {
		dir, err := os.MkdirTemp("", "ringkms-mounted-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		*data = dir
	}
	ctx := context.Background()

	// The Service, as in examples/inprocess: its master key, and the
	// secret of the root API key it makes on a new store, kept beside the
	// data, so that a later run opens the same store and calls it again.
	masterKey, err := loadMasterKey(*data)
	if err != nil {
		return err
	}
	rootSecret, err := keptSecret(*data, "root.key", func() string { return "rk_" + rand.Text() + rand.Text() })
	if err != nil {
		return err
	}
	st, err := badgerstore.OpenDir(*data)
	if err != nil {
		return err
	}
	defer st.Close()
	svc, err := kms.New(st, kms.Options{MasterKey: masterKey})
	if err != nil {
		return err
	}
	defer svc.Close()
	if _, err := svc.Bootstrap(ctx, rootSecret); err != nil {
		return err
	}

	// The application's mux: its own route, and ringkms under /kms/. The
	// handler expects its paths from the root, so the prefix is stripped.
	mux := http.NewServeMux()
	mux.HandleFunc("GET /hello", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hello from the application")
	})
	mux.Handle("/kms/", http.StripPrefix("/kms", httpapi.New(svc, httpapi.Options{})))

	// A server with timeouts, as any server facing a network should have.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: time.Minute}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	base := "http://" + ln.Addr().String()
	fmt.Printf("serving on %s: the application on /, ringkms on /kms/\n", base)

	callErr := calls(ctx, base, rootSecret)

	// Shut down: stop taking requests, finish those in flight, within a
	// bound; the deferred Close calls then stop the Service and the store.
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return err
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	fmt.Println("shut down")
	return callErr
}

// calls talks to the application and, through the /kms prefix, to ringkms.
func calls(ctx context.Context, base, apiKey string) error {
	resp, err := http.Get(base + "/hello")
	if err != nil {
		return err
	}
	hello, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	fmt.Printf("GET /hello: %s", hello)

	// The client's base URL carries the prefix.
	c, err := client.New(base+"/kms", client.WithAPIKey(apiKey))
	if err != nil {
		return err
	}
	if err := c.Healthz(ctx); err != nil {
		return err
	}
	fmt.Println("GET /kms/healthz: ok")
	ring, err := c.CreateKeyRing(ctx, kms.CreateKeyRingInput{Name: "sessions-" + rand.Text()[:6], KEM: "x25519"})
	if err != nil {
		return err
	}
	fmt.Printf("POST /kms/ks/keyrings: created %q with public key %s...\n", ring.Ring.Name, ring.Ring.PublicKey[:12])
	enc, err := c.Encrypt(ctx, kms.EncryptInput{RingName: ring.Ring.Name})
	if err != nil {
		return err
	}
	fmt.Printf("POST /kms/ks/encrypt: key %s, header of %d characters\n", enc.Key.ID, len(enc.Header))
	list, err := c.ListKeyRings(ctx, kms.PageRequest{})
	if err != nil {
		return err
	}
	fmt.Printf("GET /kms/ks/keyrings: %d ring(s)\n", list.Pagination.Count)
	return nil
}

// loadMasterKey returns the master key kept in dir/master.key, making it
// on first use (as kmsd -dev does). For an example only: whoever can read
// dir can then read every secret in the store.
func loadMasterKey(dir string) (kms.MasterKey, error) {
	text, err := keptSecret(dir, "master.key", func() string { return kms.GenerateMasterKey().Base64() })
	if err != nil {
		return kms.MasterKey{}, err
	}
	return kms.ParseMasterKey(text)
}

// keptSecret returns the text of dir/name, or, when there is no such file
// yet, the text of gen, which it first writes there (mode 0600).
func keptSecret(dir, name string, gen func() string) (string, error) {
	path := filepath.Join(dir, name)
	b, err := os.ReadFile(path)
	if err == nil {
		return strings.TrimSpace(string(b)), nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	text := gen()
	return text, os.WriteFile(path, []byte(text+"\n"), 0o600)
}
