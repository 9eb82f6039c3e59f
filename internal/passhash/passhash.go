// Package passhash hashes passwords with argon2id and checks them. A
// hash is kept in the PHC string format, which names
// the algorithm, its version and its parameters, so that the parameters can
// change without breaking the hashes already stored:
//
//	$argon2id$v=19$m=65536,t=1,p=2$<salt>$<key>
//
// with salt (16 random bytes) and key (32 bytes) in unpadded standard
// base64. (The service seals the string under the master key in the
// User's record, so the store never sees it in the clear.)
package passhash

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"runtime"
	"strings"
	"sync"

	"golang.org/x/crypto/argon2"

	"github.com/ringkms/kms/internal/base"
)

const (
	argonTime    = 1
	argonMemory  = 64 * 1024 // KiB
	argonThreads = 2
	argonSaltLen = 16
	argonKeyLen  = 32
)

// argonSlots bounds the argon2id computations that run at once: each one
// takes 64 MiB and two cores, so a burst of logins queues instead of
// exhausting memory.
var argonSlots = make(chan struct{}, min(4, max(1, runtime.GOMAXPROCS(0)/2)))

// acquireArgon waits for a slot, or for ctx to end.
func acquireArgon(ctx context.Context) (release func(), err error) {
	select {
	case argonSlots <- struct{}{}:
		return func() { <-argonSlots }, nil
	case <-ctx.Done():
		return nil, base.InternalError("wait to hash a password", ctx.Err())
	}
}

// Hash returns the argon2id hash of pw in PHC format.
func Hash(ctx context.Context, pw string) (string, error) {
	release, err := acquireArgon(ctx)
	if err != nil {
		return "", err
	}
	defer release()
	salt := make([]byte, argonSaltLen)
	rand.Read(salt)
	key := argon2.IDKey([]byte(pw), salt, argonTime, argonMemory, argonThreads, argonKeyLen)
	defer clear(key)
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, argonMemory, argonTime, argonThreads,
		base64.RawStdEncoding.EncodeToString(salt), base64.RawStdEncoding.EncodeToString(key)), nil
}

// Verify reports whether pw matches the PHC hash encoded, comparing
// in constant time. A hash it cannot parse, or whose parameters are out of
// bounds, is an error.
func Verify(ctx context.Context, encoded, pw string) (bool, error) {
	h, err := parsePasswordHash(encoded)
	if err != nil {
		return false, err
	}
	release, err := acquireArgon(ctx)
	if err != nil {
		return false, err
	}
	defer release()
	key := argon2.IDKey([]byte(pw), h.salt, h.time, h.memory, h.threads, uint32(len(h.key)))
	defer clear(key)
	return subtle.ConstantTimeCompare(key, h.key) == 1, nil
}

type passwordHash struct {
	time, memory uint32
	threads      uint8
	salt, key    []byte
}

func parsePasswordHash(encoded string) (*passwordHash, error) {
	bad := base.Errorf(base.KindInternal, "stored password hash is malformed")
	parts := strings.Split(encoded, "$")
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" {
		return nil, bad
	}
	var version int
	if _, err := fmt.Sscanf(parts[2], "v=%d", &version); err != nil || version != argon2.Version {
		return nil, bad
	}
	var h passwordHash
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &h.memory, &h.time, &h.threads); err != nil {
		return nil, bad
	}
	// Bounds keep a damaged record from costing unbounded time or memory.
	if h.time < 1 || h.time > 16 || h.threads < 1 || h.threads > 16 || h.memory < 8*uint32(h.threads) || h.memory > 1<<20 {
		return nil, bad
	}
	var err error
	if h.salt, err = base64.RawStdEncoding.Strict().DecodeString(parts[4]); err != nil || len(h.salt) < 8 || len(h.salt) > 64 {
		return nil, bad
	}
	if h.key, err = base64.RawStdEncoding.Strict().DecodeString(parts[5]); err != nil || len(h.key) < 16 || len(h.key) > 64 {
		return nil, bad
	}
	return &h, nil
}

// Dummy is the hash a login verifies against when the user is missing or
// cannot log in, so that such an attempt costs the same time as a wrong
// password. Its password is random and thrown away; it is made once, at
// the first call.
var Dummy = sync.OnceValue(func() string {
	var pw [32]byte
	rand.Read(pw[:])
	h, err := Hash(context.Background(), base64.RawURLEncoding.EncodeToString(pw[:]))
	if err != nil {
		panic("passhash: hash the dummy password: " + err.Error()) // cannot happen with a background context
	}
	return h
})
