//go:build !cgo

package hsm_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/ringkms/kms/internal/hsm"
)

func TestNoSupport(t *testing.T) {
	u, err := hsm.ParseURI("pkcs11:token=kms;object=kms-master?module-path=/usr/lib/softhsm/libsofthsm2.so")
	if err != nil {
		t.Fatalf("ParseURI() = %v", err)
	}
	tk, err := hsm.Open(u, "1234")
	if !errors.Is(err, hsm.ErrNoSupport) || tk != nil {
		t.Fatalf("Open() = %v, %v; want ErrNoSupport", tk, err)
	}
	for _, want := range []string{"no PKCS#11 support", "CGO_ENABLED=0", "build with cgo"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Open() = %q, want it to say %q", err, want)
		}
	}
}
