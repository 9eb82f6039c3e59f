package kms

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"strings"

	"github.com/ringkms/kms/internal/barrier"
)

// MasterKeySize is the size of the master key in bytes.
const MasterKeySize = barrier.MasterKeySize

// MasterKey is the root of trust: a 256-bit key from which every purpose key
// of the service is derived, and a RootKey. It never reaches the store or a
// log: String, GoString and MarshalText redact it. The zero value is not a
// valid key. It is internal/barrier's, under its public name.
type MasterKey = barrier.MasterKey

// ParseMasterKey decodes a master key from standard or URL-safe base64
// (padded or not) of exactly 32 bytes. Surrounding white space is ignored.
func ParseMasterKey(text string) (MasterKey, error) { return barrier.ParseMasterKey(text) }

// GenerateMasterKey returns a new random master key.
func GenerateMasterKey() MasterKey { return barrier.GenerateMasterKey() }

// The prefixes of the secrets the service issues: API keys, invitation
// and password reset tokens (invites.go) and access tokens (sessions.go).
const (
	apiKeyPrefix      = "rk_"
	inviteTokenPrefix = "rki_"
	resetTokenPrefix  = "rkr_"
	accessTokenPrefix = "rkt_"
)

// minSecretLen is the shortest API key secret accepted (bootstrap keys).
const minSecretLen = 32

// secretPrefixes start the secrets the service issues.
var secretPrefixes = []string{apiKeyPrefix, accessTokenPrefix, inviteTokenPrefix, resetTokenPrefix}

// LooksLikeSecret reports whether s could be a credential the service
// accepts or hands out, so that whoever shows s (a log line, an error
// answer) redacts it: it starts like a secret the service issues (API
// keys, access, invitation and reset tokens), or it is as long as a
// bootstrap API key may be (which has no fixed form) without being an ID.
func LooksLikeSecret(s string) bool {
	for _, prefix := range secretPrefixes {
		if len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix) {
			return true
		}
	}
	if len(s) < minSecretLen {
		return false
	}
	_, isID := parseID(s)
	return !isID
}

func newSecret(prefix string) string {
	var b [32]byte
	rand.Read(b[:])
	return prefix + base64.RawURLEncoding.EncodeToString(b[:])
}

func secretDigest(secret string) string {
	var buf [128]byte // room for the secrets the service issues, which []byte(secret) would allocate
	return digestHex(sha256.Sum256(append(buf[:0], secret...)))
}
