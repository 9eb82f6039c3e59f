// Command kmsbench is a load tool for kmsd: it drives POST /ks/encrypt
// and /ks/decrypt (or, with -mode transit-encrypt, transit-decrypt,
// transit-sign and transit-hmac, Vault's transit encrypt, decrypt, sign
// and hmac, kmsd -transit) from many
// keep-alive clients and reports throughput and latency quantiles. With
// -mode k8s-encrypt and k8s-decrypt it calls the Kubernetes KMS v2
// plugin's Encrypt and Decrypt on kmsd's socket (kmsd -k8s-kms-socket)
// instead, over gRPC, as the API server does. With -mode aws-encrypt and
// aws-decrypt it calls AWS KMS's Encrypt and Decrypt (kmsd -aws-kms),
// each call signed with Signature Version 4, as AWS's SDKs do.
//
//	kmsbench -start [flags]                  start a kmsd of its own and load it
//	kmsbench -start -store postgres://... -nodes 3 [flags]
//	                                         start a cluster of 3 kmsd on one database and load it
//	kmsbench -start -store postgres://... -nodes 3 -embedded [flags]
//	                                         the same, and one kmsd on the embedded store to compare
//	kmsbench -start -store postgres://... -nodes 3 -embedded -embedded-nodes 3 [flags]
//	                                         the same against 3 kmsd on embedded stores of their own
//	kmsbench -start -against OLD [flags]     kmsd built from here against the kmsd binary OLD, taking turns
//	kmsbench -start -kmsd BIN -against BIN -signing-key-pkcs11 URI
//	                                         kmsd signing headers in a PKCS#11 token against kmsd signing in memory
//	kmsbench -url http://127.0.0.1:8200 ...  load a running kmsd (API key in KMS_API_KEY)
//	kmsbench -url URL1,URL2 ...              load the nodes of a running cluster
//	kmsbench -mode k8s-encrypt -k8s-socket PATH ...
//	                                         load the KMS plugin socket of a running kmsd
//	kmsbench ...                             load the kmsd of KMS_ADDR
//
// Against a running kmsd, kmsbench reads the settings every client of
// ringkms reads (package client's FromEnv): KMS_ADDR (when neither -url
// nor -start is given), KMS_API_KEY or KMS_API_KEY_FILE, and KMS_CACERT
// for a certificate of a private CA. KMSBENCH_KEY, the API key's old name,
// is still read when neither of the new ones is set.
//
// Over several nodes, client i sends its requests to node i mod N; the
// ring and the pool of hashes to decrypt are made through the first node,
// so that decrypt calls cross nodes.
//
// With -baseline it also measures, in the same run, a minimal Go net/http
// JSON handler, the floor under any HTTP API on the same machine, served by
// a process of its own as kmsd is, and prints kmsd's figures as a share of
// it. With -embedded (and -start -store) it measures, in the same run, the
// kmsd nodes on PostgreSQL against one kmsd on the embedded store (or,
// with -embedded-nodes, several, each a service of its own), each with a
// ring and decrypt pool of its own, and prints the first as a share of
// the second. With -against (and -start) it measures kmsd against
// another build of it, the binary at the path given (the build before a
// change), each started the same way, and prints the first as a share of
// the second. With any of the three, the targets take turns in -rounds
// rounds.
//
// For every process it starts (each kmsd, the baseline), kmsbench reads
// the CPU time the process spent during the measured loads (utime + stime
// of /proc/PID/stat, read just before and after each) and reports it per
// request, for each target and each node; with -embedded also each
// node's as a multiple of the embedded kmsd's. The CPU of PostgreSQL's
// own processes is not counted. With -start and -rss it reports kmsd's
// peak resident memory. Traffic goes to loopback addresses only, unless
// -allow-remote. Run kmsbench -h for the flags.
package main

import (
	"context"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/ringkms/kms/client"
	"github.com/ringkms/kms/internal/interrupt"
)

func main() {
	if os.Getenv(baselineEnv) == "1" {
		baselineMain()
		return
	}
	ctx, stop := interrupt.Context()
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if errors.Is(err, context.Canceled) {
			err = errors.New("interrupted")
		}
		fmt.Fprintf(os.Stderr, "kmsbench: %v\n", err)
		os.Exit(1)
	}
}

// Bounds of the flags: every run ends.
const (
	maxConcurrency = 4096
	maxDuration    = 24 * time.Hour
	maxRequests    = 1_000_000_000
	maxPool        = 1_000_000
	maxRounds      = 1000
	maxNodes       = 64
	minRound       = 100 * time.Millisecond
	// nDuration bounds a run given -n but no -d.
	nDuration = time.Hour
)

// options are the flags.
type options struct {
	url         string   // -url as given, else KMS_ADDR without -start
	urlFrom     string   // what gave url: -url or KMS_ADDR
	urls        []string // the nodes of -url, or those kmsbench started
	key         string
	caCert      string         // -ca-cert, else KMS_CACERT
	roots       *x509.CertPool // the CA certificates of caCert; nil: the system's
	allowRemote bool
	start       bool
	store       string
	nodes       int
	kmsd        string
	logLevel    string
	mode        string
	batch       int // items per request: 1 is single calls, more the batch routes
	mix         float64
	concurrency int
	duration    time.Duration
	requests    int64
	warmup      time.Duration
	timeout     time.Duration
	ring        string
	keyType     string     // -key-type as given
	transitKey  transitKey // the transit key of a transit mode, of -key-type
	asset       bool
	pool        int
	baseline    bool
	embedded    bool
	embNodes    int // -embedded-nodes: how many kmsd on the embedded store
	against     string
	rounds      int
	rss         bool
	json        bool
	tls         bool
	signingKey  string // -signing-key-pkcs11
	pin         string // KMS_PKCS11_PIN, passed on to the kmsd started
	k8sSocket   string // -k8s-socket: a running kmsd's KMS plugin socket, for the k8s modes
	awsKeyID    string // -aws-access-key-id: the ID of the API key -key, for the aws modes
	awsKey      string // the KeyId of the aws modes: -ring when given, else "" (CreateKey makes one)
}

const usageHead = `Usage: kmsbench -start [-store postgres://... [-nodes N] [-embedded]] [flags]
       kmsbench -start -against PATH [flags]
       kmsbench -url URL[,URL...] [flags]    (API key in KMS_API_KEY, or -key)
       kmsbench [flags]                      (the kmsd of KMS_ADDR)
       kmsbench -mode aws-encrypt|aws-decrypt -url URL -aws-access-key-id ID [flags]
       kmsbench -mode aws-encrypt|aws-decrypt -start [flags]
       kmsbench -mode k8s-encrypt|k8s-decrypt -k8s-socket PATH [flags]
       kmsbench -mode k8s-encrypt|k8s-decrypt -start [flags]

Loads kmsd with POST /ks/encrypt and /ks/decrypt calls from -c keep-alive
clients for -d (or -n requests, whichever ends first), after -warmup, and
prints requests, errors, ops/s and latency quantiles to stdout; a progress
line goes to stderr every second. A run is always bounded: -n without -d
stops after 1h at most.

The API key needs the flag "*" or the flags for the ring (read, create
when it is missing) and for encrypt and decrypt.

With -mode transit-encrypt, transit-decrypt, transit-sign or
transit-hmac, kmsbench calls Vault's transit interface instead (POST
/v1/transit/encrypt/RING, /v1/transit/decrypt/RING, /v1/transit/sign/RING
or /v1/transit/hmac/RING, a 32-byte plaintext or input, batch_input with
-batch): the kmsd it starts serves it (-transit), a running one must.
-ring names the transit key, created if missing with the type of
-key-type: aes256-gcm96 (or chacha20-poly1305) to encrypt and decrypt,
ed25519 (or ecdsa-p256, ecdsa-p384, rsa-2048, rsa-3072, rsa-4096,
ml-dsa-44, ml-dsa-65, ml-dsa-87) to sign, hmac (or any type) for
HMACs; a key that exists must be of that type. The API key needs the
flags of the key: keyring.RING.read, create, and encrypt and decrypt,
sign or hmac. With -start, kmsbench
runs its own kmsd (built from ./cmd/kmsd unless -kmsd) on 127.0.0.1:0 with
a temporary data directory, a random master key and a random bootstrap API
key, and stops it with SIGTERM at the end, or on Ctrl-C.

With -mode aws-encrypt or aws-decrypt, kmsbench is AWS's SDKs (SOPS's
--kms, the AWS CLI) calling kmsd's AWS KMS protocol (kmsd -aws-kms):
POST / with X-Amz-Target: TrentService.Encrypt of a random 32-byte
plaintext under an EncryptionContext of one pair, as SOPS sends, or
TrentService.Decrypt of the ciphertexts of -pool Encrypt calls made
first, each checked against the plaintext encrypted (a wrong one counts
as an error "mismatch"). Each call is signed anew with AWS Signature
Version 4 (service kms, region us-east-1), as the SDKs sign, and its
latency counts from the signing; errors count by AWS's exception
(AccessDeniedException, ...). The API key's secret is -key (KMS_API_KEY,
KMS_API_KEY_FILE) as for the other modes; a signature names the key by
its ID, which a running kmsd's calls need in -aws-access-key-id (the
keyid that kmsctl apikey create answers with the secret, or that kmsd
logs as apikey_id for its bootstrap key; never the secret); with
-start, kmsbench starts kmsd with -aws-kms and asks it for the ID of its
bootstrap key (POST /auth/validate). The key is a SYMMETRIC_DEFAULT key
that CreateKey makes on each target (the API key needs
keyring.*.create, encrypt and decrypt, as a new key's name is random),
or on a running kmsd the key that -ring names (its KeyId: a key of
CreateKey, or a transit key that encrypts), which must exist (the API
key needs keyring.KEY.read, encrypt and decrypt).

With -mode k8s-encrypt or k8s-decrypt, kmsbench is the Kubernetes API
server calling kmsd's KMS v2 plugin (kmsd -k8s-kms-socket) over gRPC on
its Unix socket: Encrypt of a random 32-byte data key (the API server's
DEK), or Decrypt of the data keys of -pool Encrypt calls made first,
each checked against the key sealed (a wrong one counts as an error
"mismatch"); every call with a uid of its own. The -c clients share one
gRPC connection per socket, as the API server holds one. -k8s-socket
names the socket of a running kmsd, which needs no -url nor API key; with
-start, kmsbench starts each kmsd with a socket in a temporary directory
(the held key -k8s-kms-key's default, kubernetes, made at its start).
Errors count by gRPC code (Unavailable, ...). Against a running kmsd,
kmsbench reads the process ID of the socket's owner from the socket
(SO_PEERCRED, Linux) for its CPU per request.

Against a running kmsd, kmsbench reads the settings every client of
ringkms reads: KMS_ADDR, the service's URL, stands in for -url when
neither -url nor -start is given; KMS_API_KEY, else the file named by
KMS_API_KEY_FILE, for -key; KMS_CACERT for -ca-cert, the CA certificates
to trust over https:// in place of the system's (a certificate of a
private CA). KMSBENCH_KEY, the old name of the API key, is read when
neither KMS_API_KEY nor KMS_API_KEY_FILE is set.

Several nodes: -url takes the comma-separated URLs of the nodes of a
cluster, and -start -store postgres://... -nodes N starts N kmsd, one
after the other, each on its own port and data directory, with one master
key, over that database (an empty one: kmsd refuses a database made with
another master key). The -c clients are spread evenly: client i calls node
i mod N. The ring and the hashes to decrypt are made through the first
node, so that decrypt calls cross nodes. The summary counts the requests
of each node.

With -baseline, kmsbench also serves a minimal net/http JSON handler from
a process of its own, loads it the same way, taking turns with kmsd in
-rounds rounds so that both meet the same conditions of the machine, and
prints the ratios of throughput and p99.

With -embedded (and -start -store postgres://...), kmsbench also starts
one kmsd on the embedded store (the same binary and settings, a master key
of its own), makes a ring and the hashes to decrypt on each of the two,
loads them taking turns in -rounds rounds, and prints the ratios of the
target "postgres" to the target "embedded": throughput, p99 and CPU per
request, the last also for each node.

With -embedded-nodes N (and -embedded), the embedded target is N kmsd,
each on an embedded store of its own (N services, with one master key and
API key), the clients spread over them as over the nodes, and a ring and
the hashes to decrypt made on each. The nodes on PostgreSQL are then
measured against as many embedded kmsd, each as busy as a node and
sharing the machine with as many processes: what belonging to a cluster
costs a request, apart from what a smaller share of the load costs a
process.

With -against PATH (and -start), kmsbench also starts the kmsd binary at
PATH, another build (the one before a change, say), the same way as its
own (store, flags, a master key and a ring of its own), loads the two
taking turns in -rounds rounds, and prints the ratios of the target
"kmsd" to the target "against": throughput, p99 and CPU per request. A
change to kmsd is judged so, within one run, by both its throughput and
the server's CPU per request.

CPU per request: for every process kmsbench starts, it reads the CPU time
(user + system, /proc/PID/stat) just before and after each measured load,
and divides what the target's processes spent by the target's requests
("cpu µs/req"), and each node's by the requests sent to it. It leaves out
the warm-up, the making of the hashes, the idle turns, PostgreSQL's own
processes and kmsbench itself; Linux counts in ticks of 10 ms, so runs of
a few seconds give coarse figures. Without /proc, the figures are left out.

The load generator's own CPU per request ("client µs/req") is kmsbench's
CPU time over each target's measured loads, by its requests: with the
server's, what a request costs the machine, so that a change can be
judged by the server's cost alone on a machine whose speed drifts.

With -signing-key-pkcs11 URI (and -start), the kmsd that kmsbench
starts (each node) signs headers with the Ed25519 key pair the URI names
in a PKCS#11 token, as kmsd -signing-key-pkcs11 does; KMS_PKCS11_PIN, when
set, is passed on for a URI without pin-source. The -against and
-embedded targets keep their signing keys in memory, so that -against
with the same binary as -kmsd measures the token's signatures against
keys in memory, taking turns:

  go build -o kmsd ./cmd/kmsd
  kmsbench -start -kmsd ./kmsd -against ./kmsd -signing-key-pkcs11 'pkcs11:...'

With -tls (and -start), kmsbench makes a self-signed ECDSA P-256
certificate for 127.0.0.1 for the run, serves kmsd (-tls-cert, -tls-key)
and the baseline over TLS with it, and loads them over HTTPS (Go's TLS
defaults, HTTP/1.1 keep-alive, as without -tls), trusting that
certificate alone.

Flags:
`

// parseFlags reads args and, for a running kmsd, the client settings of
// the environment (KMS_ADDR, KMS_API_KEY, KMS_API_KEY_FILE, KMS_CACERT,
// and KMSBENCH_KEY, the key's old name). It returns flag.ErrHelp after
// printing the usage to stdout when asked for help.
func parseFlags(args []string, getenv func(string) string, stdout io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("kmsbench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.url, "url", "", "`URL` of a running kmsd, e.g. http://127.0.0.1:8200, or the comma-separated URLs of the nodes of a cluster (loopback only, unless -allow-remote)")
	fs.StringVar(&o.key, "key", "", "API `KEY` for -url (better: the environment variable KMS_API_KEY or KMS_API_KEY_FILE, which keep it out of the process list; KMSBENCH_KEY, its old name, is still read)")
	fs.StringVar(&o.caCert, "ca-cert", "", "for an https:// -url: trust the CA certificates of `FILE` (PEM) in place of the system's (default $KMS_CACERT)")
	fs.BoolVar(&o.allowRemote, "allow-remote", false, "allow a -url whose host is not a loopback address")
	fs.BoolVar(&o.start, "start", false, "start a kmsd of its own on 127.0.0.1:0 instead of -url, and stop it at the end")
	fs.StringVar(&o.store, "store", "", "with -start: the PostgreSQL database (`URL` postgres://...) of the kmsd started, instead of the embedded store; an empty one (password better in PGPASSWORD or ~/.pgpass)")
	fs.IntVar(&o.nodes, "nodes", 1, "with -start -store: how many kmsd (`N`) to start on the database, a cluster")
	fs.StringVar(&o.kmsd, "kmsd", "", "the kmsd binary to run with -start, at `PATH` (default: go build ./cmd/kmsd into a temporary directory)")
	fs.StringVar(&o.logLevel, "kmsd-log-level", "info", "the -log-level (`LEVEL`) of the kmsd started with -start (info logs every request, as kmsd does by default)")
	fs.StringVar(&o.mode, "mode", "encrypt", "what to call (`MODE`): encrypt, decrypt (hashes and headers from -pool encrypt calls made first) or mix; transit-encrypt, transit-decrypt (ciphertexts of -pool encrypt calls), transit-sign and transit-hmac call Vault's transit interface instead (kmsd -transit; -ring names the transit key), with a 32-byte plaintext or input; aws-encrypt and aws-decrypt (ciphertexts of -pool Encrypt calls) call AWS KMS's protocol (kmsd -aws-kms) with a 32-byte plaintext, signed with -aws-access-key-id; k8s-encrypt and k8s-decrypt (data keys of -pool Encrypt calls) call the Kubernetes KMS v2 plugin's socket (kmsd -k8s-kms-socket) with a 32-byte data key")
	fs.StringVar(&o.awsKeyID, "aws-access-key-id", "", "with -mode aws-encrypt or aws-decrypt and a running kmsd: the `ID` of the API key whose secret is -key (KMS_API_KEY), the access key ID of the calls' signatures")
	fs.StringVar(&o.k8sSocket, "k8s-socket", "", "with -mode k8s-encrypt or k8s-decrypt: the Kubernetes KMS plugin socket (`PATH`) of a running kmsd (kmsd -k8s-kms-socket), in place of -url and its API key")
	fs.StringVar(&o.keyType, "key-type", "", "with a transit mode: the `TYPE` of the transit key made when -ring is missing, and that an existing one must have: aes256-gcm96 (the default to encrypt and decrypt) or chacha20-poly1305; ed25519 (the default to sign), ecdsa-p256, ecdsa-p384, rsa-2048, rsa-3072, rsa-4096, ml-dsa-44, ml-dsa-65 or ml-dsa-87 (ml-dsa alone is 65); hmac (the default for transit-hmac, which takes any type)")
	fs.Float64Var(&o.mix, "mix", 0.5, "with -mode mix, the `SHARE` of decrypt calls, 0 to 1")
	fs.IntVar(&o.batch, "batch", 1, "items per request (`N`, 1 to 1000): above 1, POST /ks/encrypt/batch and /ks/decrypt/batch with N items each, and keys (signatures, HMACs) per second in the summary")
	fs.IntVar(&o.concurrency, "c", 64, "concurrent clients, each sending one request after the other")
	fs.DurationVar(&o.duration, "d", 10*time.Second, "how long to measure (with -n and no -d: at most 1h)")
	fs.Int64Var(&o.requests, "n", 0, "stop after `N` requests in all (0: no limit but -d)")
	fs.DurationVar(&o.warmup, "warmup", time.Second, "load before measuring, not counted, for each target")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Second, "time limit of one request; a request over it counts as an error")
	fs.StringVar(&o.ring, "ring", "kmsbench", "key ring `NAME` to use; created (KEM x25519) if missing; in the aws modes, given, the KeyId of a key of the running kmsd (else CreateKey makes one)")
	fs.BoolVar(&o.asset, "asset", false, "encrypt with an Asset: every encrypt call creates one")
	fs.IntVar(&o.pool, "pool", 1000, "decrypt and mix modes: make `N` (hash, header) pairs first and decrypt them at random")
	fs.BoolVar(&o.baseline, "baseline", false, "also measure a minimal Go net/http JSON handler, served on 127.0.0.1:0 by a process of its own as kmsd is, the same way, and print the ratios")
	fs.BoolVar(&o.embedded, "embedded", false, "with -start -store: also start one kmsd on the embedded store, load it the same way, taking turns, and print the ratios of the kmsd on PostgreSQL to it (throughput, p99, CPU per request)")
	fs.IntVar(&o.embNodes, "embedded-nodes", 1, "with -embedded: how many kmsd (`N`) to start on the embedded store, each on a store of its own, the clients spread over them as over the nodes")
	fs.StringVar(&o.against, "against", "", "with -start: also start the kmsd binary at `PATH` (another build, the one before a change) the same way, load it taking turns, and print the ratios of kmsd to it (throughput, p99, CPU per request)")
	fs.IntVar(&o.rounds, "rounds", 5, "with -baseline, -embedded or -against: take turns between the targets in `R` rounds, each loading one target for 1/R of -d (and of -n)")
	fs.BoolVar(&o.rss, "rss", false, "with -start: sample the resident memory (VmRSS) of each kmsd every second and report the peak")
	fs.BoolVar(&o.json, "json", false, "print the summary as JSON instead of a table")
	fs.BoolVar(&o.tls, "tls", false, "with -start: serve kmsd (and the baseline) over TLS with a certificate made for the run, and load them over it")
	fs.StringVar(&o.signingKey, "signing-key-pkcs11", "", "with -start: the kmsd started (each node) signs headers with the Ed25519 key pair this PKCS#11 `URI` names (kmsd -signing-key-pkcs11; its PIN from the URI's pin-source or KMS_PKCS11_PIN, passed on); the -against and -embedded targets keep their keys in memory")

	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usageHead)
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			return nil, flag.ErrHelp
		}
		return nil, fmt.Errorf("%v (see kmsbench -h)", err)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q (see kmsbench -h)", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if err := o.readEnv(getenv, set); err != nil {
		return nil, fmt.Errorf("%v (see kmsbench -h)", err)
	}
	if set["n"] && !set["d"] {
		o.duration = nDuration
	}
	if err := o.validate(set); err != nil {
		return nil, fmt.Errorf("%v (see kmsbench -h)", err)
	}
	return o, nil
}

// modeFlags are the flags of some modes only, and the modes they go with.
var modeFlags = []struct {
	name  string
	modes func(mode string) bool
	with  string
}{
	{"k8s-socket", k8sMode, "-mode k8s-encrypt and k8s-decrypt"},
	{"aws-access-key-id", awsMode, "-mode aws-encrypt and aws-decrypt"},
}

func (o *options) validate(set map[string]bool) error {
	for _, f := range modeFlags {
		if set[f.name] && !f.modes(o.mode) {
			return fmt.Errorf("-%s goes with %s", f.name, f.with)
		}
	}
	var err error
	switch {
	case k8sMode(o.mode):
		err = o.validateK8s(set)
	case awsMode(o.mode):
		err = o.validateAWS(set)
	}
	if err != nil {
		return err
	}
	overHTTP := !k8sMode(o.mode)
	switch {
	case o.start && o.url != "":
		return errors.New("-start and -url exclude each other: load a kmsd of kmsbench's own, or a running one")
	case !o.start && o.url == "" && overHTTP:
		return errors.New("give -url of a running kmsd (and its API key), or set KMS_ADDR, or -start")
	case !o.start && o.key == "" && overHTTP:
		return fmt.Errorf("%s needs an API key: set KMS_API_KEY or KMS_API_KEY_FILE (or -key)", o.urlFrom)
	case !o.start && (o.kmsd != "" || o.rss || o.tls || set["store"] || set["nodes"] || o.signingKey != ""):
		return errors.New("-kmsd, -rss, -tls, -store, -nodes and -signing-key-pkcs11 go with -start")
	case o.signingKey != "" && !strings.HasPrefix(strings.ToLower(o.signingKey), "pkcs11:"):
		return errors.New("-signing-key-pkcs11: want a PKCS#11 URI, pkcs11:...")
	case o.start && set["ca-cert"]:
		return errors.New("-ca-cert goes with -url: with -start -tls, kmsbench trusts the certificate it made")
	case o.store != "" && !strings.HasPrefix(o.store, "postgres://") && !strings.HasPrefix(o.store, "postgresql://"):
		// Not quoted: the URL may hold a password.
		return errors.New("-store: want a PostgreSQL URL, postgres://... or postgresql://...")
	case o.nodes < 1 || o.nodes > maxNodes:
		return fmt.Errorf("-nodes %d: want 1 to %d", o.nodes, maxNodes)
	case o.nodes > 1 && o.store == "":
		return fmt.Errorf("-nodes %d needs -store postgres://...: the embedded store serves one process", o.nodes)
	case o.embedded && o.baseline:
		return errors.New("-embedded and -baseline exclude each other: compare kmsd on PostgreSQL with kmsd on the embedded store, or kmsd with the baseline")
	case o.embedded && (!o.start || o.store == ""):
		return errors.New("-embedded needs -start and -store postgres://...: it compares the kmsd started on PostgreSQL with one on the embedded store")
	case o.embNodes < 1 || o.embNodes > maxNodes:
		return fmt.Errorf("-embedded-nodes %d: want 1 to %d", o.embNodes, maxNodes)
	case set["embedded-nodes"] && !o.embedded:
		return errors.New("-embedded-nodes goes with -embedded")
	case o.against != "" && (!o.start || o.baseline || o.embedded):
		return errors.New("-against needs -start, and excludes -baseline and -embedded: it compares two builds of kmsd")
	case o.against != "" && o.store != "":
		return errors.New("-against goes with the embedded store: two builds on one database would share its state")
	case o.mode != "encrypt" && o.mode != "decrypt" && o.mode != "mix" && transitCalls[o.mode].route == "" && !awsMode(o.mode) && overHTTP:
		return fmt.Errorf("-mode %q: want encrypt, decrypt, mix, transit-encrypt, transit-decrypt, transit-sign, transit-hmac, aws-encrypt, aws-decrypt, k8s-encrypt or k8s-decrypt", o.mode)
	case set["key-type"] && !transitMode(o.mode):
		return errors.New("-key-type goes with the transit modes: the /ks modes encrypt with a ring's KEM")
	case o.asset && transitMode(o.mode):
		return errors.New("-asset goes with the /ks modes: a transit encrypt makes no Asset")
	case set["mix"] && o.mode != "mix":
		return errors.New("-mix goes with -mode mix")
	case o.batch < 1 || o.batch > 1000:
		return fmt.Errorf("-batch %d: want 1 to 1000 items per request", o.batch)
	case !(o.mix >= 0 && o.mix <= 1):
		return fmt.Errorf("-mix %v: want a share from 0 to 1", o.mix)
	case o.concurrency < 1 || o.concurrency > maxConcurrency:
		return fmt.Errorf("-c %d: want 1 to %d", o.concurrency, maxConcurrency)
	case o.duration <= 0 || o.duration > maxDuration:
		return fmt.Errorf("-d %v: want above 0 and at most %v", o.duration, maxDuration)
	case o.requests < 0 || o.requests > maxRequests:
		return fmt.Errorf("-n %d: want 0 (no limit) to %d", o.requests, maxRequests)
	case o.warmup < 0 || o.warmup > maxDuration:
		return fmt.Errorf("-warmup %v: want 0 to %v", o.warmup, maxDuration)
	case o.timeout <= 0 || o.timeout > 10*time.Minute:
		return fmt.Errorf("-timeout %v: want above 0 and at most 10m", o.timeout)
	case o.pool < 1 || o.pool > maxPool:
		return fmt.Errorf("-pool %d: want 1 to %d", o.pool, maxPool)
	case o.rounds < 1 || o.rounds > maxRounds:
		return fmt.Errorf("-rounds %d: want 1 to %d", o.rounds, maxRounds)
	case set["rounds"] && !o.takesTurns():
		return errors.New("-rounds goes with -baseline, -embedded or -against")
	case o.takesTurns() && o.duration/time.Duration(o.rounds) < minRound:
		return fmt.Errorf("-d %v in %d rounds: want at least %v a round", o.duration, o.rounds, minRound)
	case o.takesTurns() && o.requests > 0 && o.requests < int64(o.rounds):
		return fmt.Errorf("-n %d in %d rounds: want at least one request a round", o.requests, o.rounds)
	case o.ring == "":
		return errors.New("-ring: a ring name is required")
	}
	if transitMode(o.mode) {
		var err error
		if o.transitKey, err = parseKeyType(o.keyType, o.mode); err != nil {
			return err
		}
	}
	if o.url != "" {
		for raw := range strings.SplitSeq(o.url, ",") {
			u, err := o.checkURL(strings.TrimSpace(raw), o.urlFrom)
			if err != nil {
				return err
			}
			o.urls = append(o.urls, u)
		}
	}
	if n := max(len(o.urls), o.nodes); o.concurrency < n {
		return fmt.Errorf("-c %d over %d nodes: want at least one client a node", o.concurrency, n)
	}
	return nil
}

// readEnv completes the options of a running kmsd from the client
// settings of the environment, for what the flags (set) did not give.
func (o *options) readEnv(getenv func(string) string, set map[string]bool) error {
	o.urlFrom = "-url"
	if k8sMode(o.mode) && !o.start {
		return nil // the plugin's socket: no URL, key nor certificate
	}
	if o.start {
		o.pin = getenv(pinEnv) // for a token of -signing-key-pkcs11 without pin-source
		return nil             // kmsbench's own kmsd: its URL, key and certificate
	}
	if o.url == "" {
		o.url, o.urlFrom = getenv(client.EnvAddr), client.EnvAddr
	}
	if !set["key"] {
		switch k, f := strings.TrimSpace(getenv(client.EnvAPIKey)), getenv(client.EnvAPIKeyFile); {
		case k != "":
			o.key = k
		case f != "":
			b, err := os.ReadFile(f)
			if err != nil {
				return fmt.Errorf("%s: %w", client.EnvAPIKeyFile, err)
			}
			if o.key = strings.TrimSpace(string(b)); o.key == "" {
				return fmt.Errorf("%s: %s is empty", client.EnvAPIKeyFile, f)
			}
		default:
			o.key = strings.TrimSpace(getenv("KMSBENCH_KEY")) // the old name
		}
	}
	what := "-ca-cert"
	if o.caCert == "" {
		o.caCert, what = getenv(client.EnvCACert), client.EnvCACert
	}
	if o.caCert != "" {
		pem, err := os.ReadFile(o.caCert)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		o.roots = x509.NewCertPool()
		if !o.roots.AppendCertsFromPEM(pem) {
			return fmt.Errorf("%s: %s holds no PEM certificate", what, o.caCert)
		}
	}
	return nil
}

// takesTurns reports whether two targets take turns in -rounds rounds:
// with -baseline, -embedded or -against.
func (o *options) takesTurns() bool {
	return o.baseline || o.embedded || o.against != ""
}

// checkURL checks one URL of -url (or of what from names) and returns
// it without a trailing slash.
func (o *options) checkURL(raw, from string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%s %q: want http://host:port, or several, separated by commas", from, raw)
	}
	if !o.allowRemote && !isLoopback(u.Hostname()) {
		return "", fmt.Errorf("%s %q: %s is not a loopback address; kmsbench loads only this machine unless -allow-remote", from, raw, u.Hostname())
	}
	return strings.TrimSuffix(u.Scheme+"://"+u.Host+u.Path, "/"), nil
}

// isLoopback reports whether host is a loopback IP address, or
// "localhost" resolving to loopback addresses only.
func isLoopback(host string) bool {
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback()
	}
	if !strings.EqualFold(host, "localhost") {
		return false
	}
	addrs, err := net.LookupIP(host)
	if err != nil || len(addrs) == 0 {
		return false
	}
	for _, ip := range addrs {
		if !ip.IsLoopback() {
			return false
		}
	}
	return true
}

// run is kmsbench: it parses args (without the program name), loads kmsd
// (and the baseline, or the embedded kmsd) and prints the summary to
// stdout, progress to stderr. When ctx is done it stops the load, prints
// what it measured, stops kmsd and returns ctx's error.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) (err error) {
	o, err := parseFlags(args, getenv, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	b := &bench{o: o, stderr: stderr, tty: isTerminal(stderr)}
	if o.tls {
		if b.tls, err = newTLSFiles(); err != nil {
			return fmt.Errorf("-tls: make a certificate: %w", err)
		}
		defer b.tls.remove()
	}
	roots := o.roots
	if b.tls != nil {
		roots = b.tls.pool
	}
	b.client = newClient(o.concurrency, o.timeout, roots)
	defer b.client.CloseIdleConnections()

	var cls []*cluster
	if o.start {
		if cls, err = b.startClusters(ctx); err != nil {
			return err
		}
		defer func() {
			// For the early returns: kmsd is stopped before the
			// baseline. An error of kmsd's exit matters only when
			// nothing else went wrong (kmsd exiting early is one).
			if serr := stopClusters(cls); err == nil {
				err = serr
			}
		}()
		o.urls, o.key = cls[0].urls(), cls[0].key
	}
	sum := newSummary(o)
	err = b.runTargets(ctx, cls, sum)
	if serr := stopClusters(cls); err == nil {
		err = serr
	}
	if o.rss {
		for _, cl := range cls {
			sum.RSS = append(sum.RSS, cl.rss()...)
		}
	}
	if len(sum.Rows) > 0 {
		sum.finish()
		if perr := sum.print(stdout, o.json); perr != nil {
			return errors.Join(err, perr)
		}
	}
	return err
}

// runTargets prepares a workload on each kmsd cluster of cls (or, when
// kmsbench started none, on the kmsd of -url), starts the baseline with
// -baseline, measures them and puts their rows in sum.
func (b *bench) runTargets(ctx context.Context, cls []*cluster, sum *summary) (err error) {
	o := b.o
	ctx, cancel := watchKmsd(ctx, cls)
	defer cancel(nil)
	var targets []target
	for _, cl := range cls {
		targets = append(targets, target{name: cl.target, urls: cl.urls(), key: cl.key, pids: cl.pids(), apart: cl.apart})
	}
	if len(cls) == 0 {
		targets = append(targets, target{name: "kmsd", urls: o.urls, key: o.key})
	}
	defer closeCalls(targets)
	for i := range targets {
		if targets[i].calls, err = b.prepare(ctx, targets[i]); err != nil {
			return err
		}
	}
	if len(cls) == 0 {
		targets[0].pids = b.runningPIDs() // once it answered
	}
	if o.baseline {
		srv, err := b.startBaseline(ctx)
		if err != nil {
			return err
		}
		defer func() {
			if serr := srv.terminate(); serr != nil && err == nil {
				err = fmt.Errorf("baseline: %w", serr)
			}
		}()
		// The baseline ignores what the bodies hold: it gets kmsd's
		// (-baseline goes with the HTTP modes).
		urls := []string{srv.url}
		work := targets[0].calls.(*httpCalls).work[:1]
		targets = append(targets, target{name: "baseline", urls: urls, pids: []int{srv.cmd.Process.Pid}, calls: newHTTPCalls(b.client, urls, "", work)})
	}
	all, err := b.measure(ctx, targets)
	for i, st := range all {
		sum.Rows = append(sum.Rows, newRow(targets[i].name, targets[i].urls, o, st))
	}
	sum.Interrupted = err != nil && len(all) > 0 // the load was cut short
	return b.cause(ctx, err)
}

// isTerminal reports whether w is a terminal (a character device; good
// enough to choose between rewriting the progress line and appending).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
