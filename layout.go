package kms

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"

	"github.com/ringkms/kms/internal/ids"
	"github.com/ringkms/kms/internal/schedule"
)

// The key layout of the store. Every key starts with a short prefix naming
// its table; secondary indexes are tables of their own whose keys end in
// the primary ID and whose values are empty unless noted.
var (
	sep = []byte{0}

	pfxRing      = []byte("ring/id/")   // ring ID -> KeyRing record
	pfxRingName  = []byte("ring/name/") // lower-case name -> ring ID (names are unique across /ks and /asym)
	pfxRingList  = []byte("ring/list/") // kind 0 lower-case name -> ring ID, for listing a group in name order
	pfxKey       = []byte("key/")       // ring ID 0 key ID -> key record
	pfxKeyCount  = []byte("keycount/")  // key ID -> encrypt calls reserved (uint64, big-endian)
	pfxKeyErase  = []byte("keyerase/")  // ring ID 0 key ID: destroyed keys whose earlier versions the store has yet to erase (destroy.go)
	pfxAccount   = []byte("acct/id/")   // account ID -> Account record
	pfxAccountUI = []byte("acct/uid/")  // uid -> account ID
	pfxAPIKey    = []byte("ak/id/")     // API key ID -> API key record (digest only)
	pfxAPIDigest = []byte("ak/digest/") // SHA-256 of the secret -> API key ID
	pfxAPIRing   = []byte("ak/ring/")   // lower-case ring name 0 API key ID: keys whose flags name the ring
	pfxAPIOwner  = []byte("ak/owner/")  // user ID 0 API key ID: keys created with that User's access token
	pfxSigning   = []byte("sys/sign/")  // signing key ID -> sealed Ed25519 seed, or sealed heldKeyRecord of a key held outside the store (signingkeys.go)
	pfxThrottle  = []byte("throttle/")  // throttle kind "/" MAC of the key counted (hex) -> its failures and lockouts (JSON; see internal/throttle)

	keySigningActive = []byte("sys/sign-active") // ID of the signing key in use
	// The activity trail itself is in the Store's Trail (see internal/base);
	// the Store holds its indexes. Each index is a set of terms, and a
	// term's entries are postings blocks: term firstSeq (uint64,
	// big-endian) -> the seqs of the term's records from firstSeq on
	// (see internal/postings).
	keyActHead    = []byte("act/head")    // the last indexed record: journal.Head JSON
	keyActPending = []byte("act/pending") // the records of the last batch that wrote to the store (see internal/journal)

	pfxActSeq       = []byte("act/seq/") // the trail itself, in cursors: seq (uint64, big-endian)
	pfxActByKey     = []byte("act/k/")   // term: API key or user ID 0
	pfxActByAccount = []byte("act/a/")   // term: account ID 0
	pfxActByRing    = []byte("act/r/")   // term: ring name 0
	pfxActByAction  = []byte("act/x/")   // term: action 0
)

// The API keys of each Account (accounts.go).
var pfxAPIAccount = []byte("ak/acct/") // account ID 0 API key ID

// The activity trail's indexes of time, refusals and props (activity.go).
var (
	// act/t/ ms (uint64, big-endian) seq: the first record of each
	// millisecond of the trail. createdAt never decreases along the chain,
	// so the first entry at or after a time names the first record at or
	// after it; a record of the same millisecond as the one before it
	// needs no entry.
	pfxActByTime = []byte("act/t/")
	// act/v/0/ (a term): the refused records (valid false).
	pfxActDenied = []byte("act/v/0/")
	// act/p/ name 0 value 0 (a term): a top-level prop whose value is a
	// string, number or boolean, as canonical JSON of at most
	// maxPropIndexValue bytes, and whose name has at most maxPropIndexName
	// bytes and no 0 byte (see propIndexed). Props action and ring are
	// left out: they always repeat the action and ring of the record (see
	// activityCodec.Encode), which have their own indexes.
	pfxActByProp = []byte("act/p/")
)

// Layout of the Asset store.
var (
	pfxAsset          = []byte("asset/id/") // asset ID -> assetRecord
	pfxAssetByKey     = []byte("asset/k/")  // API key ID 0 asset ID
	pfxAssetByAccount = []byte("asset/a/")  // account ID 0 asset ID
	pfxAssetByRing    = []byte("asset/r/")  // ring ID 0 asset ID
	pfxAssetChild     = []byte("asset/p/")  // parent ID 0 child ID
	pfxAssetBySeal    = []byte("asset/s/")  // key ID 0 asset ID: the Assets of encrypt calls that handed out that key
)

// The use counts of keys (keyusage.go).
var (
	pfxKeyUsage     = []byte("keyuse/") // key ID -> keyUsage (usageLen bytes)
	pfxActByKeyHash = []byte("act/h/")  // term: key ID 0, the successful encrypt records handing out that key
)

// The versions of a ring's keys (keyversion.go).
var pfxKeyVersion = []byte("keyver/") // ring ID 0 version (uint32, big-endian) -> key ID

// The aliases of held keys (heldkeys_alias.go).
var (
	pfxHeldAlias     = []byte("alias/name/") // lower-case alias -> heldAliasRecord JSON
	pfxHeldAliasRing = []byte("alias/ring/") // ring ID 0 lower-case alias: the aliases of each held key
)

// pfxCount holds the number of resources of each kind, kept by the
// journal jobs that create and delete them: count/<kind>[/<account ID>]
// -> uint64, big-endian.
var pfxCount = []byte("count/")

// pfxSigningMeta holds what is public of a signing key beside its sealed
// seed or record (pfxSigning): signing key ID (hex) -> signingKeyMeta JSON. Keys made
// before it existed have none; they are published without a creation time.
var pfxSigningMeta = []byte("sys/signmeta/")

// Store layout of Users and their tokens.
var (
	pfxUser        = []byte("user/id/")     // user ID -> userRecord
	pfxUserName    = []byte("user/name/")   // lower-case username -> user ID; also the listing of every Account's Users
	pfxUserEmail   = []byte("user/email/")  // lower-case email -> user ID
	pfxUserAccount = []byte("user/acct/")   // account ID 0 lower-case username -> user ID: the listing of one Account
	pfxInvite      = []byte("user/invite/") // digest of an invitation token -> tokenRecord
	pfxReset       = []byte("user/reset/")  // digest of a password reset token -> tokenRecord
	pfxSession     = []byte("sess/id/")     // digest of an access token -> session
	pfxSessionUser = []byte("sess/user/")   // user ID 0 digest of an access token
)

// The schedules (internal/schedule): entries of the time they fall due
// (unix ms, uint64 big-endian), a ring ID, 0 and a key ID.
var (
	keyDue    = schedule.Index{Prefix: []byte("keydue/")} // keys scheduled for destruction, by time (destroy.go)
	rotateDue = schedule.Index{Prefix: []byte("rotdue/")} // active keys whose rotationPeriod ends then (rotation.go)
	// heldDeleteDue holds the held keys whose deletion falls due then
	// (heldkeys_state.go): a ring ID and no key ID.
	heldDeleteDue = schedule.Index{Prefix: []byte("helddeldue/")}
)

// join concatenates key parts into a new slice.
func join(parts ...[]byte) []byte {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	out := make([]byte, 0, n)
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func isNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

// getJSON decodes the JSON record at key into rec and returns the size of
// the stored value; a missing record is the error notFound.
func getJSON(tx Txn, key []byte, rec any, notFound error) (int, error) {
	v, err := tx.Get(key)
	if isNotFound(err) {
		return 0, notFound
	} else if err != nil {
		return 0, err
	}
	return len(v), json.Unmarshal(v, rec)
}

// noteErase notes the key keyID of the ring ringID, destroyed or
// deleted in tx, for eraseDestroyed.
func noteErase(tx Txn, ringID, keyID string) error {
	return tx.Set(join(pfxKeyErase, []byte(ringID), sep, []byte(keyID)), []byte{})
}

// sized is the size of a record as read, kept in the records that pages
// list with their size.
type sized struct{ stored int }

func (s *sized) setStored(n int) { s.stored = n }

// getSized reads the record under key as getJSON does, keeping its size.
func getSized[T any, P interface {
	*T
	setStored(int)
}](tx Txn, key []byte, notFound error) (P, error) {
	rec := P(new(T))
	n, err := getJSON(tx, key, rec, notFound)
	if err != nil {
		return nil, err
	}
	rec.setStored(n)
	return rec, nil
}

// newID returns a new identifier (internal/ids): creation time and
// randomness, strictly increasing within one process, so lists in ID order
// are in creation order.
func newID(now time.Time) string { return ids.New(now) }

// idLen is the length of an identifier's text.
const idLen = ids.Len

// parseID decodes an identifier made by newID.
func parseID(s string) ([16]byte, bool) { return ids.Parse(s) }

// afterKey returns the smallest key greater than k.
func afterKey(k []byte) []byte { return append(bytes.Clone(k), 0) }

// b64url decodes the base64url texts the service issues (hashes, headers,
// cursors) strictly: a text with non-zero padding bits is refused, so each
// value has exactly one spelling.
var b64url = base64.RawURLEncoding.Strict()

// b64String is base64.RawURLEncoding.EncodeToString for the hashes and
// headers the service issues, with one allocation (the string's) where
// EncodeToString makes two. buf holds the longest header (341 bytes, 455
// characters); a longer b costs one more allocation.
func b64String(b []byte) string {
	var buf [512]byte
	return string(base64.RawURLEncoding.AppendEncode(buf[:0], b))
}

// digestHex is hex.EncodeToString of a SHA-256 digest, with one allocation
// (the string's) where EncodeToString makes two.
func digestHex(sum [32]byte) string {
	var buf [64]byte
	hex.Encode(buf[:], sum[:])
	return string(buf[:])
}

// seqKey is the big-endian key of a record's seq.
func seqKey(n uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], n)
	return b[:]
}
