package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/rs/zerolog"

	"github.com/ringkms/kms"
)

// rekey is kmsd rekey: it moves every sealed secret of the store from the
// master key kmsd reads as the server does (the old one) to the one in
// -new-master-key-file or KMS_NEW_MASTER_KEY. kmsd must be stopped (every
// node, with PostgreSQL). -dev's generated key cannot be the old one: the
// new one would have to replace it in the data directory, and a crash
// between the two would lose it.
func rekey(ctx context.Context, c *config, getenv func(string) string, stdout io.Writer, log *zerolog.Logger) error {
	if c.dev && getenv("KMS_MASTER_KEY") == "" && c.masterKeyFile == "" {
		return usageError{errors.New("rekey: -dev's generated master key cannot be rotated; start with a master key of your own (KMS_MASTER_KEY or -master-key-file)")}
	}
	newKey, err := loadNewMasterKey(c, getenv, log)
	if err != nil {
		return err
	}
	st, old, err := openExistingStore(ctx, c, getenv, log, true)
	if err != nil {
		return err
	}
	defer st.Close()
	res, err := kms.Rekey(ctx, st, old, newKey)
	old, newKey = kms.MasterKey{}, kms.MasterKey{}
	if err != nil {
		return fmt.Errorf("rekey: %s", kms.ErrorMessage(err))
	}
	log.Info().Int("signingKeys", res.SigningKeys).Int("asymRings", res.AsymRings).Int("splitRings", res.SplitRings).Int("users", res.Users).Msg("master key rotated")
	fmt.Fprintf(stdout, "master key rotated: %d signing keys, %d /asym ring keys, %d split ring share secrets and %d password hashes sealed under the new key\n"+
		"start kmsd with the new master key; the old one opens nothing in this store any more\n", res.SigningKeys, res.AsymRings, res.SplitRings, res.Users)
	return nil
}

// loadNewMasterKey reads the new master key of kmsd rekey.
func loadNewMasterKey(c *config, getenv func(string) string, log *zerolog.Logger) (kms.MasterKey, error) {
	env := getenv("KMS_NEW_MASTER_KEY")
	switch {
	case env != "" && c.newMasterKeyFile != "":
		return kms.MasterKey{}, usagef("both KMS_NEW_MASTER_KEY and -new-master-key-file are set: give the new master key one way only")
	case env != "":
		k, err := kms.ParseMasterKey(env)
		if err != nil {
			return kms.MasterKey{}, usagef("KMS_NEW_MASTER_KEY: %v; it must be the base64 of 32 random bytes (head -c 32 /dev/urandom | base64)", err)
		}
		return k, nil
	case c.newMasterKeyFile != "":
		return readKeyFile(c.newMasterKeyFile, log)
	}
	return kms.MasterKey{}, usagef("rekey needs the new master key: KMS_NEW_MASTER_KEY or -new-master-key-file")
}
