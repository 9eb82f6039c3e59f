package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/hsm"
	"github.com/ringkms/kms/internal/unixsock"
	"github.com/ringkms/kms/k8skms"
	"github.com/ringkms/kms/metrics"
	"github.com/ringkms/kms/store/badgerstore"
	"github.com/ringkms/kms/store/pgstore"
)

// config is kmsd's configuration, from flags and KMS_* environment
// variables. Secrets (the master key itself, the bootstrap API key, the
// SMTP password) come only from the environment or a file, never from a
// flag, so they do not show in the process list.
type config struct {
	addr             string
	legacyAddr       bool // addr came from KMS_ADDR, read for compatibility (deprecated)
	data             string
	store            string
	storeTimeout     time.Duration // -store-timeout: pgstore.Options.QueryTimeout
	migrateTo        string        // migrate's -to
	backupOut        string        // backup's and audit export's -o
	auditFrom        uint64        // audit export's -from
	newMasterKeyFile string        // rekey's -new-master-key-file
	newKeyPKCS11     string        // rekey's -new-master-key-pkcs11
	auditSink        string
	auditSinkMax     byteSize
	auditSinkKeep    int
	auditSinkFrom    uint64
	restoreIn        string // restore's -i
	dev              bool
	masterKeyFile    string
	masterKeyPKCS11  string    // -master-key-pkcs11: a PKCS#11 URI
	nextKeyFile      string    // -master-key-next-file
	nextKeyPKCS11    string    // -master-key-next-pkcs11
	tokens           *tokenSet // what close lets go of (pkcs11.go)
	signingKey       string    // -signing-key-pkcs11: a PKCS#11 URI (checked here, parsed again where it is used)
	mailOutbox       string
	baseURL          string
	tlsCert          string
	tlsKey           string
	logLevel         string
	logFormat        string
	clientIP         string
	diskReserve      byteSize
	rateKey          rateFlag // -rate-limit-apikey
	rateAddr         rateFlag // -rate-limit-addr
	clientIPHops     int
	ipv6Prefix       int // bits of an IPv6 address that name a client

	tokenTTL    time.Duration
	sessionLife time.Duration
	inviteTTL   time.Duration
	resetTTL    time.Duration
	minDestroy  time.Duration
	maxKeyRings int
	maxUsers    int
	maxAccounts int
	maxAPIKeys  int

	transit bool // serve Vault's transit interface at /v1/transit/

	awsKMS bool // serve AWS KMS's JSON protocol at POST /

	k8sSocket string // serve the Kubernetes KMS v2 plugin API on this Unix socket
	k8sKey    string // the held key of the Kubernetes KMS plugin

	metrics          bool   // serve /metrics on the main listener
	metricsAddr      string // serve /metrics on a listener of its own
	metricsTokenFile string
	metricsRings     int

	given map[string]bool // the flags on the command line (not from the environment), by name
}

// setting is one flag and the environment variable that backs it.
type setting struct {
	flag  string
	env   string
	arg   string // the name of the value in the usage text
	usage string
	def   string // the default, for the usage text
}

var settings = []setting{
	{"addr", "KMS_LISTEN", "host:port", "address to listen on", "127.0.0.1:8200"},
	{"data", "KMS_DATA", "dir", "data directory of the embedded Badger store (and of -dev's master key)", "./data"},
	{"store", "KMS_STORE", "url", "empty: the embedded store in -data; postgres://... or postgresql://...: PostgreSQL (password and TLS from the URL or the PG* variables)", ""},
	{"store-timeout", "KMS_STORE_TIMEOUT", "duration", "with PostgreSQL: bound of each round trip to the database; a node whose connection goes silent answers 503 within twice it, and the database lets go of what that node held in half of it", "5s"},
	{"dev", "KMS_DEV", "", "development mode: generate a master key into <data>/master.key if none is given", "false"},
	{"master-key-file", "KMS_MASTER_KEY_FILE", "file", "file holding the master key in base64 (or set KMS_MASTER_KEY)", ""},
	{"master-key-pkcs11", "KMS_MASTER_KEY_PKCS11", "uri", "the master key: an AES-256 key in a PKCS#11 token, as an RFC 7512 URI (PIN from its pin-source or KMS_PKCS11_PIN)", ""},
	{"master-key-next-file", "KMS_MASTER_KEY_NEXT_FILE", "file", "file holding the next master key in base64 (or set KMS_MASTER_KEY_NEXT), for a rotation while kmsd serves", ""},
	{"master-key-next-pkcs11", "KMS_MASTER_KEY_NEXT_PKCS11", "uri", "the next master key in a PKCS#11 token, for a rotation while kmsd serves", ""},
	{"signing-key-pkcs11", "KMS_SIGNING_KEY_PKCS11", "uri", "sign headers with the Ed25519 key pair this PKCS#11 URI names (module-path required; PIN from pin-source or KMS_PKCS11_PIN); with rotate-signing-key, make the next key in that token", ""},
	{"mail-outbox", "KMS_MAIL_OUTBOX", "dir", "write outgoing mail as files in dir instead of sending it", ""},
	{"base-url", "KMS_BASE_URL", "url", "public address of the service, for links in mail", "http(s)://<addr>"},
	{"tls-cert", "KMS_TLS_CERT", "file", "TLS certificate chain, PEM (with -tls-key)", ""},
	{"tls-key", "KMS_TLS_KEY", "file", "TLS private key, PEM (with -tls-cert)", ""},
	{"log-level", "KMS_LOG_LEVEL", "level", "debug, info, warn or error", "info"},
	{"log-format", "KMS_LOG_FORMAT", "format", "json, console (text), or auto: console when stderr is a terminal, else json", "auto"},
	{"token-ttl", "KMS_TOKEN_TTL", "duration", "lifetime of a User's access token", "1h"},
	{"session-lifetime", "KMS_SESSION_LIFETIME", "duration", "how long a login lasts across refreshes of its access token", "24h"},
	{"invite-ttl", "KMS_INVITE_TTL", "duration", "how long an invitation can be completed", "168h"},
	{"reset-ttl", "KMS_RESET_TTL", "duration", "how long a password reset can be completed", "1h"},
	{"min-destroy-delay", "KMS_MIN_DESTROY_DELAY", "duration", "shortest delay a key's destruction may be scheduled with (0: none)", "1h"},
	{"max-keyrings", "KMS_MAX_KEYRINGS", "n", "plan limit: key rings in all (0: none)", "0"},
	{"max-users", "KMS_MAX_USERS", "n", "plan limit: Users in all (0: none)", "0"},
	{"max-accounts", "KMS_MAX_ACCOUNTS", "n", "plan limit: Accounts in all (0: none)", "0"},
	{"max-apikeys-per-account", "KMS_MAX_APIKEYS_PER_ACCOUNT", "n", "plan limit: API keys of one Account (0: none)", "0"},
	{"disk-reserve", "KMS_DISK_RESERVE", "size", "free space kept on the disks of -data: below it, kmsd refuses writes (507) until there is room again; 0 turns it off", "256MiB"},
	{"client-ip-header", "KMS_CLIENT_IP_HEADER", "name", "header with the client address set by a trusted reverse proxy (X-Forwarded-For, X-Real-IP); only behind one", ""},
	{"client-ip-hops", "KMS_CLIENT_IP_HOPS", "n", "trusted proxies that append to -client-ip-header: the client address is the n-th from the right", "1"},
	{"ipv6-prefix", "KMS_IPV6_PREFIX", "bits", "the rate limit per address and the login and reset throttles count an IPv6 client by the prefix of this many bits (1 to 128; 128: each address)", "64"},
	{"transit", "KMS_TRANSIT", "", "also serve HashiCorp Vault's transit interface (aes256-gcm96 keys: /asym rings) at /v1/transit/, for SOPS, OpenTofu and Vault clients", "false"},
	{"aws-kms", "KMS_AWS_KMS", "", "also serve AWS KMS's JSON protocol (TrentService, Signature Version 4 with an API key's ID and secret) at POST /, for AWS's SDKs, the AWS CLI and SOPS (docs/AWSKMS.md)", "false"},
	{"k8s-kms-socket", "KMS_K8S_KMS_SOCKET", "path", "also serve the Kubernetes KMS v2 plugin API (gRPC) on a Unix socket at path, mode 0600, for the API server's EncryptionConfiguration (docs/KUBERNETES.md)", ""},
	{"k8s-kms-key", "KMS_K8S_KMS_KEY", "name", "the held key (aes256-gcm96, never exportable) that seals the Kubernetes API server's data keys; made at first start when missing", "kubernetes"},
	{"metrics", "KMS_METRICS", "", "serve Prometheus metrics at GET /metrics on the main listener", "false"},
	{"metrics-addr", "KMS_METRICS_ADDR", "host:port", "serve Prometheus metrics at GET /metrics on a listener of their own (plain HTTP)", ""},
	{"metrics-token-file", "KMS_METRICS_TOKEN_FILE", "file", "file holding a bearer token that GET /metrics requires (or set KMS_METRICS_TOKEN)", ""},
	{"metrics-rings", "KMS_METRICS_RINGS", "n", "key rings labelled in the per-ring metrics; the calls of others count as ring \"other\"", "100"},
	{"rate-limit-apikey", "KMS_RATE_LIMIT_APIKEY", "rate", "calls a second each API key (or User) may make, as RATE or RATE:BURST; 0: no limit", "0"},
	{"rate-limit-addr", "KMS_RATE_LIMIT_ADDR", "rate", "calls a second each client address may make, as RATE or RATE:BURST; 0: no limit", "0"},
	{"audit-sink", "KMS_AUDIT_SINK", "sink", "also stream every activity record as a JSON line to stdout, file:PATH, syslog, or syslog+udp://host:port (syslog+tcp://)", ""},
	{"audit-sink-max-size", "KMS_AUDIT_SINK_MAX_SIZE", "size", "with file:PATH, rotate the file once it reaches this size", "100MiB"},
	{"audit-sink-keep", "KMS_AUDIT_SINK_KEEP", "n", "with file:PATH, rotated files to keep (0: all)", "10"},
	{"audit-sink-from", "KMS_AUDIT_SINK_FROM", "seq", "the record the sink starts at; 0: the end of the trail at start (kmsd audit export gives earlier ones)", "0"},
}

// envOnly are the variables that have no flag.
var envOnly = [][2]string{
	{"KMS_MASTER_KEY", "the master key: base64 of 32 random bytes (head -c 32 /dev/urandom | base64)"},
	{"KMS_MASTER_KEY_NEXT", "the next master key, base64, for a rotation while kmsd serves (or -master-key-next-file)"},
	{"KMS_BOOTSTRAP_API_KEY", "secret (>= 32 characters) of the root API key created on an empty store"},
	{hsm.PINEnv, "the user PIN of the PKCS#11 token of -master-key-pkcs11 or -signing-key-pkcs11, when its URI names no pin-source"},
	{"KMS_SMTP_ADDR", "SMTP server host:port; sends mail over SMTP (unless -mail-outbox)"},
	{"KMS_SMTP_FROM", "sender address of the mail (required with KMS_SMTP_ADDR)"},
	{"KMS_SMTP_USER", "SMTP user name (AUTH PLAIN, over STARTTLS)"},
	{"KMS_SMTP_PASSWORD", "SMTP password"},
	{"KMS_METRICS_TOKEN", "bearer token that GET /metrics requires (or -metrics-token-file)"},
	{"KMS_ADDR", "the clients' URL of the service (kmsctl's): kmsd ignores it; a host:port in it, without -addr or KMS_LISTEN, is read as -addr (deprecated)"},
}

// The clients' setting that kmsd once read as its listen address. kmsctl
// and the other clients read the service's URL from it, so a shell set up
// for them holds http://...; kmsd ignores a URL there. A host:port there
// is the old meaning: without -addr or KMS_LISTEN, kmsd still listens on
// it, and warns, so that a deployment that sets it keeps its address
// rather than falling back to 127.0.0.1 unnoticed.
const (
	clientAddrEnv = "KMS_ADDR"
	listenEnv     = "KMS_LISTEN"
)

// usageError is an error in the command line or the environment: kmsd
// exits with status 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// parseConfig reads the flags in args and, for every flag not on the
// command line, its environment variable. cmd is "" for the server or the
// name of a subcommand, for the usage text. It returns flag.ErrHelp after
// printing the usage to stdout when asked for help.
func parseConfig(cmd string, args []string, getenv func(string) string, stdout io.Writer) (*config, error) {
	c := &config{}
	name := "kmsd"
	if cmd != "" {
		name += " " + cmd
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&c.addr, "addr", "127.0.0.1:8200", "")
	fs.StringVar(&c.data, "data", "./data", "")
	fs.StringVar(&c.store, "store", "", "")
	if cmd == "migrate" {
		fs.StringVar(&c.data, "from", "./data", "")
		fs.StringVar(&c.migrateTo, "to", "", "")
	}
	if cmd == "backup" || cmd == "audit-export" {
		fs.StringVar(&c.backupOut, "o", "", "")
	}
	if cmd == "audit-export" {
		fs.Uint64Var(&c.auditFrom, "from", 1, "")
	}
	if cmd == "rekey" {
		fs.StringVar(&c.newMasterKeyFile, "new-master-key-file", "", "")
		fs.StringVar(&c.newKeyPKCS11, "new-master-key-pkcs11", "", "")
	}
	if cmd == "restore" {
		fs.StringVar(&c.restoreIn, "i", "", "")
	}
	fs.BoolVar(&c.dev, "dev", false, "")
	fs.StringVar(&c.masterKeyFile, "master-key-file", "", "")
	fs.StringVar(&c.masterKeyPKCS11, "master-key-pkcs11", "", "")
	fs.StringVar(&c.nextKeyFile, "master-key-next-file", "", "")
	fs.StringVar(&c.nextKeyPKCS11, "master-key-next-pkcs11", "", "")
	fs.StringVar(&c.signingKey, "signing-key-pkcs11", "", "")
	fs.StringVar(&c.mailOutbox, "mail-outbox", "", "")
	fs.StringVar(&c.baseURL, "base-url", "", "")
	fs.StringVar(&c.tlsCert, "tls-cert", "", "")
	fs.StringVar(&c.tlsKey, "tls-key", "", "")
	fs.StringVar(&c.logLevel, "log-level", "info", "")
	fs.StringVar(&c.logFormat, "log-format", "auto", "")
	fs.StringVar(&c.clientIP, "client-ip-header", "", "")
	c.diskReserve = defaultDiskReserve
	fs.Var(&c.diskReserve, "disk-reserve", "")
	fs.IntVar(&c.clientIPHops, "client-ip-hops", 1, "")
	fs.IntVar(&c.ipv6Prefix, "ipv6-prefix", kms.DefaultIPv6Prefix, "")
	fs.DurationVar(&c.tokenTTL, "token-ttl", time.Hour, "")
	fs.DurationVar(&c.sessionLife, "session-lifetime", 24*time.Hour, "")
	fs.DurationVar(&c.inviteTTL, "invite-ttl", 7*24*time.Hour, "")
	fs.DurationVar(&c.resetTTL, "reset-ttl", time.Hour, "")
	fs.DurationVar(&c.minDestroy, "min-destroy-delay", time.Hour, "")
	fs.DurationVar(&c.storeTimeout, "store-timeout", pgstore.DefaultQueryTimeout, "")
	fs.IntVar(&c.maxKeyRings, "max-keyrings", 0, "")
	fs.IntVar(&c.maxUsers, "max-users", 0, "")
	fs.IntVar(&c.maxAccounts, "max-accounts", 0, "")
	fs.IntVar(&c.maxAPIKeys, "max-apikeys-per-account", 0, "")
	fs.BoolVar(&c.transit, "transit", false, "")
	fs.BoolVar(&c.awsKMS, "aws-kms", false, "")
	fs.StringVar(&c.k8sSocket, "k8s-kms-socket", "", "")
	fs.StringVar(&c.k8sKey, "k8s-kms-key", k8skms.DefaultKey, "")
	fs.BoolVar(&c.metrics, "metrics", false, "")
	fs.StringVar(&c.metricsAddr, "metrics-addr", "", "")
	fs.StringVar(&c.metricsTokenFile, "metrics-token-file", "", "")
	fs.IntVar(&c.metricsRings, "metrics-rings", metrics.DefaultMaxRings, "")
	fs.Var(&c.rateKey, "rate-limit-apikey", "")
	fs.Var(&c.rateAddr, "rate-limit-addr", "")
	fs.StringVar(&c.auditSink, "audit-sink", "", "")
	c.auditSinkMax = 100 << 20
	fs.Var(&c.auditSinkMax, "audit-sink-max-size", "")
	fs.IntVar(&c.auditSinkKeep, "audit-sink-keep", 10, "")
	fs.Uint64Var(&c.auditSinkFrom, "audit-sink-from", 0, "")

	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(stdout, cmd)
			return nil, flag.ErrHelp
		}
		return nil, usagef("%v (see kmsd -h)", err)
	}
	if fs.NArg() > 0 {
		return nil, usagef("unexpected argument %q (see kmsd -h)", fs.Arg(0))
	}
	onCommandLine := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { onCommandLine[f.Name] = true })
	c.given = onCommandLine
	for _, s := range settings {
		if onCommandLine[s.flag] {
			continue
		}
		v := getenv(s.env)
		if v == "" {
			continue
		}
		if err := fs.Set(s.flag, v); err != nil {
			return nil, usagef("%s=%q: %v", s.env, v, err)
		}
	}
	if a := getenv(clientAddrEnv); a != "" && !strings.Contains(a, "://") && !onCommandLine["addr"] && getenv(listenEnv) == "" {
		c.addr, c.legacyAddr = a, true
	}
	if err := c.validate(); err != nil {
		return nil, usageError{err}
	}
	return c, nil
}

func (c *config) validate() error {
	// An empty host means every interface; port 0 means any free port.
	if _, port, err := net.SplitHostPort(c.addr); err != nil || port == "" {
		if c.legacyAddr {
			return fmt.Errorf("%s %q: kmsd listens on -addr or %s (host:port, for example 127.0.0.1:8200); %s is the clients' URL of the service, such as http://127.0.0.1:8200",
				clientAddrEnv, c.addr, listenEnv, clientAddrEnv)
		}
		return fmt.Errorf("-addr %q: want host:port, for example 127.0.0.1:8200", c.addr)
	}
	if c.data == "" {
		return errors.New("-data: a data directory is required")
	}
	if c.metricsAddr != "" {
		if _, port, err := net.SplitHostPort(c.metricsAddr); err != nil || port == "" {
			return fmt.Errorf("-metrics-addr %q: want host:port, for example 127.0.0.1:9200", c.metricsAddr)
		}
	}
	if c.metricsRings < 1 {
		return fmt.Errorf("-metrics-rings %d: want 1 or more", c.metricsRings)
	}
	if c.store != "" && !c.postgres() {
		return fmt.Errorf("-store: want empty (the embedded store in -data) or a postgres:// or postgresql:// URL")
	}
	switch c.logLevel {
	case "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("-log-level %q: want debug, info, warn or error", c.logLevel)
	}
	switch c.logFormat {
	case "auto", "json", "console":
	default:
		return fmt.Errorf("-log-format %q: want json, console or auto", c.logFormat)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"token-ttl", c.tokenTTL}, {"session-lifetime", c.sessionLife}, {"invite-ttl", c.inviteTTL}, {"reset-ttl", c.resetTTL}} {
		if d.v < time.Minute {
			return fmt.Errorf("-%s %s: want a duration of at least 1m, for example 1h", d.name, d.v)
		}
	}
	if err := kms.ValidateRingName(c.k8sKey); err != nil {
		return fmt.Errorf("-k8s-kms-key %q: %s", c.k8sKey, kms.ErrorMessage(err))
	}
	if n := len(c.k8sSocket); n >= unixsock.MaxPath {
		return fmt.Errorf("-k8s-kms-socket %s: a Unix socket's path has at most %d bytes, not %d", c.k8sSocket, unixsock.MaxPath-1, n)
	}
	if c.storeTimeout < time.Second {
		return fmt.Errorf("-store-timeout %s: want a duration of at least 1s, for example 5s", c.storeTimeout)
	}
	if c.minDestroy < 0 {
		return fmt.Errorf("-min-destroy-delay %s: want 0 (none) or more", c.minDestroy)
	}
	if c.sessionLife < c.tokenTTL {
		return fmt.Errorf("-session-lifetime %s is shorter than -token-ttl %s: a login must last at least as long as one access token", c.sessionLife, c.tokenTTL)
	}
	for _, n := range []struct {
		name string
		v    int
	}{{"max-keyrings", c.maxKeyRings}, {"max-users", c.maxUsers}, {"max-accounts", c.maxAccounts}, {"max-apikeys-per-account", c.maxAPIKeys}} {
		if n.v < 0 {
			return fmt.Errorf("-%s %d: want 0 (no limit) or more", n.name, n.v)
		}
	}
	if c.clientIPHops < 1 {
		return fmt.Errorf("-client-ip-hops %d: want the number of trusted proxies in front of kmsd, 1 or more", c.clientIPHops)
	}
	if c.ipv6Prefix < 1 || c.ipv6Prefix > 128 {
		return fmt.Errorf("-ipv6-prefix %d: want the length of the IPv6 prefix that counts as one client, 1 to 128 (64: a /64, the usual allocation)", c.ipv6Prefix)
	}
	if (c.tlsCert == "") != (c.tlsKey == "") {
		return errors.New("-tls-cert and -tls-key go together: give both for TLS, or neither for plain HTTP")
	}
	if c.signingKey != "" {
		if _, err := hsm.ParseURI(c.signingKey); err != nil {
			return fmt.Errorf("-signing-key-pkcs11: %v", err) // no PIN in it: ParseURI refuses one
		}
	}
	if c.baseURL != "" {
		u, err := url.Parse(c.baseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("-base-url %q: want an absolute http or https URL, for example https://kms.example.com", c.baseURL)
		}
		c.baseURL = strings.TrimSuffix(c.baseURL, "/")
	}
	return nil
}

// postgres reports whether -store names a PostgreSQL database.
func (c *config) postgres() bool {
	return strings.HasPrefix(c.store, "postgres://") || strings.HasPrefix(c.store, "postgresql://")
}

// defaultDiskReserve is -disk-reserve's default: the store's own.
const defaultDiskReserve = byteSize(badgerstore.DefaultDiskReserve)

// byteSize is a flag value of bytes: a whole number with an optional unit,
// B, KiB, MiB, GiB or TiB (powers of 1024), or KB, MB, GB, TB (of 1000).
// rateFlag is a token-bucket rate: "RATE" (calls a second, a burst of
// one second's worth) or "RATE:BURST"; "0" for none.
type rateFlag kms.Rate

func (r *rateFlag) String() string {
	if r.Burst > 0 {
		return fmt.Sprintf("%g:%d", r.PerSecond, r.Burst)
	}
	return fmt.Sprintf("%g", r.PerSecond)
}

func (r *rateFlag) Set(s string) error {
	rate, burst, hasBurst := strings.Cut(strings.TrimSpace(s), ":")
	v, err := strconv.ParseFloat(rate, 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return fmt.Errorf("want calls a second, such as 100 or 100:200 (a burst of 200)")
	}
	n := 0
	if hasBurst {
		if n, err = strconv.Atoi(burst); err != nil || n < 1 {
			return fmt.Errorf("burst %q: want a whole number of calls, 1 or more", burst)
		}
	}
	*r = rateFlag{PerSecond: v, Burst: n}
	return nil
}

type byteSize int64

func (b *byteSize) String() string { return formatBytes(int64(*b)) }

func (b *byteSize) Set(s string) error {
	t := strings.TrimSpace(s)
	i := len(t)
	for i > 0 && (t[i-1] < '0' || t[i-1] > '9') {
		i--
	}
	n, err := strconv.ParseInt(t[:i], 10, 64)
	if err != nil || n < 0 {
		return fmt.Errorf("want a size such as 256MiB, 1GiB or 0")
	}
	mult, ok := map[string]int64{"": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40,
		"KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12}[strings.TrimSpace(t[i:])]
	if !ok {
		return fmt.Errorf("unit %q: want B, KiB, MiB, GiB, TiB, KB, MB, GB or TB", strings.TrimSpace(t[i:]))
	}
	if n > math.MaxInt64/mult {
		return fmt.Errorf("%s is too large", s)
	}
	*b = byteSize(n * mult)
	return nil
}

// formatBytes writes n in the largest binary unit that divides it.
func formatBytes(n int64) string {
	for _, u := range []struct {
		name string
		size int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n != 0 && n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10)
}

func printUsage(w io.Writer, cmd string) {
	if cmd == "migrate" {
		fmt.Fprint(w, `Usage: kmsd migrate -from DIR -to postgres://...

Copies the embedded store in DIR (its keys and its activity trail) into an
empty PostgreSQL database, then verifies the trail's hash chain there and
prints what it copied. Stop kmsd first. The master key is read as for the
server (KMS_MASTER_KEY, -master-key-file, or DIR/master.key with -dev); the
hashes and headers issued before decrypt after it, with the same master
key. Exit status: 0 when everything was copied and the chain verifies, 3
when the chain is broken, 1 on any other error (a database that is not
empty among them: nothing is written then).

  -from dir   the data directory of the embedded store (default ./data)
  -to url     the PostgreSQL database (password from the URL or PGPASSWORD)

`)
	} else if cmd == "backup" {
		fmt.Fprint(w, `Usage: kmsd backup [-o FILE] [flags]

Writes a consistent backup of the embedded store in the data directory and
its activity trail to FILE (mode 0600), or to standard output without -o or
with -o -. With kmsd running on the directory, the running kmsd takes it
(through the socket admin/kmsd.sock in the data directory, which only its
user may use) while it serves: writes pause only while a snapshot is taken.
With no kmsd running, kmsd backup opens the store itself, and reads the
master key as the server does. The backup holds only sealed secrets, like
the data directory, and is authenticated under a key derived from the
master key the service runs under: it restores only with that master key,
and only as it was written. Its framing and counts are checked before kmsd
backup reports success, and FILE appears only then. The backup is an
activity record itself (action backup). A PostgreSQL store is backed up
with the database's tools instead (docs/OPERATIONS.md). Exit status: 0 on
success, 1 on an error.

  -o file     where to write the backup (default: standard output)
  -data dir   the data directory (default ./data)

`)
	} else if cmd == "rekey" {
		fmt.Fprint(w, `Usage: kmsd rekey [-new-master-key-file FILE | -new-master-key-pkcs11 URI] [flags]

Moves the store from the master key kmsd reads as the server does (the
old one) to a new master key (KMS_NEW_MASTER_KEY, -new-master-key-file, or
-new-master-key-pkcs11 / KMS_NEW_MASTER_KEY_PKCS11 for a key in a PKCS#11
token): a new root secret, every secret the store holds re-sealed under
it, in one transaction, recorded as masterkey.rotate. Hashes, headers,
cursors and the activity chain issued before stay valid. It runs while
kmsd serves: on PostgreSQL beside the nodes, which go on under the new key
when they were started with it as their next key (KMS_MASTER_KEY_NEXT,
-master-key-next-file, -master-key-next-pkcs11), the others stopping their
writes; on the embedded store with kmsd running, it asks that kmsd, through
its admin socket, to rekey from its master key to its next key (a key
given here is refused then: that kmsd's keys are the ones used).
Afterwards the old master key opens no secret of the store. A rekey goes
one way: to the key the store is under, or back to a key it has left (a
second run of the same rekey, say), it is refused and changes nothing.
Exit status: 0 on success, 1 on an error (nothing was changed), 2 on a
usage error.

  -new-master-key-file file    the new master key in base64 (or KMS_NEW_MASTER_KEY)
  -new-master-key-pkcs11 uri   the new master key in a PKCS#11 token (or KMS_NEW_MASTER_KEY_PKCS11)

`)
	} else if cmd == "audit-export" {
		fmt.Fprint(w, `Usage: kmsd audit export [-from SEQ] [-o FILE] [flags]

Writes the activity records from sequence number SEQ (default 1) to the
end of the trail as JSON lines (as GET /activity answers them, with seq,
prev and digest) to standard output, or to FILE (mode 0600). An audit sink
that restarts, or missed records, resumes with it from the seq after the
last one it has. With kmsd running on the embedded store, the running kmsd
reads them (through admin/kmsd.sock in the data directory); else kmsd reads the
store itself; with -store postgres://..., the database. It needs no master
key. Exit status: 0 on success, 1 on an error.

  -from seq   the first record (default 1)
  -o file     where to write them (default: standard output)
  -data dir   the data directory (default ./data)

`)
	} else if cmd == "restore" {
		fmt.Fprint(w, `Usage: kmsd restore -i FILE -data DIR [flags]

Makes a new data directory DIR (absent or empty) from a backup that kmsd
backup wrote (-i FILE, or standard input without -i or with -i -). It
needs the master key the backed-up kmsd ran under when the backup was
taken (the old one, for a backup from before a rekey), read as the server
reads it (KMS_MASTER_KEY or -master-key-file): the backup is authenticated
under a key derived from it, and a backup altered anywhere, cut off, taken
under another master key, or of version 1 (which carries no
authentication) is refused. On any error, what restore made is removed
again: DIR, or what it put in DIR when DIR was there, empty. It prints the
kmsd verify-audit command that checks the result. Exit status: 0 on
success, 1 on an error, 2 on a usage error (no master key among them).

  -i file     the backup (default: standard input)
  -data dir   the new data directory (default ./data)

`)
	} else if cmd == "verify-audit" {
		fmt.Fprint(w, `Usage: kmsd verify-audit [flags]

Checks the hash chain of the activity trail in the data directory: every
record's digest, the link to the record before it, no gaps, and the head.
Prints the number of records checked and the head digest. Exit status: 0
when the chain is intact, 3 when it is broken, 1 on any other error.
With kmsd running on the embedded store, the running kmsd checks it
(through admin/kmsd.sock in the data directory, as the user kmsd runs as)
and no master key is needed. Else verify-audit opens the store itself and
reads the master key as the server does (KMS_MASTER_KEY,
-master-key-file, or <data>/master.key with -dev).

`)
	} else if cmd == "new-root-key" {
		fmt.Fprint(w, `Usage: kmsd new-root-key [flags]

Creates a new API key with the flag "*" (every permission) in the root
Account and prints its secret once: the way back when the root API key is
lost (the bootstrap key that kmsd -dev printed once, say). Holding the
master key is its authority: it is read as for the server (KMS_MASTER_KEY,
-master-key-file, or <data>/master.key with -dev). The key's creation is
recorded in the activity trail (action apikey.create, by
app:kmsd.new-root-key). The keys made before stay as they are. With the
embedded store, stop kmsd first: the store can be opened by one process
at a time. Exit status: 0 on success, 1 on an error, 2 on a usage error
(no master key among them).

`)
	} else if cmd == "rotate-signing-key" {
		fmt.Fprint(w, `Usage: kmsd rotate-signing-key [flags]

Makes a new Ed25519 key that signs headers, and makes it the one that signs
new headers. The keys before it stay published (GET /ks/signing-keys), so
the headers they signed keep verifying. The rotation is recorded in the
activity trail (action signingkey.rotate, by "operator"). Prints the new
key's ID and public key. With the embedded store, stop kmsd first: the
store can be opened by one process at a time. With -store postgres://...,
the nodes keep running and sign with the new key within a second. The
master key is read as for the server (KMS_MASTER_KEY, -master-key-file, or
<data>/master.key with -dev).

With -signing-key-pkcs11 URI (the nodes' current key), the new key is an
Ed25519 key pair made in that key's token, labelled as the current one
with its trailing number raised (kms-signing, kms-signing-2, -3...), its
id, if the URI names one, raised by one; the store records its public
key. It prints the new key's URI: restart every node with it. Until then
they sign with the key before, which stays published.

`)
	} else {
		fmt.Fprint(w, `Usage: kmsd [flags]               run the server
       kmsd verify-audit [flags]  check the activity trail's hash chain
       kmsd migrate -from DIR -to URL  copy an embedded store into PostgreSQL
       kmsd rotate-signing-key [flags]  sign new headers with a new key
       kmsd backup [-o FILE] [flags]    a consistent backup, while kmsd runs or not
       kmsd restore -i FILE -data DIR   a new data directory from a backup
       kmsd audit export [-from SEQ]    activity records as JSON lines
       kmsd rekey [flags]               move the store to a new master key, while kmsd serves
       kmsd new-root-key [flags]        a new API key with the flag "*", from the master key
       kmsd version                     print the version and the revision it was built from (or -version)

`)
	}
	fmt.Fprint(w, "Flags (each can be set by the environment variable beside it; the command line wins):\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, s := range settings {
		name := "-" + s.flag
		if s.arg != "" {
			name += " " + s.arg
		}
		def := ""
		if s.def != "" {
			def = " (default " + s.def + ")"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s%s\n", name, s.env, s.usage, def)
	}
	tw.Flush()
	fmt.Fprint(w, "\nEnvironment only (secrets never go on the command line):\n")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, e := range envOnly {
		fmt.Fprintf(tw, "  %s\t%s\n", e[0], e[1])
	}
	tw.Flush()
	fmt.Fprint(w, "\nSee docs/OPERATIONS.md.\n")
}
