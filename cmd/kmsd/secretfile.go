package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/rs/zerolog"

	"github.com/ringkms/kms/internal/hsm"
)

// checkSecretFile checks a file that holds a secret before kmsd reads
// it: the master key file, a token's pin-source, the metrics token file.
// Every such file is checked this one way. A file that is not a regular
// file, or that other users (not its owner nor its group) may read or
// write (any of the bits 0007), is refused with a usage error (exit
// status 2) that names it, its mode and the remedy; one its group may
// read is accepted with a warning, for the "root:kmsd 0640" layout.
// what names the file in messages ("master key file"). A file that
// cannot be found is an error of another kind, which the caller reports.
func checkSecretFile(path, what string, log *zerolog.Logger) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if !fi.Mode().IsRegular() {
		return usagef("%s %s is not a regular file", what, path)
	}
	perm := fi.Mode().Perm()
	if perm&0o007 != 0 {
		return usagef("%s %s has mode %04o: other users may access it; "+
			"restrict it with: chmod 600 %s (or 640 for a group the server runs in)", what, path, perm, path)
	}
	if perm&0o070 != 0 {
		log.Warn().Str("file", path).Str("mode", fmt.Sprintf("%04o", perm)).
			Msgf("the %s is accessible to its group; chmod 600 it unless that group is meant to read it", what)
	}
	return nil
}

// readPIN returns the PIN of the token u names (hsm.URI.ReadPIN: its
// pin-source, else KMS_PKCS11_PIN), its pin-source file checked first as
// every file holding a secret is (checkSecretFile). A pin-source that
// cannot be read is ReadPIN's to report.
func readPIN(u hsm.URI, getenv func(string) string, log *zerolog.Logger) (string, error) {
	if u.PINFile != "" {
		var ue usageError
		if err := checkSecretFile(u.PINFile, "pin-source file", log); errors.As(err, &ue) {
			return "", err
		}
	}
	return u.ReadPIN(getenv(hsm.PINEnv))
}
