package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ringkms/kms/internal/interrupt"
)

// The baseline is the floor under kmsd's figures: a Go net/http server
// that does the work of a trivial JSON API endpoint and nothing else. It
// decodes the same request bodies kmsd gets and answers a small JSON
// object, with no authentication, crypto or store, so the distance
// between the two rows is what kmsd itself costs.

// baselineHandler decodes a JSON body of at most 1 MiB and answers a
// small JSON object; a body that is not JSON is a 400.
func baselineHandler() http.Handler {
	var seq atomic.Int64
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			json.NewEncoder(w).Encode(map[string]string{"message": "method not allowed"})
			return
		}
		var in struct {
			RingName string `json:"ringname"`
			Hash     string `json:"hash"`
			Header   string `json:"header"`
		}
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&in); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			json.NewEncoder(w).Encode(map[string]string{"message": "invalid JSON body"})
			return
		}
		json.NewEncoder(w).Encode(struct {
			ID       string `json:"id"`
			RingName string `json:"ringname"`
			OK       bool   `json:"ok"`
		}{strconv.FormatInt(seq.Add(1), 10), in.RingName, true})
	})
}

// baselineEnv, set to 1 in kmsbench's environment, makes it the baseline
// server instead of the load tool (serveBaseline). kmsbench starts the
// baseline so, as a process of its own, because that is how kmsd runs:
// served from inside the load tool's process, the handler would share its
// Go scheduler and take requests and answers from its goroutines without
// the system calls and thread wake-ups that crossing between two processes
// costs, and the floor would not be measured the way kmsd is. (On the
// 2-core machine of docs/BENCHMARKS.md, the in-process handler served 55k calls/s,
// p99 3.4 ms, and the same handler in its own process 46k, p99 5.9 ms.)
const baselineEnv = "KMSBENCH_BASELINE_SERVER"

// startBaseline runs this program again as the baseline server and waits
// until it listens; the caller stops it with terminate.
func startBaseline(ctx context.Context, tls *tlsFiles) (*process, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), baselineEnv+"=1")
	if tls != nil {
		cmd.Env = append(cmd.Env, baselineTLSEnv+"="+tls.cert+":"+tls.key)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = cmd.Stdout // one stream, for the tail an error shows
	return startProcess(ctx, "the baseline server", cmd, stdout, baselineListeningRE)
}

var baselineListeningRE = regexp.MustCompile(`^baseline listening on (https?://\S+)$`)

// baselineMain is main for the baseline server: serveBaseline until
// SIGTERM or SIGINT.
func baselineMain() {
	ctx, stop := interrupt.Context()
	defer stop()
	var certFile, keyFile string
	if v := os.Getenv(baselineTLSEnv); v != "" {
		certFile, keyFile, _ = strings.Cut(v, ":")
	}
	if err := serveBaseline(ctx, os.Stdout, certFile, keyFile); err != nil {
		fmt.Fprintf(os.Stderr, "kmsbench baseline server: %v\n", err)
		os.Exit(1)
	}
}

// serveBaseline is the baseline server: it serves baselineHandler on
// 127.0.0.1:0, with kmsd's server timeouts (over TLS with certFile and
// keyFile, as kmsd's -tls-cert and -tls-key, when they are set), writes
// the line "baseline listening on URL" to stdout, and serves until ctx is
// done (SIGTERM, as kmsd).
func serveBaseline(ctx context.Context, stdout io.Writer, certFile, keyFile string) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           baselineHandler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	served := make(chan error, 1)
	scheme := "http"
	if certFile != "" {
		scheme = "https"
		srv.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12} // kmsd's
		go func() { served <- srv.ServeTLS(ln, certFile, keyFile) }()
	} else {
		go func() { served <- srv.Serve(ln) }()
	}
	fmt.Fprintf(stdout, "baseline listening on %s://%s\n", scheme, ln.Addr())
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
	}
	if err := <-served; err != http.ErrServerClosed {
		return err
	}
	return nil
}
