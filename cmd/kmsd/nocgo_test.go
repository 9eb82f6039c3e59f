package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ringkms/kms/internal/kmsdtest"
)

// TestSigningKeyPKCS11WithoutCgo builds kmsd without cgo, as
// CGO_ENABLED=0 builds it, and gives it -signing-key-pkcs11: it answers
// that this build lacks PKCS#11 support, exit status 2, before it writes
// anything.
func TestSigningKeyPKCS11WithoutCgo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds kmsd; skipped with -short")
	}
	bin := filepath.Join(t.TempDir(), "kmsd")
	build := exec.Command(kmsdtest.GoTool(), "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("CGO_ENABLED=0 go build: %v\n%s", err, out)
	}
	data := filepath.Join(t.TempDir(), "data")
	uri := "pkcs11:token=kms;object=kms-signing?module-path=/usr/lib/softhsm/libsofthsm2.so"
	for _, args := range [][]string{{"-data", data}, {"rotate-signing-key", "-data", data}} {
		cmd := exec.Command(bin, args...)
		cmd.Env = kmsdtest.Env("KMS_MASTER_KEY="+newKey(), "KMS_SIGNING_KEY_PKCS11="+uri, "KMS_PKCS11_PIN=1234")
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 {
			t.Fatalf("kmsd %s with -signing-key-pkcs11, built without cgo = %v, want exit status 2; output:\n%s", args[0], err, out)
		}
		for _, want := range []string{"-signing-key-pkcs11", "no PKCS#11 support", "CGO_ENABLED=0"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("kmsd %s printed %q, want it to say %q", args[0], out, want)
			}
		}
		if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("kmsd %s made the data directory (%v)", args[0], err)
		}
	}
}
