package hsm_test

import (
	"crypto"
	"errors"
	"testing"

	"github.com/ringkms/kms/internal/hsm"
)

// The API is the same with and without cgo: this file compiles in both
// builds (CGO_ENABLED=0 go vet compiles it too).
var (
	_ func(hsm.URI, string) (*hsm.Token, error)                 = hsm.Open
	_ func(string) (hsm.URI, error)                             = hsm.ParseURI
	_ func(hsm.URI, string) (string, error)                     = hsm.URI.ReadPIN
	_ func(*hsm.Token, hsm.URI) (*hsm.AESKey, error)            = (*hsm.Token).AESKey
	_ func(*hsm.Token, hsm.URI) (*hsm.Ed25519Key, error)        = (*hsm.Token).Ed25519Key
	_ func(*hsm.Token, string, []byte) (*hsm.Ed25519Key, error) = (*hsm.Token).GenerateEd25519
	_ func(*hsm.Token) error                                    = (*hsm.Token).Close
	_ func(*hsm.AESKey, []byte, []byte) ([]byte, error)         = (*hsm.AESKey).Seal
	_ func(*hsm.AESKey, []byte, []byte) ([]byte, error)         = (*hsm.AESKey).Open
	_ crypto.Signer                                             = (*hsm.Ed25519Key)(nil)
	_ interface{ String() string }                              = (*hsm.Token)(nil)
	_                                                           = hsm.SealOverhead
	_ error                                                     = hsm.ErrNoSupport
)

func TestErrorIs(t *testing.T) {
	err := &hsm.Error{Reason: hsm.ReasonPINIncorrect, Msg: `wrong PIN for token "kms"`}
	if !errors.Is(err, hsm.ErrPINIncorrect) || errors.Is(err, hsm.ErrPINLocked) {
		t.Errorf("errors.Is(%v) matches the wrong sentinel", err)
	}
	if errors.Is(hsm.ErrPINIncorrect, err) {
		t.Errorf("a sentinel Is an error that is not one")
	}
	var e *hsm.Error
	if !errors.As(errors.Join(errors.New("x"), err), &e) || e.Reason != hsm.ReasonPINIncorrect {
		t.Errorf("errors.As() = %v", e)
	}
	if got := err.Error(); got != `hsm: wrong PIN for token "kms"` {
		t.Errorf("Error() = %q", got)
	}
}
