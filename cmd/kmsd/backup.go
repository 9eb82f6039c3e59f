package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/store/badgerstore"
)

// backup is kmsd backup: a consistent backup of the embedded store and
// its trail, from the kmsd running on it (online) or from the store
// itself (no kmsd running), to -o FILE or standard output. What it wrote
// is checked as restore would check it before it reports success; a
// file is written under a temporary name and renamed only then.
func backup(ctx context.Context, c *config, getenv func(string) string, stdout io.Writer, log *zerolog.Logger) error {
	if c.postgres() {
		return errors.New("backup: a PostgreSQL store is backed up with pg_dump or the database's point-in-time recovery (docs/OPERATIONS.md section 13, \"The PostgreSQL store\": Backups)")
	}
	out, commit, abort, err := backupOutput(c.backupOut, stdout)
	if err != nil {
		return err
	}
	defer abort()
	pr, pw := io.Pipe()
	checked := make(chan error, 1)
	var info *kms.BackupInfo
	go func() {
		var err error
		info, err = kms.CheckBackup(ctx, io.TeeReader(pr, out))
		pr.CloseWithError(err) // unblocks the writer on a bad backup
		checked <- err
	}()
	mode, err := writeBackup(ctx, c, getenv, pw, log)
	pw.CloseWithError(err)
	cerr := <-checked
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if cerr != nil {
		return fmt.Errorf("backup: %s", kms.ErrorMessage(cerr))
	}
	if err := commit(); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	msg := fmt.Sprintf("backup (%s) of %d store entries and %d activity records", mode, info.Entries, info.Records)
	if c.backupOut != "" && c.backupOut != "-" {
		fmt.Fprintf(stdout, "%s written to %s\n", msg, c.backupOut)
	}
	log.Info().Str("mode", mode).Uint64("entries", info.Entries).Uint64("records", info.Records).Msg("backup written")
	return nil
}

// writeBackup writes the backup to w: from the running kmsd through its
// admin socket, or else from the store, opened here.
func writeBackup(ctx context.Context, c *config, getenv func(string) string, w io.Writer, log *zerolog.Logger) (mode string, err error) {
	sock, adminErr := dialAdmin(c.data)
	if adminErr == nil {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://kmsd/backup", nil)
		resp, err := adminClient(sock).Do(req)
		if err != nil {
			return "online", fmt.Errorf("ask the running kmsd: %w", err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			return "online", fmt.Errorf("the running kmsd: %s", strings.TrimSpace(string(msg)))
		}
		_, err = io.Copy(w, resp.Body)
		return "online", err
	}
	st, mk, err := openExistingStore(ctx, c, getenv, log, false)
	if err != nil {
		return "offline", storeInUse(c, err, adminErr)
	}
	defer st.Close()
	svc, err := kms.New(st, kms.Options{MasterKey: mk})
	mk = nil
	if err != nil {
		return "offline", startError(err, c)
	}
	_, err = svc.Backup(ctx, w)
	if cerr := svc.Close(); err == nil {
		err = cerr
	}
	return "offline", err
}

// backupOutput opens where the backup goes: standard output for "" or
// "-", or else a temporary file beside path, of mode 0600, that commit
// syncs and renames to path, and abort removes.
func backupOutput(path string, stdout io.Writer) (w io.Writer, commit func() error, abort func(), err error) {
	if path == "" || path == "-" {
		return stdout, func() error { return nil }, func() {}, nil
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.partial")
	if err != nil {
		return nil, nil, nil, fmt.Errorf("backup: %w", err)
	}
	done := false
	commit = func() error {
		if err := f.Chmod(0o600); err != nil {
			return err
		}
		if err := f.Sync(); err != nil {
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		done = true
		return os.Rename(f.Name(), path)
	}
	abort = func() {
		if !done {
			f.Close()
			os.Remove(f.Name())
		}
	}
	return f, commit, abort, nil
}

// restore is kmsd restore: it makes a new data directory from a backup
// (-i FILE, or standard input), with the master key the backed-up kmsd
// ran under, read as the server reads it: the backup is authenticated
// under it. The directory must not exist, or be empty; on any error what
// restore made is removed again (the directory, or what it put in the
// empty directory it found), so that no half-restored store is left to
// start on.
func restore(ctx context.Context, c *config, getenv func(string) string, stdin io.Reader, stdout io.Writer, log *zerolog.Logger) (err error) {
	if c.postgres() {
		return errors.New("restore: a PostgreSQL store is restored with the database's own tools (docs/OPERATIONS.md section 13, \"The PostgreSQL store\": Backups)")
	}
	entries, err := os.ReadDir(c.data)
	existed := err == nil
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return fmt.Errorf("restore: %w", err)
	case len(entries) > 0:
		return fmt.Errorf("restore: %s is not empty: restore into a new data directory", c.data)
	}
	mk, err := loadMasterKey(c, getenv, false, log)
	if err != nil {
		return fmt.Errorf("restore needs the master key the backed-up kmsd ran under: %w", err)
	}
	in := stdin
	if c.restoreIn != "" && c.restoreIn != "-" {
		f, err := os.Open(c.restoreIn)
		if err != nil {
			return fmt.Errorf("restore: %w", err)
		}
		defer f.Close()
		in = f
	}
	if err := os.MkdirAll(c.data, 0o700); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	defer func() {
		if err != nil {
			if rerr := removeRestore(c.data, existed); rerr != nil {
				err = errors.Join(err, fmt.Errorf("remove the partial restore in %s: %w", c.data, rerr))
			}
		}
	}()
	st, err := badgerstore.OpenDir(c.data)
	if err != nil {
		return fmt.Errorf("restore: open a new store in %s: %w", c.data, err)
	}
	info, err := kms.Restore(ctx, st, in, mk)
	mk = nil
	if cerr := st.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("restore: %s", strings.TrimPrefix(kms.ErrorMessage(err), "restore: "))
	}
	log.Info().Uint64("entries", info.Entries).Uint64("records", info.Records).Msg("restored")
	fmt.Fprintf(stdout, "restored %d store entries and %d activity records (backup of %s) into %s\n",
		info.Entries, info.Records, info.CreatedAt.Format(time.RFC3339), c.data)
	fmt.Fprint(stdout, verifyHint(c, getenv))
	return nil
}

// removeRestore removes what restore made in dir: dir itself, or, when
// dir existed before (empty), what is in it.
func removeRestore(dir string, existed bool) error {
	if !existed {
		return os.RemoveAll(dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		errs = append(errs, os.RemoveAll(filepath.Join(dir, e.Name())))
	}
	return errors.Join(errs...)
}

// verifyHint is restore's closing hint: the kmsd verify-audit command
// that checks the restored directory, with the master key given the way
// restore had it (never the key itself), so that it runs as printed (from
// the same shell, for KMS_MASTER_KEY).
func verifyHint(c *config, getenv func(string) string) string {
	cmd := "kmsd verify-audit -data " + shellQuote(absPath(c.data))
	switch {
	case getenv("KMS_MASTER_KEY") != "":
		return "check it, with KMS_MASTER_KEY set as for this restore, with:\n  " + cmd + "\n"
	case c.masterKeyFile != "":
		cmd += " -master-key-file " + shellQuote(absPath(c.masterKeyFile))
	}
	return "check it with:\n  " + cmd + "\n"
}

// absPath is path made absolute, or path when that fails.
func absPath(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return path
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
