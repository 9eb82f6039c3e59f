package main

import (
	"context"
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
func rotateSigningKey(ctx context.Context, c *config, getenv func(string) string, stdout io.Writer, log *zerolog.Logger) error {
	st, mk, err := openExistingStore(ctx, c, getenv, log, false)
	if err != nil {
		return err
	}
	defer st.Close()
	k, err := kms.RotateStoreSigningKey(ctx, st, mk)
	mk = nil
	if err != nil {
		return fmt.Errorf("rotate the signing key: %s", kms.ErrorMessage(err))
	}
	log.Info().Str("signingKeyId", k.ID).Msg("header signing key rotated")
	fmt.Fprintf(stdout, "header signing key rotated\nnew key ID: %s\npublic key: %s\n", k.ID, k.PublicKey)
	return nil
}
