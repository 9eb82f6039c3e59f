package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/rs/zerolog"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/store/badgerstore"
)

// verifyAudit is kmsd verify-audit: it checks the activity trail's hash
// chain in the data directory and prints what it found. A broken chain is
// an exitError of status 3.
func verifyAudit(ctx context.Context, c *config, getenv func(string) string, stdout io.Writer, log *zerolog.Logger) error {
	if fi, err := os.Stat(c.data); err != nil {
		return fmt.Errorf("data directory: %w", err)
	} else if !fi.IsDir() {
		return fmt.Errorf("data directory %s is not a directory", c.data)
	}
	if !hasStore(c.data) {
		return fmt.Errorf("no store in %s", c.data)
	}
	mk, err := loadMasterKey(c, getenv, false, log)
	if err != nil {
		return err
	}
	st, err := badgerstore.OpenDir(c.data)
	if err != nil {
		return fmt.Errorf("open store in %s (stop kmsd first: one process at a time may open it): %w", c.data, err)
	}
	defer st.Close()
	var res kms.VerifyChainResult
	svc, err := kms.New(st, kms.Options{MasterKey: mk})
	if err == nil {
		defer svc.Close()
		res, err = svc.VerifyActivityChain(ctx)
	} else if kms.ErrorKind(err) != kms.KindUnprocessable {
		return fmt.Errorf("open service (is the master key the one this store was created with?): %w", err)
	}
	// Unprocessable, from New or from the walk: the trail is damaged.
	if kms.ErrorKind(err) == kms.KindUnprocessable {
		fmt.Fprintf(stdout, "activity chain BROKEN: %v\n", err)
		fmt.Fprintf(stdout, "records checked before the break: %d\n", res.Records)
		return exitError{3, fmt.Errorf("activity chain broken: %w", err)}
	}
	if err != nil {
		return fmt.Errorf("verify activity chain: %w", err)
	}
	fmt.Fprintf(stdout, "activity chain intact\nrecords checked: %d\nhead digest: %s\n", res.Records, res.Head)
	return nil
}
