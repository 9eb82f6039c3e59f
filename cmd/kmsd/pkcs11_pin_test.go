package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/ringkms/kms/internal/hsmtest"
)

// TestPINSourceMode: a token's pin-source file is checked as the master
// key file is: one that other users may read or write stops kmsd (exit
// status 2, naming the file and its mode) before it logs in or writes
// anything, for the master key's token and the signing key's alike; one
// its group may read is accepted with a warning that names it.
func TestPINSourceMode(t *testing.T) {
	tok := hsmtest.New(t, "kms")
	tok.GenerateAESKey(t, "kms-master", hsmtest.AESKeyOptions{})
	tok.GenerateEd25519(t, "kms-signing", []byte{0x10})
	for _, tc := range []struct {
		name string
		e    env
		args []string
	}{
		{"master key", env{"KMS_MASTER_KEY_PKCS11": tok.URI("kms-master")}, nil},
		{"signing key", env{"KMS_MASTER_KEY": newKey()}, []string{"-signing-key-pkcs11", tok.URI("kms-signing")}},
	} {
		for _, mode := range []os.FileMode{0o644, 0o604, 0o606} {
			t.Run(fmt.Sprintf("%s %04o", tc.name, mode), func(t *testing.T) {
				if err := os.Chmod(tok.PINFile, mode); err != nil {
					t.Fatal(err)
				}
				defer os.Chmod(tok.PINFile, 0o600)
				data := t.TempDir()
				err, stderr := runErr(t, append([]string{"-data", data, "-addr", "127.0.0.1:0"}, tc.args...), tc.e)
				want := fmt.Sprintf("pin-source file %s has mode %04o", tok.PINFile, mode)
				if code := exitCode(err); code != 2 || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "chmod 600") {
					t.Fatalf("kmsd with a pin-source of mode %04o = %v (exit %d), want exit 2 saying %q and how to fix it", mode, err, code, want)
				}
				if hasStore(data) {
					t.Errorf("kmsd wrote a store before refusing the pin-source")
				}
				if strings.Contains(err.Error()+stderr, tok.PIN) {
					t.Errorf("the PIN was printed")
				}
			})
		}
		t.Run(tc.name+" 0640 warns", func(t *testing.T) {
			if err := os.Chmod(tok.PINFile, 0o640); err != nil {
				t.Fatal(err)
			}
			defer os.Chmod(tok.PINFile, 0o600)
			s := startRun(t, append([]string{"-data", t.TempDir(), "-addr", "127.0.0.1:0"}, tc.args...), tc.e)
			s.stop(t)
			logs := s.stderr.String()
			if !strings.Contains(logs, `"level":"warn"`) || !strings.Contains(logs, "pin-source file is accessible to its group") || !strings.Contains(logs, tok.PINFile) {
				t.Errorf("kmsd with a pin-source of mode 0640 logged no warning naming it:\n%s", logs)
			}
		})
	}
}

// TestPINPastedInTheURI: a PIN put in a PKCS#11 URI's path or query as an
// attribute of its own (not name=value) stops kmsd with exit status 2,
// and neither the error nor the log shows it.
func TestPINPastedInTheURI(t *testing.T) {
	tok := hsmtest.New(t, "kms")
	tok.GenerateAESKey(t, "kms-master", hsmtest.AESKeyOptions{})
	tok.GenerateEd25519(t, "kms-signing", []byte{0x10})
	inPath := func(object string) string {
		return strings.Replace(tok.URI(object), ";object=", ";"+tok.PIN+";object=", 1)
	}
	inQuery := func(object string) string { return tok.URI(object) + "&" + tok.PIN }
	for _, tc := range []struct {
		name string
		e    env
		args []string
	}{
		{"master key, path", env{"KMS_MASTER_KEY_PKCS11": inPath("kms-master")}, nil},
		{"master key, query", env{"KMS_MASTER_KEY_PKCS11": inQuery("kms-master")}, nil},
		{"next master key, path", env{"KMS_MASTER_KEY": newKey()}, []string{"-master-key-next-pkcs11", inPath("kms-master")}},
		{"signing key, path", env{"KMS_MASTER_KEY": newKey()}, []string{"-signing-key-pkcs11", inPath("kms-signing")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr syncBuffer
			err := run(context.Background(), append([]string{"-data", t.TempDir(), "-addr", "127.0.0.1:0"}, tc.args...), tc.e.get, io.Discard, &stderr)
			if code := exitCode(err); code != 2 || !strings.Contains(err.Error(), "not name=value") {
				t.Fatalf("kmsd = %v (exit %d), want exit 2 saying an attribute is not name=value", err, code)
			}
			if strings.Contains(err.Error(), tok.PIN) || strings.Contains(stderr.String(), tok.PIN) {
				t.Errorf("kmsd showed the PIN: %v\n%s", err, stderr.String())
			}
		})
	}
}
