package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/rs/zerolog"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/store/pgstore"
)

// verifyAudit is kmsd verify-audit: it checks the activity trail's hash
// chain in the store of -store (the data directory by default) and prints
// what it found. With kmsd running on the embedded store, the running
// kmsd checks it, with its master key (asked on its admin socket); else
// verify-audit opens the store itself. A broken chain is an exitError of
// status 3.
func verifyAudit(ctx context.Context, c *config, getenv func(string) string, stdout io.Writer, log *zerolog.Logger) error {
	var adminErr error
	if !c.postgres() {
		var sock string
		if sock, adminErr = dialAdmin(c.data); adminErr == nil {
			ans, err := verifyOnline(ctx, sock)
			if err != nil {
				return fmt.Errorf("verify activity chain: %w", err)
			}
			log.Debug().Str("socket", sock).Msg("verified by the running kmsd")
			return reportChain(stdout, kms.VerifyChainResult{Records: ans.Records, Head: ans.Head}, ans.Broken)
		}
	}
	st, mk, err := openExistingStore(ctx, c, getenv, log, false)
	if err != nil {
		return storeInUse(c, err, adminErr)
	}
	defer st.Close()
	res, err := kms.VerifyAudit(ctx, st, mk)
	mk = nil
	switch kms.ErrorKind(err) {
	case kms.KindUnprocessable:
		return reportChain(stdout, res, kms.ErrorMessage(err))
	case kms.KindUnauthenticated:
		return fmt.Errorf("verify activity chain: %s", kms.ErrorMessage(err))
	}
	if err != nil {
		return fmt.Errorf("verify activity chain: %w", err)
	}
	return reportChain(stdout, res, "")
}

// reportChain prints the outcome of a check of the chain: intact, or
// broken as broken says (an exitError of status 3).
func reportChain(stdout io.Writer, res kms.VerifyChainResult, broken string) error {
	if broken != "" {
		fmt.Fprintf(stdout, "activity chain BROKEN: %s\n", broken)
		fmt.Fprintf(stdout, "records verified before the damage: %d\n", res.Records)
		return exitError{3, fmt.Errorf("activity chain broken: %s", broken)}
	}
	fmt.Fprintf(stdout, "activity chain intact\nrecords checked: %d\nhead digest: %s\n", res.Records, res.Head)
	return nil
}

// openExistingStore opens, for a subcommand, the store of -store (the
// data directory by default), which must exist, and reads the master key
// as the server does. With exclusive, a PostgreSQL store is opened only
// when no other process (a kmsd node) has it open, and none can open it
// meanwhile. The caller closes the store and clears the key.
func openExistingStore(ctx context.Context, c *config, getenv func(string) string, log *zerolog.Logger, exclusive bool) (kms.Store, kms.RootKey, error) {
	if !c.postgres() {
		if fi, err := os.Stat(c.data); err != nil {
			return nil, nil, fmt.Errorf("data directory: %w", err)
		} else if !fi.IsDir() {
			return nil, nil, fmt.Errorf("data directory %s is not a directory", c.data)
		}
		if !hasStore(c.data) {
			return nil, nil, fmt.Errorf("no store in %s", c.data)
		}
	}
	mk, err := loadMasterKey(c, getenv, false, log)
	if err != nil {
		return nil, nil, err
	}
	st, err := openStore(ctx, c, pgstore.Options{Existing: true, Exclusive: exclusive})
	if err != nil {
		return nil, nil, err
	}
	return st, mk, nil
}
