package main

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"

	"github.com/rs/zerolog"

	"github.com/ringkms/kms/internal/hsm"
)

// The header signing key in a PKCS#11 token (-signing-key-pkcs11). kmsd
// opens the token and finds the key before it touches the data, and
// hands the key to the Service as a crypto.Signer (kms.Options.SigningKey):
// the library never loads a PKCS#11 module itself, and builds without cgo.

// tokenKey is the Ed25519 key pair of -signing-key-pkcs11 and the token
// it is on, open and logged in.
type tokenKey struct {
	tok *hsm.Token
	key *hsm.Ed25519Key
	uri hsm.URI
}

// openTokenKey opens the token that -signing-key-pkcs11 names, logs in
// with the PIN of the URI's pin-source or of KMS_PKCS11_PIN, and finds
// the key pair (hsm.Token.Ed25519Key checks it: an Ed25519 key, private
// half sensitive and not extractable, a probe signature that verifies).
// It answers nil without the flag. A failure is the operator's to fix (a
// wrong PIN, no such token or key, a key of another type, a build without
// PKCS#11 support): a usage error (exit status 2) that names it; only a
// token that fails in itself is another error.
func openTokenKey(c *config, getenv func(string) string, log *zerolog.Logger) (*tokenKey, error) {
	if c.signingKey == "" {
		return nil, nil
	}
	u, err := hsm.ParseURI(c.signingKey)
	if err != nil {
		return nil, tokenError(err)
	}
	pin, err := readPIN(u, getenv, log)
	if err != nil {
		return nil, tokenError(err)
	}
	tok, err := hsm.Open(u, pin)
	if err != nil {
		return nil, tokenError(err)
	}
	key, err := tok.Ed25519Key(u)
	if err != nil {
		tok.Close()
		return nil, tokenError(err)
	}
	return &tokenKey{tok: tok, key: key, uri: u}, nil
}

// storeURI is the URI the store records for the key: where it is,
// without where this process read the PIN from.
func (k *tokenKey) storeURI() string {
	u := k.uri
	u.PINFile = ""
	return u.String()
}

// close logs out of the token.
func (k *tokenKey) close() error {
	if k == nil {
		return nil
	}
	return k.tok.Close()
}

// tokenError is err, an answer of package hsm, as kmsd reports it.
func tokenError(err error) error {
	var e *hsm.Error
	if errors.As(err, &e) && e.Reason == hsm.ReasonDevice {
		return fmt.Errorf("-signing-key-pkcs11: %w", err)
	}
	return usageError{fmt.Errorf("-signing-key-pkcs11: %w", err)}
}

// maxNextKeyTries bounds the labels (and ids) rotate-signing-key tries
// for the next key before it gives up.
const maxNextKeyTries = 100

// generateNextKey makes the key pair that follows k in its token
// (nextKeyURI) and returns it with its URI. A label or id that the token
// has already (the key of a rotation that failed later, say) is skipped.
func generateNextKey(k *tokenKey) (*hsm.Ed25519Key, hsm.URI, error) {
	u := k.uri
	for range maxNextKeyTries {
		var err error
		if u, err = nextKeyURI(u); err != nil {
			return nil, u, usageError{err}
		}
		key, err := k.tok.GenerateEd25519(u.Object, u.ID)
		if errors.Is(err, hsm.ErrExists) {
			continue
		}
		if err != nil {
			return nil, u, tokenError(err)
		}
		return key, u, nil
	}
	return nil, u, fmt.Errorf("-signing-key-pkcs11: the next %d labels after %q are all taken on the token", maxNextKeyTries, k.uri.Object)
}

// numbered is a label that ends in -N.
var numbered = regexp.MustCompile(`^(.*)-([0-9]{1,9})$`)

// nextKeyURI is the URI of the key that follows the one u names:
//
//   - its label (object): u's with the number after its last "-" raised
//     by one, or "-2" appended when it has none (kms-signing,
//     kms-signing-2, kms-signing-3...); a URI that names its key by id
//     alone gives "kms-signing-" and the new id in hex;
//   - its id (CKA_ID), when u names one: u's plus one, read as a
//     big-endian number of the same length;
//   - the rest as u has it (token, module-path, pin-source), and no type.
func nextKeyURI(u hsm.URI) (hsm.URI, error) {
	next := u
	next.Type = ""
	if u.ID != nil {
		id := append([]byte(nil), u.ID...)
		i := len(id) - 1
		for ; i >= 0; i-- {
			id[i]++
			if id[i] != 0 {
				break
			}
		}
		if i < 0 {
			return u, fmt.Errorf("-signing-key-pkcs11: the id of the next key after id %x would not fit in %d bytes: name the key by object (its label)", u.ID, len(u.ID))
		}
		next.ID = id
	}
	switch m := numbered.FindStringSubmatch(u.Object); {
	case u.Object == "":
		next.Object = fmt.Sprintf("kms-signing-%x", next.ID)
	case m != nil:
		n, _ := strconv.Atoi(m[2])
		next.Object = m[1] + "-" + strconv.Itoa(n+1)
	default:
		next.Object = u.Object + "-2"
	}
	return next, nil
}
