package kms

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"math/big"
	"runtime"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"golang.org/x/crypto/argon2"
)

// Password rules (SPEC.md section 8). A password must have at least
// PasswordMinLength characters, at least one upper-case letter, one
// lower-case letter, one digit and one special character (anything that
// is neither a letter nor a digit, a space included), and at most
// PasswordMaxLength bytes, which bounds the cost of hashing it.
const (
	PasswordMinLength    = 8
	PasswordMinUppercase = 1
	PasswordMinLowercase = 1
	PasswordMinNumber    = 1
	PasswordMinSpecial   = 1
	PasswordMaxLength    = 1024
)

// PasswordCheck is the outcome of CheckPassword, in the shape of SPEC.md
// section 2.12 (the "results" of a malformed-password error).
type PasswordCheck struct {
	IsValid bool                 `json:"isValid"`
	Details PasswordCheckDetails `json:"details"`
}

// PasswordCheckDetails gives, for each rule, the minimum and what the
// password has. Lengths count characters (Unicode code points).
type PasswordCheckDetails struct {
	MinLength              int `json:"minLength"`
	NewPasswordLength      int `json:"newPasswordLength"`
	MinUppercase           int `json:"minUppercase"`
	NewPasswordUppercase   int `json:"newPasswordUppercase"`
	MinLowercase           int `json:"minLowercase"`
	NewPasswordLowercase   int `json:"newPasswordLowercase"`
	MinSpecialChar         int `json:"minSpecialChar"`
	NewPasswordSpecialChar int `json:"newPasswordSpecialChar"`
	MinNumber              int `json:"minNumber"`
	NewPasswordNumber      int `json:"newPasswordNumber"`
}

// CheckPassword checks pw against the password rules. It is valid when it
// meets every minimum and is at most PasswordMaxLength bytes long (a limit
// the details do not show).
func CheckPassword(pw string) PasswordCheck {
	d := PasswordCheckDetails{
		MinLength:         PasswordMinLength,
		MinUppercase:      PasswordMinUppercase,
		MinLowercase:      PasswordMinLowercase,
		MinSpecialChar:    PasswordMinSpecial,
		MinNumber:         PasswordMinNumber,
		NewPasswordLength: utf8.RuneCountInString(pw),
	}
	for _, r := range pw {
		switch {
		case unicode.IsUpper(r):
			d.NewPasswordUppercase++
		case unicode.IsLower(r):
			d.NewPasswordLowercase++
		case unicode.IsDigit(r):
			d.NewPasswordNumber++
		case unicode.IsLetter(r):
			// a letter without case (CJK...): counts for the length only
		default:
			d.NewPasswordSpecialChar++
		}
	}
	ok := len(pw) <= PasswordMaxLength &&
		d.NewPasswordLength >= d.MinLength &&
		d.NewPasswordUppercase >= d.MinUppercase &&
		d.NewPasswordLowercase >= d.MinLowercase &&
		d.NewPasswordSpecialChar >= d.MinSpecialChar &&
		d.NewPasswordNumber >= d.MinNumber
	return PasswordCheck{IsValid: ok, Details: d}
}

// errMalformedPassword is the error of a password that breaks the rules:
// State "malformed-password", Details the PasswordCheck.
func errMalformedPassword(c PasswordCheck) error {
	msg := fmt.Sprintf("password does not meet the rules: at least %d characters (at most %d bytes), %d upper-case letter, %d lower-case letter, %d digit and %d special character",
		PasswordMinLength, PasswordMaxLength, PasswordMinUppercase, PasswordMinLowercase, PasswordMinNumber, PasswordMinSpecial)
	return &Error{Kind: KindInvalid, Message: msg, State: "malformed-password", Details: c}
}

// Password hashes. A hash is kept in the PHC string format, which names
// the algorithm, its version and its parameters, so that the parameters can
// change without breaking the hashes already stored:
//
//	$argon2id$v=19$m=65536,t=1,p=2$<salt>$<key>
//
// with salt (16 random bytes) and key (32 bytes) in unpadded standard
// base64. The string itself is sealed under the master key in the User's
// record (see userRecord), so the store never sees it in the clear.
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

func acquireArgon(ctx context.Context) (release func(), err error) {
	select {
	case argonSlots <- struct{}{}:
		return func() { <-argonSlots }, nil
	case <-ctx.Done():
		return nil, internalError("wait to hash a password", ctx.Err())
	}
}

// hashPassword returns the argon2id hash of pw in PHC format.
func hashPassword(ctx context.Context, pw string) (string, error) {
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

// verifyPassword reports whether pw matches the PHC hash encoded, comparing
// in constant time. A hash it cannot parse, or whose parameters are out of
// bounds, is an error.
func verifyPassword(ctx context.Context, encoded, pw string) (bool, error) {
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
	bad := Errorf(KindInternal, "stored password hash is malformed")
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

// dummyPasswordHash is the hash a login verifies against when the user is
// missing or cannot log in, so that such an attempt costs the same time as
// a wrong password. Its password is random and thrown away.
var dummyPasswordHash = sync.OnceValue(func() string {
	h, err := hashPassword(context.Background(), newSecret(""))
	if err != nil {
		panic("kms: hash the dummy password: " + err.Error()) // cannot happen with a background context
	}
	return h
})

// passwordAlphabet is what generated passwords are made of: letters,
// digits and specials that need no quoting in a shell, a URL or JSON.
const passwordAlphabet = "ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789" + "!#%+-=?@^_~"

// generatedPasswordLen is the length of generated passwords: about 150
// bits of entropy.
const generatedPasswordLen = 24

// generatePassword returns a random password that meets the rules.
func generatePassword() string {
	n := big.NewInt(int64(len(passwordAlphabet)))
	b := make([]byte, generatedPasswordLen)
	for {
		for i := range b {
			j, err := rand.Int(rand.Reader, n)
			if err != nil {
				panic("kms: crypto/rand: " + err.Error()) // crypto/rand does not fail
			}
			b[i] = passwordAlphabet[j.Int64()]
		}
		if pw := string(b); CheckPassword(pw).IsValid {
			return pw
		}
	}
}
