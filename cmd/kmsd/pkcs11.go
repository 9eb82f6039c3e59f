package main

import (
	"github.com/rs/zerolog"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/hsm"
)

// openTokenKey opens the AES-256 key of a PKCS#11 token that r's URI
// names, with the PIN from the URI's pin-source or KMS_PKCS11_PIN (never
// the command line). The token stays open until kmsd's command ends
// (c.close): a Service given a next key may need it again. Every failure
// is a usage error whose message names the problem: the URI, the PIN, the
// module, the token, the object, or a key that is not a sensitive,
// unextractable AES-256 key. A build without cgo says that it has no
// PKCS#11 support.
func (c *config) openTokenKey(r keyRole, getenv func(string) string, log *zerolog.Logger) (kms.RootKey, error) {
	u, err := hsm.ParseURI(r.pkcs11)
	if err != nil {
		return nil, usagef("%s: %v", r.pkcs11Flag, err)
	}
	pin, err := readPIN(u, getenv, log)
	if err != nil {
		return nil, usagef("%s %s: %v", r.pkcs11Flag, u, err)
	}
	tok, err := hsm.Open(u, pin)
	if err != nil {
		return nil, usagef("%s %s: %v", r.pkcs11Flag, u, err)
	}
	key, err := tok.AESKey(u)
	if err != nil {
		tok.Close()
		return nil, usagef("%s %s: %v", r.pkcs11Flag, u, err)
	}
	if c.tokens == nil {
		c.tokens = &tokenSet{}
	}
	c.tokens.open = append(c.tokens.open, tok)
	return key, nil
}

// tokenSet is the tokens a command of kmsd opened.
type tokenSet struct{ open []*hsm.Token }

// close lets go of what kmsd's command opened for its keys (token
// sessions), once it ends.
func (c *config) close() {
	if c.tokens == nil {
		return
	}
	for _, tok := range c.tokens.open {
		tok.Close()
	}
	c.tokens = nil
}
