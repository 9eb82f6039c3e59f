package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

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
//
// A key that the path taken does not use is refused (unusedKeys), never
// ignored: on the online path the running kmsd's keys are the ones used.
// A rekey to the key the store is under, or back to one it has left, is
// refused by the domain (kms.Rekey), the store unchanged.
func rekey(ctx context.Context, c *config, getenv func(string) string, stdout io.Writer, log *zerolog.Logger) error {
	if c.dev && getenv("KMS_MASTER_KEY") == "" && c.masterKeyFile == "" && c.masterKeyPKCS11 == "" {
		return usageError{errors.New("rekey: -dev's generated master key cannot be rotated; start with a master key of your own (KMS_MASTER_KEY, -master-key-file or -master-key-pkcs11)")}
	}
	var adminErr error
	if !c.postgres() {
		var sock string
		if sock, adminErr = dialAdmin(c.data); adminErr == nil {
			if err := unusedKeys(c, getenv, true); err != nil {
				return err
			}
			res, err := rekeyOnline(ctx, sock)
			if err != nil {
				return fmt.Errorf("rekey: %w", err)
			}
			log.Info().Str("socket", sock).Msg("rekeyed by the running kmsd")
			fmt.Fprintf(stdout, "master key rotated by the running kmsd, to the next master key it was started with: %s\n"+
				"the old key opens no secret of this store any more; give kmsd the new key as its master key at its next start\n", res)
			return nil
		}
	}
	if err := unusedKeys(c, getenv, false); err != nil {
		return err
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
		return fmt.Errorf("rekey: %s", strings.TrimPrefix(kms.ErrorMessage(err), "rekey: "))
	}
	log.Info().Int("signingKeys", res.SigningKeys).Int("asymRings", res.AsymRings).Int("splitRings", res.SplitRings).Int("users", res.Users).Int("apiKeys", res.APIKeys).Msg("master key rotated")
	fmt.Fprintf(stdout, "master key rotated: %s\n"+
		"the old key opens no secret of this store any more; nodes started with the new key as their next key go on under it, the others stop writing until restarted with it\n", rekeySummary(res))
	return nil
}

// unusedKeys refuses, as a usage error naming it, a key that kmsd rekey
// is given and would not use: on the online path (a kmsd runs on the
// embedded store), any, since the running kmsd rekeys with its own keys
// (from its master key to the next one it was started with); on the
// other, the next master key of the server, which is not the new key of
// rekey. The master keys in the environment are the server's own, which
// kmsd rekey may share with it: only those on the command line count,
// and the variables of rekey's own new key.
func unusedKeys(c *config, getenv func(string) string, online bool) error {
	if !online {
		for _, f := range []string{"master-key-next-file", "master-key-next-pkcs11"} {
			if c.given[f] {
				return usagef("rekey: -%s is the next master key of a running kmsd, which kmsd rekey does not use: "+
					"give the key to rekey to as KMS_NEW_MASTER_KEY, -new-master-key-file or -new-master-key-pkcs11", f)
			}
		}
		return nil
	}
	var named []string
	for _, f := range []string{"new-master-key-file", "new-master-key-pkcs11"} {
		if c.given[f] {
			named = append(named, "-"+f)
		}
	}
	for _, v := range []string{"KMS_NEW_MASTER_KEY", "KMS_NEW_MASTER_KEY_PKCS11"} {
		if getenv(v) != "" {
			named = append(named, v)
		}
	}
	if len(named) > 0 {
		verb := "names a new master key, which is"
		if len(named) > 1 {
			verb = "name a new master key, which are"
		}
		return usagef("rekey: %s %s not used here: a kmsd runs on %s, and it rekeys its store to the next master key "+
			"it was started with, whatever key is named here. Drop %s to rekey to that kmsd's next key; or stop that kmsd, and rekey its store to the key named here",
			strings.Join(named, " and "), verb, c.data, strings.Join(named, " and "))
	}
	for _, f := range []string{"master-key-file", "master-key-pkcs11", "master-key-next-file", "master-key-next-pkcs11"} {
		if c.given[f] {
			return usagef("rekey: -%s is not used here: a kmsd runs on %s, and it rekeys its store with its own keys, "+
				"from its master key to the next master key it was started with; drop -%s", f, c.data, f)
		}
	}
	return nil
}

// rekeySummary says what a rekey resealed.
func rekeySummary(res *kms.RekeyResult) string {
	return fmt.Sprintf("%d signing keys, %d /asym ring keys, %d split ring share secrets, %d password hashes and %d API key secrets sealed under the new key",
		res.SigningKeys, res.AsymRings, res.SplitRings, res.Users, res.APIKeys)
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
