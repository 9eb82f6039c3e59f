package kms

import (
	"crypto/rand"
	"fmt"
	"math/big"
	"unicode"
	"unicode/utf8"

	"github.com/ringkms/kms/internal/commonpass"
)

// Password rules, as NIST SP 800-63B sets them for passwords that people
// choose: a minimum length, a refusal of the passwords that guessing
// tries first, and no rule on the kinds of characters (no required
// upper-case letter, digit or special character: such rules make
// passwords harder to remember, not to guess, and a long passphrase of
// lower-case words is a good password). A password must have at least
// PasswordMinLength characters and at most PasswordMaxLength bytes (which
// bounds the cost of hashing it), and must not be one of the most common
// passwords (internal/commonpass's list, in any letter case) nor one
// character repeated. The minimums of each kind of character are zero;
// they remain, with the counts, in PasswordCheckDetails, whose shape
// clients read.
const (
	PasswordMinLength    = 8
	PasswordMinUppercase = 0
	PasswordMinLowercase = 0
	PasswordMinNumber    = 0
	PasswordMinSpecial   = 0
	PasswordMaxLength    = 1024
)

// PasswordCheck is the outcome of CheckPassword (the "results" of a
// malformed-password error).
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
	// Common is true for a password that guessing tries first (a common
	// password, or one character repeated), which is refused.
	Common bool `json:"commonPassword"`
}

// CheckPassword checks pw against the password rules. It is valid when it
// meets every minimum, is not Common, and is at most PasswordMaxLength
// bytes long (a limit the details do not show).
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
	if len(pw) <= PasswordMaxLength {
		d.Common = commonpass.Contains(pw)
	}
	ok := len(pw) <= PasswordMaxLength &&
		d.NewPasswordLength >= d.MinLength &&
		d.NewPasswordUppercase >= d.MinUppercase &&
		d.NewPasswordLowercase >= d.MinLowercase &&
		d.NewPasswordSpecialChar >= d.MinSpecialChar &&
		d.NewPasswordNumber >= d.MinNumber &&
		!d.Common
	return PasswordCheck{IsValid: ok, Details: d}
}

// Reason says why the password of c breaks the rules, for a person to
// read; "" when it is valid.
func (c PasswordCheck) Reason() string {
	d := c.Details
	switch {
	case c.IsValid:
		return ""
	case d.NewPasswordLength < d.MinLength:
		return fmt.Sprintf("the password has %d characters: it needs at least %d", d.NewPasswordLength, d.MinLength)
	case d.Common:
		return "the password is one that guessing tries first (a common password, or one character repeated): choose another; a few words of your own make a good one"
	}
	return fmt.Sprintf("the password is too long: at most %d bytes", PasswordMaxLength)
}

// errMalformedPassword is the error of a password that breaks the rules:
// State "malformed-password", Details the PasswordCheck.
func errMalformedPassword(c PasswordCheck) error {
	msg := fmt.Sprintf("password does not meet the rules (at least %d characters, at most %d bytes, not a common password): %s",
		PasswordMinLength, PasswordMaxLength, c.Reason())
	return &Error{Kind: KindInvalid, Message: msg, State: "malformed-password", Details: c}
}

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
