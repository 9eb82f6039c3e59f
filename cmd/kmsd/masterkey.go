package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/rs/zerolog"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/hsm"
)

// devKeyFile is the name of the master key file that -dev keeps in the
// data directory.
const devKeyFile = "master.key"

const noKeyHelp = `no master key: kmsd needs a 256-bit master key, and will not make one up outside development.
Give it one of these ways:
  - KMS_MASTER_KEY=<base64 of 32 random bytes>   (generate: head -c 32 /dev/urandom | base64)
  - -master-key-file FILE (or KMS_MASTER_KEY_FILE), a file of mode 0600 or 0400 holding that base64
  - -master-key-pkcs11 URI (or KMS_MASTER_KEY_PKCS11), an AES-256 key in a PKCS#11 token (an HSM), as
    pkcs11:token=kms;object=kms-master?module-path=/usr/lib/softhsm/libsofthsm2.so&pin-source=file:/etc/kms/pin
  - -dev, for development only: kmsd generates a key into <data>/master.key and reuses it
Keep the key safe and apart from the data: without it the data cannot be read.`

// keyRole is one of the root keys kmsd may be given, and the ways to give
// it: the variable holding its base64, a file holding that, or a PKCS#11
// URI naming it in a token.
type keyRole struct {
	name       string // "master key", for messages
	env        string // KMS_MASTER_KEY
	fileFlag   string // -master-key-file
	file       string // its value
	pkcs11Flag string // -master-key-pkcs11
	pkcs11     string // its value
}

func (c *config) masterKeyRole() keyRole {
	return keyRole{"master key", "KMS_MASTER_KEY", "-master-key-file", c.masterKeyFile, "-master-key-pkcs11", c.masterKeyPKCS11}
}

func (c *config) nextKeyRole() keyRole {
	return keyRole{"next master key", "KMS_MASTER_KEY_NEXT", "-master-key-next-file", c.nextKeyFile, "-master-key-next-pkcs11", c.nextKeyPKCS11}
}

func (c *config) newKeyRole() keyRole {
	return keyRole{"new master key", "KMS_NEW_MASTER_KEY", "-new-master-key-file", c.newMasterKeyFile, "-new-master-key-pkcs11", c.newKeyPKCS11}
}

// load returns the key given for r, or nil when none is. Two ways at once
// are a usage error, and so is a key that cannot be read or opened (a
// PKCS#11 key: the token's error, which names the problem).
func (r keyRole) load(c *config, getenv func(string) string, log *zerolog.Logger) (kms.RootKey, error) {
	env := getenv(r.env)
	given := 0
	for _, v := range []string{env, r.file, r.pkcs11} {
		if v != "" {
			given++
		}
	}
	if given > 1 {
		return nil, usagef("the %s is given more than one way (%s, %s, %s): give it one way only", r.name, r.env, r.fileFlag, r.pkcs11Flag)
	}
	switch {
	case env != "":
		k, err := kms.ParseMasterKey(env)
		if err != nil {
			return nil, usagef("%s: %v; it must be the base64 of 32 random bytes (head -c 32 /dev/urandom | base64)", r.env, err)
		}
		return k, nil
	case r.file != "":
		return readKeyFile(r.file, log)
	case r.pkcs11 != "":
		return c.openTokenKey(r, getenv, log)
	}
	return nil, nil
}

// source says where r's key is given, for the log: "environment
// KMS_MASTER_KEY", "file PATH" or "PKCS#11 URI" (the URI as parsed, which
// holds no PIN: ParseURI refuses one); "" when it is not given. Never the
// key itself.
func (r keyRole) source(getenv func(string) string) string {
	switch {
	case getenv(r.env) != "":
		return "environment " + r.env
	case r.file != "":
		return "file " + r.file
	case r.pkcs11 != "":
		if u, err := hsm.ParseURI(r.pkcs11); err == nil {
			return "PKCS#11 " + u.String()
		}
		return "PKCS#11"
	}
	return ""
}

// loadMasterKey returns the master key: from KMS_MASTER_KEY, the master
// key file or a PKCS#11 token, exactly one of them, or (with -dev, alone)
// <data>/master.key, which it generates on first use. create says whether
// -dev may generate the key (the server) or must find it (verify-audit).
// The key is never logged.
func loadMasterKey(c *config, getenv func(string) string, create bool, log *zerolog.Logger) (kms.RootKey, error) {
	r := c.masterKeyRole()
	k, err := r.load(c, getenv, log)
	switch {
	case err != nil:
		return nil, err
	case k != nil && c.dev:
		return nil, usagef("-dev and the master key (%s, %s or %s) are both given: -dev generates a key of its own; give one or the other", r.env, r.fileFlag, r.pkcs11Flag)
	case k != nil:
		return k, nil
	case c.dev:
		return devMasterKey(c.data, create, log)
	}
	return nil, usageError{errors.New(noKeyHelp)}
}

// readKeyFile reads a master key file, checked first as every file
// holding a secret is (checkSecretFile).
func readKeyFile(path string, log *zerolog.Logger) (kms.MasterKey, error) {
	if err := checkSecretFile(path, "master key file", log); err != nil {
		return kms.MasterKey{}, err
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
