package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"

	"github.com/rs/zerolog"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/store/badgerstore"
	"github.com/ringkms/kms/store/pgstore"
)

// Migration batches: keys are copied in transactions of at most
// migrateKeys keys or migrateBytes bytes, trail records in appends of at
// most migrateRecords records or migrateBytes bytes.
const (
	migrateKeys    = 1000
	migrateRecords = 1000
	migrateBytes   = 4 << 20
)

// migrate is kmsd migrate: it copies the embedded store in -from (c.data)
// and its trail into the empty PostgreSQL database of -to, then verifies
// the activity chain there. Everything the store holds is copied as it is
// (sealed secrets stay sealed under the same master key), so hashes,
// headers and cursors issued before stay valid.
func migrate(ctx context.Context, c *config, getenv func(string) string, stdout io.Writer, log *zerolog.Logger) error {
	if c.migrateTo == "" || !(&config{store: c.migrateTo}).postgres() {
		return usagef("migrate: -to must be a postgres:// or postgresql:// URL (see kmsd migrate -h)")
	}
	if fi, err := os.Stat(c.data); err != nil || !fi.IsDir() || !hasStore(c.data) {
		return fmt.Errorf("migrate: no store in %s", c.data)
	}
	mk, err := loadMasterKey(c, getenv, false, log)
	if err != nil {
		return err
	}
	src, err := badgerstore.OpenWith(badgerstore.DefaultOptions(c.data), badgerstore.Options{DiskReserve: -1})
	if err != nil {
		if kms.ErrorKind(err) == kms.KindConflict {
			return fmt.Errorf("migrate: the store in %s is in use by another process (stop kmsd first)", c.data)
		}
		return fmt.Errorf("migrate: open store in %s: %w", c.data, err)
	}
	defer src.Close()
	dst, err := pgstore.Open(ctx, c.migrateTo, pgstore.Options{Exclusive: true, QueryTimeout: c.storeTimeout})
	if err != nil {
		return fmt.Errorf("migrate: open the PostgreSQL store: %w", err)
	}
	defer dst.Close()
	if err := mustBeEmpty(ctx, dst); err != nil {
		return err
	}

	keys, err := copyKeys(ctx, src, dst)
	if err != nil {
		return fmt.Errorf("migrate: copied %d keys, then: %w", keys, err)
	}
	recs, err := copyTrail(src.Trail(), dst.Trail())
	if err != nil {
		return fmt.Errorf("migrate: copied %d keys and %d trail records, then: %w", keys, recs, err)
	}
	fmt.Fprintf(stdout, "copied %d keys and %d activity records from %s to %s\n", keys, recs, c.data, (&config{store: c.migrateTo}).storeName())

	res, err := kms.VerifyAudit(ctx, dst, mk)
	if kms.ErrorKind(err) == kms.KindUnprocessable {
		fmt.Fprintf(stdout, "activity chain BROKEN: %s\nrecords verified before the damage: %d\n", kms.ErrorMessage(err), res.Records)
		return exitError{3, fmt.Errorf("migrate: the copied activity chain is broken: %s", kms.ErrorMessage(err))}
	}
	if err != nil {
		return fmt.Errorf("migrate: verify the copied activity chain: %w", err)
	}
	fmt.Fprintf(stdout, "activity chain intact\nrecords checked: %d\nhead digest: %s\n", res.Records, res.Head)
	return nil
}

// mustBeEmpty refuses a database that holds any key or trail record.
func mustBeEmpty(ctx context.Context, st kms.Store) error {
	found := false
	err := st.View(ctx, func(tx kms.Txn) error {
		return tx.Scan(kms.ScanOptions{KeysOnly: true}, func(k, _ []byte) (bool, error) {
			found = true
			return false, nil
		})
	})
	if err != nil {
		return fmt.Errorf("migrate: read the PostgreSQL store: %w", err)
	}
	if found || st.Trail().Len() > 0 {
		return fmt.Errorf("migrate: the PostgreSQL database already holds a store; migrate into an empty one (nothing was written)")
	}
	return nil
}

// copyKeys copies every key of src into dst and returns how many.
func copyKeys(ctx context.Context, src, dst kms.Store) (int, error) {
	type kv struct{ k, v []byte }
	var batch []kv
	size, n := 0, 0
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := dst.Update(ctx, func(tx kms.Txn) error {
			for _, e := range batch {
				if err := tx.Set(e.k, e.v); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		n += len(batch)
		batch, size = batch[:0], 0
		return nil
	}
	err := src.View(ctx, func(tx kms.Txn) error {
		return tx.Scan(kms.ScanOptions{}, func(k, v []byte) (bool, error) {
			batch = append(batch, kv{bytes.Clone(k), bytes.Clone(v)})
			if size += len(k) + len(v); len(batch) >= migrateKeys || size >= migrateBytes {
				return true, flush()
			}
			return true, nil
		})
	})
	if err == nil {
		err = flush()
	}
	return n, err
}

// copyTrail appends every record of src to dst and returns how many.
func copyTrail(src, dst kms.Trail) (uint64, error) {
	var batch [][]byte
	size := 0
	var n uint64
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if err := dst.Append(batch); err != nil {
			return err
		}
		n += uint64(len(batch))
		batch, size = batch[:0], 0
		return nil
	}
	err := src.Scan(1, func(_ uint64, rec []byte) (bool, error) {
		batch = append(batch, bytes.Clone(rec))
		if size += len(rec); len(batch) >= migrateRecords || size >= migrateBytes {
			return true, flush()
		}
		return true, nil
	})
	if err == nil {
		err = flush()
	}
	if err == nil && dst.Len() != src.Len() {
		err = fmt.Errorf("the copied trail has %d records, the source %d", dst.Len(), src.Len())
	}
	return n, err
}
