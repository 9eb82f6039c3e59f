package keytype

import (
	"errors"
	"fmt"
	"strings"
)

// The errors of the package. Every error it returns wraps one of these,
// for errors.Is; the message after it says what was wrong, never with key
// material or the operation's input.
var (
	// ErrWrongType: the key's type does not do the operation (encrypting
	// with an ed25519 key, signing with an aes256-gcm96 key, exporting a
	// signing key of an AEAD key...).
	ErrWrongType = errors.New("keytype: operation not supported by the key type")
	// ErrParameter: a parameter is unknown, out of range, or does not
	// apply (a hash algorithm, a salt length, an HMAC key size...).
	ErrParameter = errors.New("keytype: invalid parameter")
	// ErrInput: the input is malformed (a ciphertext too short or that
	// fails authentication, a prehashed input of the wrong length, a
	// signature that does not decode).
	ErrInput = errors.New("keytype: malformed input")
	// ErrMaterial: stored material does not load under its Spec. It is
	// the caller's storage that is wrong, not the request.
	ErrMaterial = errors.New("keytype: key material does not match its type")
)

// errorf wraps kind with a message.
func errorf(kind error, format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{kind}, args...)...)
}

// quoted quotes a caller's parameter value for an error, cut short: a
// parameter is not secret, but an error is no place for a long string.
func quoted(s string) string {
	const max = 32
	if len(s) > max {
		s = s[:max] + "..."
	}
	return fmt.Sprintf("%q", s)
}

// names lists accepted values for an error message.
func names[S ~string](vs []S) string {
	b := make([]string, len(vs))
	for i, v := range vs {
		b[i] = string(v)
	}
	return strings.Join(b, ", ")
}

// Message is what err says past the package's kind (ErrInput...): the
// text for the caller of a service, to whom the package's name means
// nothing. An error of another origin is said whole.
func Message(err error) string {
	text := err.Error()
	for _, kind := range []error{ErrWrongType, ErrParameter, ErrInput, ErrMaterial} {
		if rest, ok := strings.CutPrefix(text, kind.Error()+": "); ok && errors.Is(err, kind) {
			return rest
		}
	}
	return text
}
