package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/rs/zerolog"

	"github.com/ringkms/kms"
)

// rekey is kmsd rekey: it moves the store from the master key kmsd reads
// as the server does (the old one) to the new one (KMS_NEW_MASTER_KEY,
// -new-master-key-file or -new-master-key-pkcs11). It runs while kmsd
// serves (docs/OPERATIONS.md section 2, "Rotating the master key"): on
// PostgreSQL beside the nodes, which go on under the new key when they
// were started with it as their next key (the others stop writing); on the
// embedded store, when a kmsd has it open, by asking that kmsd, through
// its admin socket, to rekey to the next master key it was started with.
// With kmsd stopped, it rekeys the embedded store itself. -dev's generated
// key cannot be the old one: the new one would have to replace it in the
// data directory, and a crash between the two would lose it.
func rekey(ctx context.Context, c *config, getenv func(string) string, stdout io.Writer, log *zerolog.Logger) error {
	if c.dev && getenv("KMS_MASTER_KEY") == "" && c.masterKeyFile == "" && c.masterKeyPKCS11 == "" {
		return usageError{errors.New("rekey: -dev's generated master key cannot be rotated; start with a master key of your own (KMS_MASTER_KEY, -master-key-file or -master-key-pkcs11)")}
	}
	var adminErr error
	if !c.postgres() {
		var sock string
		if sock, adminErr = dialAdmin(c.data); adminErr == nil {
			res, err := rekeyOnline(ctx, sock)
			if err != nil {
				return fmt.Errorf("rekey: %w", err)
			}
			log.Info().Str("socket", sock).Msg("rekeyed by the running kmsd")
			fmt.Fprintf(stdout, "master key rotated by the running kmsd, to the next master key it was started with: %s\n"+
				"the old key opens nothing in this store any more; give kmsd the new key as its master key at its next start\n", res)
			return nil
		}
	}
	newKey, err := loadNewMasterKey(c, getenv, log)
	if err != nil {
		return err
	}
	st, old, err := openExistingStore(ctx, c, getenv, log, false)
	if err != nil {
		return storeInUse(c, err, adminErr)
	}
	defer st.Close()
	res, err := kms.Rekey(ctx, st, old, newKey)
	old, newKey = nil, nil
	if err != nil {
		if kms.ErrorKind(err) == kms.KindInternal {
			return fmt.Errorf("rekey: %w", err) // an operator's command: the cause, in full
		}
		return fmt.Errorf("rekey: %s", kms.ErrorMessage(err))
	}
	log.Info().Int("signingKeys", res.SigningKeys).Int("asymRings", res.AsymRings).Int("splitRings", res.SplitRings).Int("users", res.Users).Msg("master key rotated")
	fmt.Fprintf(stdout, "master key rotated: %s\n"+
		"the old key opens nothing in this store any more; nodes started with the new key as their next key go on under it, the others stop writing until restarted with it\n", rekeySummary(res))
	return nil
}

// rekeySummary says what a rekey resealed.
func rekeySummary(res *kms.RekeyResult) string {
	return fmt.Sprintf("%d signing keys, %d /asym ring keys, %d split ring share secrets and %d password hashes sealed under the new key",
		res.SigningKeys, res.AsymRings, res.SplitRings, res.Users)
}

// loadNewMasterKey reads the new master key of kmsd rekey.
func loadNewMasterKey(c *config, getenv func(string) string, log *zerolog.Logger) (kms.RootKey, error) {
	r := c.newKeyRole()
	if r.pkcs11 == "" {
		r.pkcs11 = getenv("KMS_NEW_MASTER_KEY_PKCS11")
	}
	k, err := r.load(c, getenv, log)
	if err == nil && k == nil {
		err = usagef("rekey needs the new master key: KMS_NEW_MASTER_KEY, -new-master-key-file or -new-master-key-pkcs11 (KMS_NEW_MASTER_KEY_PKCS11)")
	}
	return k, err
}
