package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/rs/zerolog"

	"github.com/ringkms/kms"
)

// devKeyFile is the name of the master key file that -dev keeps in the
// data directory.
const devKeyFile = "master.key"

const noKeyHelp = `no master key: kmsd needs a 256-bit master key, and will not make one up outside development.
Give it one of these ways:
  - KMS_MASTER_KEY=<base64 of 32 random bytes>   (generate: head -c 32 /dev/urandom | base64)
  - -master-key-file FILE (or KMS_MASTER_KEY_FILE), a file of mode 0600 or 0400 holding that base64
  - -dev, for development only: kmsd generates a key into <data>/master.key and reuses it
Keep the key safe and apart from the data: without it the data cannot be read.`

// loadMasterKey returns the master key from, in this order of preference,
// KMS_MASTER_KEY, the master key file, or (with -dev) <data>/master.key,
// which it generates on first use. create says whether -dev may generate
// the key (the server) or must find it (verify-audit). The key is never
// logged.
func loadMasterKey(c *config, getenv func(string) string, create bool, log *zerolog.Logger) (kms.MasterKey, error) {
	env := getenv("KMS_MASTER_KEY")
	switch {
	case env != "" && c.masterKeyFile != "":
		return kms.MasterKey{}, usagef("both KMS_MASTER_KEY and -master-key-file (KMS_MASTER_KEY_FILE) are set: give the master key one way only")
	case env != "":
		k, err := kms.ParseMasterKey(env)
		if err != nil {
			return kms.MasterKey{}, usagef("KMS_MASTER_KEY: %v; it must be the base64 of 32 random bytes (head -c 32 /dev/urandom | base64)", err)
		}
		return k, nil
	case c.masterKeyFile != "":
		return readKeyFile(c.masterKeyFile, log)
	case c.dev:
		return devMasterKey(c.data, create, log)
	}
	return kms.MasterKey{}, usageError{errors.New(noKeyHelp)}
}

// readKeyFile reads a master key file. A file that others (not the owner
// nor the group) may read or write is refused; one the group may read is
// accepted with a warning, for the "root:kmsd 0640" layout.
func readKeyFile(path string, log *zerolog.Logger) (kms.MasterKey, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return kms.MasterKey{}, fmt.Errorf("master key file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return kms.MasterKey{}, fmt.Errorf("master key file %s is not a regular file", path)
	}
	perm := fi.Mode().Perm()
	if perm&0o007 != 0 {
		return kms.MasterKey{}, fmt.Errorf("master key file %s has mode %04o: other users may access it; "+
			"restrict it with: chmod 600 %s (or 640 for a group the server runs in)", path, perm, path)
	}
	if perm&0o070 != 0 {
		log.Warn().Str("file", path).Str("mode", fmt.Sprintf("%04o", perm)).
			Msg("the master key file is accessible to its group; chmod 600 it unless that group is meant to read it")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return kms.MasterKey{}, fmt.Errorf("master key file: %w", err)
	}
	defer clear(b)
	k, err := kms.ParseMasterKey(string(b))
	if err != nil {
		return kms.MasterKey{}, fmt.Errorf("master key file %s: %v; it must hold the base64 of 32 random bytes (head -c 32 /dev/urandom | base64)", path, err)
	}
	return k, nil
}

// devMasterKey reads <data>/master.key, generating it first when create
// is set and the data directory holds no store yet.
func devMasterKey(data string, create bool, log *zerolog.Logger) (kms.MasterKey, error) {
	path := filepath.Join(data, devKeyFile)
	warn := func(msg string) {
		log.Warn().Str("file", path).Msg(msg)
	}
	if _, err := os.Stat(path); err == nil {
		k, err := readKeyFile(path, log)
		if err != nil {
			return kms.MasterKey{}, err
		}
		warn("DEV MODE: the master key is kept beside the data in " + path +
			"; anyone who can read the data directory can read every secret in it. Never use -dev in production")
		return k, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return kms.MasterKey{}, fmt.Errorf("master key file: %w", err)
	}
	if !create {
		return kms.MasterKey{}, fmt.Errorf("-dev: no master key in %s; give the key the store was created with (KMS_MASTER_KEY or -master-key-file)", path)
	}
	if hasStore(data) {
		return kms.MasterKey{}, fmt.Errorf("-dev: %s holds a store but no %s; a new key could not read it. "+
			"Give the key the store was created with (KMS_MASTER_KEY or -master-key-file), or use an empty data directory", data, devKeyFile)
	}
	k := kms.GenerateMasterKey()
	if err := writeKeyFile(data, path, k); err != nil {
		return kms.MasterKey{}, err
	}
	warn("DEV MODE: generated a new master key and stored it beside the data in " + path +
		"; anyone who can read the data directory can read every secret in it. Never use -dev in production")
	return k, nil
}

// hasStore reports whether dir holds files other than master.key and the
// mail outbox: a store made with some other key.
func hasStore(dir string) bool {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if e.Name() == "MANIFEST" || filepath.Ext(e.Name()) == ".vlog" || filepath.Ext(e.Name()) == ".sst" {
			return true
		}
	}
	return false
}

// writeKeyFile writes k to path (mode 0600) atomically, and never over an
// existing file: a temporary file is written, synced, then hard-linked to
// path.
func writeKeyFile(dir, path string, k kms.MasterKey) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	f, err := os.CreateTemp(dir, ".master.key-*") // mode 0600
	if err != nil {
		return fmt.Errorf("write master key: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	b := []byte(k.Base64() + "\n")
	defer clear(b)
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Link(tmp, path)
	}
	if err != nil {
		return fmt.Errorf("write master key: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}
