package kms

import (
	"crypto/rand"
	"fmt"
	"math/big"
	"unicode"
	"unicode/utf8"
)

// Password rules. A password must have at least
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

// PasswordCheck is the outcome of CheckPassword, in the shape of the
// "results" of a malformed-password error (docs/openapi.json).
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
