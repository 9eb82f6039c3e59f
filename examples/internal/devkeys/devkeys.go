// Package devkeys keeps the keys of an example beside its data: the
// master key in <dir>/master.key, as kmsd -dev keeps it, and the secret of
// the root API key in <dir>/root.key. An example that made a store can
// then open it again on a later run; with a new master key it could not.
//
// For examples and development only: whoever can read the directory can
// read every secret in the store. A real deployment keeps its master key
// apart from the data (see docs/OPERATIONS.md).
package devkeys

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/ringkms/kms"
)

// The files in the data directory.
const (
	MasterKeyFile = "master.key" // the master key in base64, as kmsd -dev writes it
	RootKeyFile   = "root.key"   // the secret of the root API key
)

// Load returns the master key and the root API key's secret kept in dir.
// On first use, when dir holds neither file, it makes both (and dir);
// a dir that holds other files but no keys is refused: a new key could
// not read a store made there before.
func Load(dir string) (kms.MasterKey, string, error) {
	mk, err := os.ReadFile(filepath.Join(dir, MasterKeyFile))
	if errors.Is(err, fs.ErrNotExist) {
		return create(dir)
	} else if err != nil {
		return kms.MasterKey{}, "", err
	}
	defer clear(mk)
	key, err := kms.ParseMasterKey(string(mk))
	if err != nil {
		return kms.MasterKey{}, "", fmt.Errorf("%s: %w", filepath.Join(dir, MasterKeyFile), err)
	}
	root, err := os.ReadFile(filepath.Join(dir, RootKeyFile))
	if err != nil {
		return kms.MasterKey{}, "", fmt.Errorf("the root API key beside the master key: %w", err)
	}
	return key, strings.TrimSpace(string(root)), nil
}

// LoadMasterKey returns the master key kept in dir, for an example that
// acts as the application itself (kms.Service.Application) and needs no
// API key. On first use, when dir is empty or absent, it makes the key.
func LoadMasterKey(dir string) (kms.MasterKey, error) {
	mk, err := os.ReadFile(filepath.Join(dir, MasterKeyFile))
	if errors.Is(err, fs.ErrNotExist) {
		if err := checkEmpty(dir); err != nil {
			return kms.MasterKey{}, err
		}
		key := kms.GenerateMasterKey()
		return key, write(filepath.Join(dir, MasterKeyFile), key.Base64())
	} else if err != nil {
		return kms.MasterKey{}, err
	}
	defer clear(mk)
	key, err := kms.ParseMasterKey(string(mk))
	if err != nil {
		return kms.MasterKey{}, fmt.Errorf("%s: %w", filepath.Join(dir, MasterKeyFile), err)
	}
	return key, nil
}

// checkEmpty makes dir, or refuses one that holds files but no master
// key: a new key could not read a store made there before.
func checkEmpty(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if len(entries) > 0 {
		return fmt.Errorf("%s holds files but no %s: a new master key could not read a store there; give an empty or new directory", dir, MasterKeyFile)
	}
	return os.MkdirAll(dir, 0o700)
}

// WriteSecret writes a new file of mode 0600 holding text (a ring's
// private key, say), never over an existing one.
func WriteSecret(path, text string) error { return write(path, text) }

// create makes the keys of a new data directory.
func create(dir string) (kms.MasterKey, string, error) {
	if err := checkEmpty(dir); err != nil {
		return kms.MasterKey{}, "", err
	}
	key := kms.GenerateMasterKey()
	b := make([]byte, 32)
	rand.Read(b)
	root := "rk_" + base64.RawURLEncoding.EncodeToString(b)
	if err := write(filepath.Join(dir, RootKeyFile), root); err != nil {
		return kms.MasterKey{}, "", err
	}
	// The master key last: its file says that the directory is complete.
	if err := write(filepath.Join(dir, MasterKeyFile), key.Base64()); err != nil {
		return kms.MasterKey{}, "", err
	}
	return key, root, nil
}

// write writes a new file of mode 0600 holding text, never over one.
func write(path, text string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteString(text + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
