package main

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"

	"github.com/rs/zerolog"

	"github.com/ringkms/kms/metrics"
)

// metricsServer is what kmsd serves its Prometheus metrics with: the
// metrics, and the handler of GET /metrics (behind a bearer token when
// one is set). Nil when metrics are off.
type metricsServer struct {
	m       *metrics.Metrics
	handler http.Handler
}

// newMetrics returns the metrics server of c, or nil when neither
// -metrics nor -metrics-addr asks for one.
func newMetrics(c *config, getenv func(string) string, log *zerolog.Logger) (*metricsServer, error) {
	if !c.metrics && c.metricsAddr == "" {
		return nil, nil
	}
	token, err := metricsToken(c, getenv, log)
	if err != nil {
		return nil, err
	}
	m := metrics.New(metrics.Options{MaxRings: c.metricsRings})
	return &metricsServer{m: m, handler: requireToken(token, m.Handler())}, nil
}

// metricsToken reads the token GET /metrics requires: KMS_METRICS_TOKEN or
// the -metrics-token-file (checked first as every file holding a secret
// is: checkSecretFile); empty for none.
func metricsToken(c *config, getenv func(string) string, log *zerolog.Logger) (string, error) {
	env := getenv("KMS_METRICS_TOKEN")
	switch {
	case env != "" && c.metricsTokenFile != "":
		return "", usagef("KMS_METRICS_TOKEN and -metrics-token-file are both set; use one")
	case c.metricsTokenFile != "":
		if err := checkSecretFile(c.metricsTokenFile, "-metrics-token-file", log); err != nil {
			return "", err
		}
		b, err := os.ReadFile(c.metricsTokenFile)
		if err != nil {
			return "", fmt.Errorf("-metrics-token-file: %w", err)
		}
		env = strings.TrimSpace(string(b))
		if env == "" {
			return "", fmt.Errorf("-metrics-token-file %s is empty", c.metricsTokenFile)
		}
	}
	if env != "" && len(env) < 16 {
		return "", usagef("the metrics token has %d characters; it needs at least 16", len(env))
	}
	return env, nil
}

// requireToken answers 401 to a request without "Authorization: Bearer
// token", when token is set.
func requireToken(token string, next http.Handler) http.Handler {
	if token == "" {
		return next
	}
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="metrics"`)
			http.Error(w, "the metrics need their bearer token", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// withMetrics routes GET /metrics to ms on the main listener, and every
// other request to next.
func withMetrics(ms *metricsServer, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			ms.handler.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// serveMetrics serves GET /metrics on a listener of its own at addr until
// the returned stop is called.
func serveMetrics(addr string, ms *metricsServer, stderr io.Writer, log *zerolog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on -metrics-addr %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", ms.handler)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: readHeaderTimeout, ReadTimeout: readTimeout,
		WriteTimeout: writeTimeout, IdleTimeout: idleTimeout, MaxHeaderBytes: maxHeaderBytes}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error().Err(err).Str("addr", addr).Msg("metrics listener failed")
		}
	}()
	log.Info().Str("addr", ln.Addr().String()).Msg("serving metrics")
	fmt.Fprintf(stderr, "kmsd metrics on http://%s/metrics\n", ln.Addr())
	return func() {
		srv.Close()
	}, nil
}
