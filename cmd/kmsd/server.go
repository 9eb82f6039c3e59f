package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	stdlog "log"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/awskms"
	"github.com/ringkms/kms/httpapi"
	"github.com/ringkms/kms/mail"
	"github.com/ringkms/kms/store/badgerstore"
	"github.com/ringkms/kms/store/pgstore"
	"github.com/ringkms/kms/transit"
)

// Timeouts of the HTTP server. A request is small JSON both ways, so a
// client that takes longer than these is broken or hostile.
const (
	readHeaderTimeout = 10 * time.Second
	readTimeout       = 30 * time.Second
	writeTimeout      = 30 * time.Second
	idleTimeout       = 2 * time.Minute
	maxHeaderBytes    = 64 << 10

	// shutdownTimeout bounds the wait for requests in flight after
	// SIGINT or SIGTERM; connections still open after it are closed.
	shutdownTimeout = 10 * time.Second
)

// defaultMemoryLimit is the Go runtime's soft memory limit when
// GOMEMLIMIT is not set. Under sustained writes, Badger's compactions
// allocate and drop buffers of megabytes at a high rate; with the default
// GOGC alone the heap then grows to twice what is live. The limit makes the
// collector run earlier instead. It bounds the Go heap only: the pages of
// the store that Badger maps come on top (docs/OPERATIONS.md, section 9).
const defaultMemoryLimit = 160 << 20

// defaultGCPercent is the Go runtime's GOGC when GOGC is not set. kmsd's
// live heap is small (on PostgreSQL, ten-odd MiB, with no store in the
// process) while every call allocates a few KiB, so at the default of 100
// the collector runs several times a second and took 8% of kmsd's CPU
// under load. At 400 the heap may grow to five times what is live, and
// defaultMemoryLimit still makes the collector run before the heap passes
// it.
const defaultGCPercent = 400

// lockMemory is mlockall; tests that run the server in their own process
// replace it.
var lockMemory = mlockall

// minBootstrapKeyLen is the shortest KMS_BOOTSTRAP_API_KEY accepted.
const minBootstrapKeyLen = 32

// serve runs the server until ctx is done, then shuts it down: HTTP first
// (requests in flight finish, within shutdownTimeout), then the Service,
// then the store.
func serve(ctx context.Context, c *config, getenv func(string) string, stdout, stderr io.Writer, log *zerolog.Logger) error {
	// Check everything that can be checked before touching the data.
	bootstrapKey := getenv("KMS_BOOTSTRAP_API_KEY")
	if bootstrapKey != "" && len(bootstrapKey) < minBootstrapKeyLen {
		return usagef("KMS_BOOTSTRAP_API_KEY has %d characters; it needs at least %d (generate one with: head -c 32 /dev/urandom | base64)",
			len(bootstrapKey), minBootstrapKeyLen)
	}
	var tlsConfig *tls.Config
	if c.tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(c.tlsCert, c.tlsKey)
		if err != nil {
			return fmt.Errorf("TLS: load -tls-cert %s and -tls-key %s: %w", c.tlsCert, c.tlsKey, err)
		}
		tlsConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	mailer, err := newMailer(c, getenv, log)
	if err != nil {
		return err
	}
	ms, err := newMetrics(c, getenv, log)
	if err != nil {
		return err
	}
	// The header signing key in a token, found before the data is touched.
	tk, err := openTokenKey(c, getenv, log)
	if err != nil {
		return err
	}
	defer func() {
		if err := tk.close(); err != nil {
			log.Warn().Err(err).Msg("close the PKCS#11 token of the header signing key")
		}
	}()

	if getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(defaultMemoryLimit)
	}
	if getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGCPercent)
	}
	lockMemory(log) // before the master key is in memory
	mk, err := loadMasterKey(c, getenv, true, log)
	if err != nil {
		return err
	}
	next, err := c.nextKeyRole().load(c, getenv, log)
	if err != nil {
		return err
	}
	logSetup(c, getenv, log)
	k8s, err := listenK8s(c, ms, log)
	if err != nil {
		return err
	}
	defer k8s.stop(shutdownTimeout)
	if err := os.MkdirAll(c.data, 0o700); err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	warnDataDirMode(c.data, log)
	if c.legacyAddr {
		log.Warn().Str("addr", c.addr).Msg("listening on the host:port of KMS_ADDR, which is deprecated: KMS_ADDR is now the clients' URL of the service (http://...), which kmsd ignores; set KMS_LISTEN (or -addr) instead")
	}
	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", c.addr, err)
	}
	scheme := "http"
	if tlsConfig != nil {
		scheme = "https"
	}
	url := scheme + "://" + ln.Addr().String()
	baseURL := c.baseURL
	if baseURL == "" {
		baseURL = defaultBaseURL(scheme, ln.Addr())
	}

	httpLog := log.With().Str("component", "http").Logger()
	hopts := httpapi.Options{Logger: &httpLog, ClientIPHeader: c.clientIP, ClientIPHops: c.clientIPHops}
	handler := &switchHandler{}
	var root http.Handler = handler
	if ms != nil {
		hopts.Requests = ms.m
		if c.metrics {
			root = withMetrics(ms, handler)
		}
		if c.metricsAddr != "" {
			stop, err := serveMetrics(c.metricsAddr, ms, stderr, log)
			if err != nil {
				ln.Close()
				return err
			}
			defer stop()
		}
	}
	srv := &http.Server{
		Handler:           root,
		TLSConfig:         tlsConfig,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          stdlog.New(httpErrorLog{log}, "", 0),
	}
	served := make(chan error, 1)
	serving := false
	startServing := func() {
		serving = true
		go func() {
			if tlsConfig != nil {
				served <- srv.ServeTLS(ln, "", "")
			} else {
				served <- srv.Serve(ln)
			}
		}()
		log.Info().Str("addr", ln.Addr().String()).Str("url", url).Str("base_url", baseURL).
			Bool("tls", tlsConfig != nil).Str("store", c.storeName()).Msg("listening")
		fmt.Fprintf(stderr, "kmsd listening on %s\n", url)
	}
	// stopServing ends the server (started or not) on a path that does
	// not reach the shutdown below.
	stopServing := func() {
		if !serving {
			ln.Close()
			return
		}
		sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		srv.Shutdown(sctx)
	}

	svcLog := log.With().Str("component", "kms").Logger()
	svcOpts := kms.Options{
		MasterKey: mk, NextMasterKey: next, Logger: &svcLog, Mailer: mailer, BaseURL: baseURL,
		TokenTTL: c.tokenTTL, SessionLifetime: c.sessionLife, InviteTTL: c.inviteTTL, ResetTTL: c.resetTTL,
		Limits:          kms.Limits{MaxKeyRings: c.maxKeyRings, MaxUsers: c.maxUsers, MaxAccounts: c.maxAccounts, MaxAPIKeysPerAccount: c.maxAPIKeys},
		MinDestroyDelay: c.minDestroy,
		RateLimits:      kms.RateLimits{PerAPIKey: kms.Rate(c.rateKey), PerAddr: kms.Rate(c.rateAddr)},
		IPv6Prefix:      c.ipv6Prefix,
	}
	// The journal reports each batch only to an Observer that wants it:
	// with neither metrics nor an audit sink, it does no such work.
	obs := &observers{}
	if ms != nil {
		obs.metrics = ms.m
	}
	if ms != nil || c.auditSink != "" {
		svcOpts.Observer = obs
	}
	if c.minDestroy == 0 {
		svcOpts.MinDestroyDelay = -1 // none; the Options' zero is the default
	}
	if tk != nil {
		svcOpts.SigningKey, svcOpts.SigningKeyURI = tk.key, tk.storeURI()
		log.Info().Str("token", tk.tok.String()).Str("uri", svcOpts.SigningKeyURI).Msg("headers are signed by the PKCS#11 token")
	}
	mk = nil
	// start opens the store, starts the Service on it and bootstraps it.
	start := func() (*kms.Service, kms.Store, error) {
		st, err := openStore(ctx, c, pgstore.Options{})
		if err != nil {
			return nil, nil, err
		}
		warnDurability(ctx, st, log)
		svc, err := kms.New(st, svcOpts)
		if err != nil {
			st.Close()
			return nil, nil, startError(err, c)
		}
		if err := svc.CheckSigner(); err != nil {
			svc.Close()
			st.Close()
			// Not wrapped: its kind (Unavailable) is not one to wait out.
			return nil, nil, usagef("%s: start kmsd with -signing-key-pkcs11 (KMS_SIGNING_KEY_PKCS11) naming that key; or, to sign with keys of the store's own again, run kmsd rotate-signing-key without it",
				kms.ErrorMessage(err))
		}
		if err := bootstrap(ctx, svc, bootstrapKey, stderr, log); err != nil {
			svc.Close()
			st.Close()
			return nil, nil, err
		}
		return svc, st, nil
	}
	// On a full disk the store may not open, or a new one not take its
	// first keys; nor on a database that cannot be reached or is
	// read-only (a standby, a primary demoted), which the Service's
	// start writes to: kmsd then serves all the same, answering 503 and
	// 507 saying why, and starts once there is room or a primary.
	svc, st, err := start()
	if waitToStart(err) {
		handler.set(httpapi.Unavailable(err, hopts))
		startServing()
		log.Warn().Err(err).Dur("retry", storeRetry).
			Msg("the store cannot start (its disk is full, or its database unreachable or read-only); answering 503 or 507 until it can")
		tick := time.NewTicker(storeRetry)
		for waitToStart(err) {
			select {
			case <-ctx.Done():
				tick.Stop()
				stopServing()
				log.Info().Msg("stopped")
				return nil
			case serveErr := <-served:
				tick.Stop()
				return fmt.Errorf("serve: %w", serveErr)
			case <-tick.C:
			}
			svc, st, err = start()
		}
		tick.Stop()
		if err == nil {
			log.Info().Msg("the store started")
		}
	}
	svcOpts.MasterKey, svcOpts.NextMasterKey, next = nil, nil, nil
	if err != nil {
		stopServing()
		return err
	}
	closeAll := func() error {
		errSvc := svc.Close()
		errSt := st.Close()
		return errors.Join(errSvc, errSt)
	}
	if ms != nil {
		ms.m.Watch(svc)
	}
	if err := k8s.attach(ctx, svc); err != nil {
		stopServing()
		return errors.Join(err, closeAll())
	}
	handler.set(apiHandler(c, svc, hopts))
	stopAdmin, stopSink := func() {}, func() {}
	if !c.postgres() {
		if stopAdmin, err = serveAdmin(c.data, svc, st, log); err != nil {
			stopServing()
			return errors.Join(err, closeAll())
		}
	}
	if c.auditSink != "" {
		if stopSink, err = startAuditSink(c, st, obs, stdout, log); err != nil {
			stopAdmin()
			stopServing()
			return errors.Join(err, closeAll())
		}
	}
	if !serving {
		startServing()
	}

	var serveErr error
	select {
	case <-ctx.Done():
		log.Info().Msg("shutting down: finishing requests in flight")
	case serveErr = <-served:
		log.Error().Err(serveErr).Msg("server failed; shutting down")
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn().Err(err).Dur("timeout", shutdownTimeout).Msg("requests still in flight after the shutdown timeout; closing their connections")
		srv.Close()
	}
	if serveErr == nil {
		<-served // http.ErrServerClosed
	}
	k8s.stop(shutdownTimeout)
	stopAdmin()
	stopSink()
	if err := closeAll(); err != nil {
		log.Error().Err(err).Msg("close")
		return errors.Join(serveErr, err)
	}
	if serveErr != nil {
		return fmt.Errorf("serve: %w", serveErr)
	}
	log.Info().Msg("stopped")
	return nil
}

// warnDataDirMode warns when the data directory is open to its group or
// to other users, to read, write or enter (any of the bits 0077): kmsd
// made it 0700, and someone widened it, or made it before.
func warnDataDirMode(dir string, log *zerolog.Logger) {
	if fi, err := os.Stat(dir); err == nil && fi.Mode().Perm()&0o077 != 0 {
		log.Warn().Str("dir", dir).Str("mode", fmt.Sprintf("%04o", fi.Mode().Perm())).
			Msg("the data directory is accessible to its group or other users; chmod 700 it")
	}
}

// storeRetry is how often kmsd tries again to start on a store that its
// full disk, or an unreachable or read-only database, kept from starting.
const storeRetry = time.Second

// waitToStart reports whether kmsd waits, serving, for the store to start
// after err: a full disk, or a database it cannot reach or write to.
func waitToStart(err error) bool {
	k := kms.ErrorKind(err)
	return err != nil && (k == kms.KindNoSpace || k == kms.KindUnavailable)
}

// apiHandler is the handler of kmsd's interface: httpapi's, with
// -transit Vault's interface at /v1/ (package transit): the transit
// engine at /v1/transit/, and Vault's other paths answered in Vault's
// error shape; with -aws-kms AWS KMS's protocol at POST / with an
// X-Amz-Target of TrentService (package awskms); all with the same log,
// metrics and client addresses.
func apiHandler(c *config, svc *kms.Service, hopts httpapi.Options) http.Handler {
	api := httpapi.New(svc, hopts)
	if !c.transit && !c.awsKMS {
		return api
	}
	var vault, aws http.Handler
	if c.transit {
		tlog := hopts.Logger.With().Str("api", "transit").Logger()
		vault = transit.New(svc, transit.Options{Logger: &tlog, ClientIPHeader: hopts.ClientIPHeader, ClientIPHops: hopts.ClientIPHops,
			Requests: hopts.Requests})
	}
	if c.awsKMS {
		alog := hopts.Logger.With().Str("api", "aws-kms").Logger()
		aws = awskms.New(svc, awskms.Options{Logger: &alog, ClientIPHeader: hopts.ClientIPHeader, ClientIPHops: hopts.ClientIPHops,
			Requests: hopts.Requests})
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case vault != nil && strings.HasPrefix(r.URL.Path, transit.PathPrefix):
			vault.ServeHTTP(w, r)
		case aws != nil && awskms.Handles(r):
			aws.ServeHTTP(w, r)
		default:
			api.ServeHTTP(w, r)
		}
	})
}

// switchHandler serves with the handler last set: kmsd's answers while
// its store cannot open, then the service's.
type switchHandler struct{ h atomic.Pointer[http.Handler] }

func (s *switchHandler) set(h http.Handler) { s.h.Store(&h) }

func (s *switchHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	(*s.h.Load()).ServeHTTP(w, r)
}

// startError says why the Service did not start, by the kind of its
// error: a wrong master key, a damaged activity trail (exit status 3, as
// verify-audit's), or anything else as it is.
func startError(err error, c *config) error {
	switch kms.ErrorKind(err) {
	case kms.KindUnauthenticated:
		return fmt.Errorf("start service: %s", kms.ErrorMessage(err))
	case kms.KindUnprocessable:
		run := "kmsd verify-audit -data " + c.data
		if c.postgres() {
			run = "kmsd verify-audit with the same -store"
		}
		return exitError{3, fmt.Errorf("start service: %s; kmsd writes nothing after a damaged trail: run %s for a report", kms.ErrorMessage(err), run)}
	}
	return fmt.Errorf("start service: %w", err)
}

// warnDurability logs what in the database server's settings lets a
// failover lose acknowledged writes (pgstore.Store.DurabilityWarnings;
// docs/OPERATIONS.md, The database: high availability).
func warnDurability(ctx context.Context, st kms.Store, log *zerolog.Logger) {
	pg, ok := st.(*pgstore.Store)
	if !ok {
		return
	}
	warnings, err := pg.DurabilityWarnings(ctx)
	if err != nil {
		log.Warn().Err(err).Msg("could not read the database server's replication settings")
	}
	for _, w := range warnings {
		log.Warn().Msg(w)
	}
}

// openStore opens the store of -store: PostgreSQL for a postgres:// URL,
// with pg's options, else the embedded store in -data, keeping
// -disk-reserve free. (The embedded store opens in one process at a time,
// as pg.Exclusive asks; the callers that set pg.Existing check first that
// the data directory holds a store.)
func openStore(ctx context.Context, c *config, pg pgstore.Options) (kms.Store, error) {
	if c.postgres() {
		// Any number of nodes share the database (a cluster).
		pg.QueryTimeout = c.storeTimeout
		st, err := pgstore.Open(ctx, c.store, pg)
		if err != nil {
			return nil, fmt.Errorf("open the PostgreSQL store: %w", err)
		}
		return st, nil
	}
	reserve := int64(c.diskReserve)
	if reserve == 0 {
		reserve = -1 // off
	}
	// kmsd holds part of the reserve in a file, which the library leaves
	// to its callers to ask for (docs/OPERATIONS.md, section 12).
	st, err := badgerstore.OpenWith(badgerstore.DefaultOptions(c.data), badgerstore.Options{DiskReserve: reserve, HoldReserve: true})
	switch {
	case err == nil:
		return st, nil
	case kms.ErrorKind(err) == kms.KindConflict:
		return nil, fmt.Errorf("open store in %s: %w; stop it first", c.data, errStoreInUse)
	default:
		return nil, fmt.Errorf("open store in %s: %w", c.data, err)
	}
}

// openExistingStore opens, for a subcommand, the store of -store (the
// data directory by default), which must exist, and reads the master key
// as the server does. With exclusive, a PostgreSQL store is opened only
// when no other process (a kmsd node) has it open, and none can open it
// meanwhile. The caller closes the store and clears the key.
func openExistingStore(ctx context.Context, c *config, getenv func(string) string, log *zerolog.Logger, exclusive bool) (kms.Store, kms.RootKey, error) {
	if !c.postgres() {
		if fi, err := os.Stat(c.data); err != nil {
			return nil, nil, fmt.Errorf("data directory: %w", err)
		} else if !fi.IsDir() {
			return nil, nil, fmt.Errorf("data directory %s is not a directory", c.data)
		}
		if !hasStore(c.data) {
			return nil, nil, fmt.Errorf("no store in %s", c.data)
		}
	}
	mk, err := loadMasterKey(c, getenv, false, log)
	if err != nil {
		return nil, nil, err
	}
	st, err := openStore(ctx, c, pgstore.Options{Existing: true, Exclusive: exclusive})
	if err != nil {
		return nil, nil, err
	}
	return st, mk, nil
}

// storeName says which store c names, for messages: the data directory,
// or the PostgreSQL database without its password.
func (c *config) storeName() string {
	if !c.postgres() {
		return c.data
	}
	u, err := neturl.Parse(c.store)
	if err != nil {
		return "PostgreSQL"
	}
	return "PostgreSQL " + u.Redacted()
}

// defaultBaseURL is scheme://<bound address>, with "localhost" in place of
// an unspecified (all interfaces) host.
func defaultBaseURL(scheme string, addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return scheme + "://" + addr.String()
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}

// bootstrap creates the root Account and API key on an empty store. A
// generated secret is printed once to stderr, outside the log; the log
// records that bootstrap happened, never the secret.
func bootstrap(ctx context.Context, svc *kms.Service, secret string, stderr io.Writer, log *zerolog.Logger) error {
	res, err := svc.Bootstrap(ctx, secret)
	if err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	if !res.Created {
		if secret != "" {
			log.Info().Msg("KMS_BOOTSTRAP_API_KEY ignored: the store already has API keys (it may be removed from the environment)")
		}
		return nil
	}
	log.Info().Str("account_id", res.AccountID).Str("apikey_id", res.KeyID).Bool("generated", res.Secret != "").
		Msg(`bootstrap: created the root account and an API key with the flag "*"`)
	if res.Secret != "" {
		fmt.Fprintf(stderr, "bootstrap API key (shown once): %s\n", res.Secret)
		fmt.Fprintf(stderr, "  it holds every permission; store it now: kmsd keeps only its digest and will not show it again\n")
	}
	return nil
}

// noMailMessage is what kmsd logs at start without a mailer.
const noMailMessage = "mail: none configured (set -mail-outbox or KMS_SMTP_ADDR); invitations still work, " +
	"their link answered as loginUrl for the caller to pass on, but password resets cannot start " +
	"and no notice of a changed email or password is sent"

// newMailer returns the outbox with -mail-outbox, else an SMTP mailer
// when KMS_SMTP_ADDR is set, else nil: no mail (kms.Options.Mailer), so
// an invitation still succeeds, its link answered to the caller only, and
// a password reset cannot start.
func newMailer(c *config, getenv func(string) string, log *zerolog.Logger) (kms.Mailer, error) {
	if c.mailOutbox != "" {
		if err := os.MkdirAll(c.mailOutbox, 0o700); err != nil {
			return nil, fmt.Errorf("-mail-outbox: %w", err)
		}
		log.Info().Str("dir", c.mailOutbox).Msg("mail: written to the outbox directory, not sent")
		return mail.NewOutbox(c.mailOutbox), nil
	}
	if addr := getenv("KMS_SMTP_ADDR"); addr != "" {
		m := &mail.SMTP{
			Addr:     addr,
			From:     getenv("KMS_SMTP_FROM"),
			Username: getenv("KMS_SMTP_USER"),
			Password: getenv("KMS_SMTP_PASSWORD"),
		}
		if err := m.Check(); err != nil {
			return nil, usagef("KMS_SMTP_ADDR and KMS_SMTP_FROM: %v", err)
		}
		log.Info().Str("smtp_addr", m.Addr).Str("from", m.From).Bool("auth", m.Username != "").Msg("mail: sent over SMTP")
		return m, nil
	}
	log.Info().Msg(noMailMessage)
	return nil, nil
}
