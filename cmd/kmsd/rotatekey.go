package main

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"io"

	"github.com/rs/zerolog"

	"github.com/ringkms/kms"
)

// rotateSigningKey is kmsd rotate-signing-key: it makes a new header
// signing key in the store of -store (the data directory by default) and
// makes it the one that signs new headers, recording the rotation in the
// activity trail. The keys before it stay published. The embedded store
// opens in one process at a time, so kmsd must be stopped; a PostgreSQL
// store's nodes keep running and sign with the new key within a second.
//
// With -signing-key-pkcs11, the new key is a key pair made in the token
// of the key the URI names (nextKeyURI says how it is named), and the
// store records its public key; kmsd prints its URI, which the nodes are
// restarted with. Until then they sign with the key before.
func rotateSigningKey(ctx context.Context, c *config, getenv func(string) string, stdout io.Writer, log *zerolog.Logger) error {
	tk, err := openTokenKey(c, getenv, log) // before the store: a token that does not open leaves the store alone
	if err != nil {
		return err
	}
	defer tk.close()
	st, mk, err := openExistingStore(ctx, c, getenv, log, false)
	if err != nil {
		return err
	}
	defer st.Close()
	if tk == nil {
		k, err := kms.RotateStoreSigningKey(ctx, st, mk)
		mk = nil
		if err != nil {
			return fmt.Errorf("rotate the signing key: %s", kms.ErrorMessage(err))
		}
		log.Info().Str("signingKeyId", k.ID).Msg("header signing key rotated")
		fmt.Fprintf(stdout, "header signing key rotated\nnew key ID: %s\npublic key: %s\n", k.ID, k.PublicKey)
		return nil
	}

	var made bool
	var nextURI string
	k, err := kms.RotateStoreSigningKeyTo(ctx, st, mk, func() (crypto.Signer, string, error) {
		key, u, err := generateNextKey(tk)
		if err != nil {
			return nil, "", err
		}
		made, nextURI = true, u.String()
		u.PINFile = ""
		return key, u.String(), nil
	})
	mk = nil
	if err != nil {
		var ue usageError
		if errors.As(err, &ue) || kms.AsError(err) == nil {
			return err // the token's answer, as generateNextKey reports it
		}
		msg := fmt.Sprintf("rotate the signing key: %s", kms.ErrorMessage(err))
		if made {
			msg += fmt.Sprintf("; the key pair made for it stays in the token, unused (%s)", nextURI)
		}
		return errors.New(msg)
	}
	log.Info().Str("signingKeyId", k.ID).Str("uri", nextURI).Msg("header signing key rotated to a new key pair in the PKCS#11 token")
	fmt.Fprintf(stdout, "header signing key rotated to a new key pair in the token\nnew key ID: %s\npublic key: %s\nnew key URI: %s\n", k.ID, k.PublicKey, nextURI)
	fmt.Fprintf(stdout, "  restart every node with -signing-key-pkcs11 (KMS_SIGNING_KEY_PKCS11) set to the new key URI;\n"+
		"  until then they sign with the key before, which stays published, as the headers it signed stay valid.\n")
	return nil
}
