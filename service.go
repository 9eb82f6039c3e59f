package kms

import (
	"crypto"
	"crypto/ed25519"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringkms/kms/internal/barrier"
	"github.com/ringkms/kms/internal/cache"
	"github.com/ringkms/kms/internal/encryptcount"
	"github.com/ringkms/kms/internal/headersign"
	"github.com/ringkms/kms/internal/hmackey"
	"github.com/ringkms/kms/internal/journal"
	"github.com/ringkms/kms/internal/keytype"
	"github.com/ringkms/kms/internal/pacer"
)

// Options configure a Service. The zero value of each field is a working
// default, except MasterKey, which is required.
type Options struct {
	// MasterKey is the root of trust (RootKey): a MasterKey, a key in a
	// PKCS#11 token, or another RootKey. Required.
	MasterKey RootKey

	// NextMasterKey is a second root key, for a rotation of the master
	// key while the service runs: the Service opens its store under
	// whichever of its two keys the store is sealed with, keeps both,
	// and follows a rekey (Rekey, Service.Rekey) to either without a
	// restart. Optional; without it the Service keeps no root key once
	// started.
	NextMasterKey RootKey

	// Logger receives operational events (never a secret). Nil means
	// silent. The audit trail is data, not log lines.
	Logger *zerolog.Logger

	// Now returns the current time. Nil means time.Now.
	Now func() time.Time

	// Mailer sends invitations and password resets. With none, an
	// invitation still succeeds (its loginUrl is the only copy of the
	// link) and a password reset cannot start (Invalid).
	Mailer Mailer

	// BaseURL is the public address of the service, on which links in
	// mail are built (for example https://kms.example.com).
	BaseURL string

	// TokenTTL is how long a user access token lasts. Zero means one hour.
	TokenTTL time.Duration
	// SessionLifetime is how long a User stays signed in: refresh hands
	// out new access tokens until SessionLifetime after the login (or
	// invitation completion) that issued the first, and no token lasts
	// past that. Then the User logs in again. Zero means 24 hours.
	SessionLifetime time.Duration
	// InviteTTL is how long an invitation can be completed. Zero means
	// seven days.
	InviteTTL time.Duration
	// ResetTTL is how long a password reset can be completed. Zero means
	// one hour.
	ResetTTL time.Duration

	// Limits are the plan limits: how many resources may exist. The zero
	// value of each means no limit.
	Limits Limits

	// CacheSize bounds each in-memory cache (key rings, keys,
	// credentials) in entries. Zero means 100,000.
	CacheSize int

	// MaxHeldKeyEncryptions bounds the encryptions that one version of a
	// held key makes: AES-256-GCM with random 96-bit nonces stays
	// within NIST SP 800-38D's bound on the chance of a repeated nonce
	// for at most 2^32 of them. Past it, the key rotates as it does past
	// a maxEncryptCount (whichever is lower applies), and an encrypt that
	// names an older version is refused (heldkeys_crypto.go). Zero means
	// DefaultMaxTransitEncryptions, which is also the most allowed; a
	// smaller value rotates sooner.
	MaxHeldKeyEncryptions uint64

	// MinDestroyDelay is the shortest delay after which a key may be
	// scheduled for destruction (DestroyKey). Zero means
	// DefaultMinDestroyDelay (one hour); a negative value allows any
	// delay, none included.
	MinDestroyDelay time.Duration

	// RateLimits, when set, limit the calls of each client address,
	// credential and Account that Admit and AdmitN are asked about
	// (httpapi asks for every request, and for each item of a batch). The
	// zero value limits nothing.
	RateLimits RateLimits

	// IPv6Prefix is how many leading bits of a client's IPv6 address
	// name the client for the rate limit per address and the login and
	// reset throttles (WithClientAddr): a host is usually given a whole
	// /64, and counted one address at a time it could make every call
	// from a new address and never be limited. Zero means
	// DefaultIPv6Prefix (64); otherwise 1 to 128 (128: each address on
	// its own). An IPv4 address, and an IPv4-mapped IPv6 address, counts
	// as its own IPv4 address.
	IPv6Prefix int

	// Observer, when set, receives measurements of the journal's batches
	// and the activity records they commit, for metrics (observe.go;
	// package metrics has one for Prometheus).
	Observer Observer

	// SigningKey, when set, is the key that signs every header this
	// Service issues: an Ed25519 key held outside the store, and as a
	// rule outside the process (kmsd -signing-key-pkcs11 gives a key pair
	// in a PKCS#11 token). Its Public must be an ed25519.PublicKey, and
	// its Sign must sign the message itself (pure Ed25519, opts
	// crypto.Hash(0)); it is called once per tree of up to 16 headers,
	// from one goroutine at a time, and asked twice before the calls of
	// a tree it fails answer Unavailable. The store records the key's public
	// key and SigningKeyURI, never a private key, so that every process
	// and GET /ks/signing-keys publish it; New records it and makes it
	// active when the store does not know it yet. The Service signs with
	// this key alone: it does not follow another process's rotation, and
	// RotateSigningKey refuses (signer.go). Nil, the default: keys the
	// service makes itself and keeps sealed in the store.
	SigningKey crypto.Signer
	// SigningKeyURI says where SigningKey is held (kmsd records the
	// token's URI without its pin-source); the store records it with
	// the public key, for operators and for the messages of processes
	// that lack the key. Never a secret. Optional.
	SigningKeyURI string
}

// Limits are plan limits. Creating a resource past one is a Limit error
// whose message names the maximum.
type Limits struct {
	MaxKeyRings          int // key rings of both groups, in all
	MaxUsers             int // Users, in all
	MaxAccounts          int // Accounts, in all
	MaxAPIKeysPerAccount int // API keys of one Account
}

// Service is ringkms: key rings, keys, credentials and the audit trail,
// over a Store. It is safe for concurrent use. Every method that acts for
// a caller takes the caller's Principal from its context (WithPrincipal).
type Service struct {
	store    Store
	trail    Trail // the activity trail, beside the store
	opts     Options
	log      zerolog.Logger
	now      func() time.Time
	journal  *journal.Journal[*Activity] // the single writer: every write and every record
	chainKey *hmackey.Key                // keys the activity chain (journal.Digest)
	limits   *rateLimiter                // nil: no rate limits

	barrier   *barrier.Barrier // the store's root secret, the seal and backup keys, a rekey (internal/barrier)
	hashMAC   *hmackey.Key     // MAC of hashes
	headerMAC *hmackey.Key     // MAC of headers
	pager     pager

	signer       atomic.Pointer[headersign.Signer] // signs new headers (signer.go); nil: none (CheckSigner)
	signerMu     sync.Mutex                        // serialises changes of signer, guards active
	active       activeKey                         // the store's active signing key, as last seen
	held         *headersign.Signer                // Options.SigningKey, the only key this Service signs with; nil: the store's keys
	signerNotice chan struct{}                     // another process may have rotated the signing key (coherence.go)
	keyCheckDue  atomic.Bool                       // the master key is to be checked against the store (coherence.go)
	verifyMu     sync.RWMutex
	verify       map[[8]byte]ed25519.PublicKey

	rings      *cache.Cache[string, *ringRecord] // ring ID -> ring
	ringNames  *cache.Cache[string, string]      // lower-case name -> ring ID
	aliases    *cache.Cache[string, string]      // lower-case alias of a held key -> ring ID, "" for no such alias (heldkeys_alias.go)
	keys       *cache.Cache[string, *keyRecord]  // key ID -> key
	principals *cache.Cache[string, *Principal]  // digest of a secret -> principal
	signers    *cache.Cache[string, *signer]     // API key ID -> its secret, for signed requests
	users      *userState                        // sessions and login throttles
	counts     *encryptcount.Counters            // the encrypt calls of each key, against reservations in the store
	ringLocks  sync.Map                          // ring ID -> *journal.Lock (lockRing)

	// keyVersions maps ring ID "/" version to key ID (keyversion.go): a
	// version, once given, never names another key. numbered says that
	// every ring's keys have versions.
	keyVersions *cache.Cache[string, string]
	numbered    atomic.Bool
	// heldKeys holds the AES-GCM of the /asym keys that transit calls
	// used, unwrapped (heldkeys_crypto.go): key ID -> cipher.AEAD.
	heldKeys *cache.Cache[string, *keytype.Key]

	stopCoherence func()       // stops keeping the caches coherent with other processes (coherence.go)
	destroyer     *pacer.Pacer // destroys keys at their time (destroy.go)
	rotator       *pacer.Pacer // rotates rings at the end of their rotationPeriod (rotation.go)
}

// Observer receives measurements of a Service, for a metrics system
// (package metrics implements it with Prometheus). Its methods run on the
// journal's goroutine, once per batch of calls, and hold up every call of
// the next batch while they run: they must be quick and must not block.
type Observer interface {
	// ObserveBatch reports a journal batch: how many calls it held, how
	// long it took from its first call's turn to its answers, how long
	// the trail's append with its sync took within that (zero when the
	// batch appended nothing, or the store appends in its own commit),
	// and the error that failed the whole batch (nil when it committed,
	// whatever the calls' own outcomes).
	ObserveBatch(calls int, commit, appendTime time.Duration, err error)
	// ObserveRecords reports the activity records of a committed batch,
	// in chain order, before the callers are answered. It must neither
	// keep nor change them.
	ObserveRecords(recs []*Activity)
}

// signer is what checks the signatures of an API key: its secret, and
// the digest its principal is found by. A key's secret never changes,
// so an entry stays true for as long as the key exists; whether it is
// still active is the principal's lookup's to say.
type signer struct {
	digest string
	secret []byte
}
