package hsmtest_test

import (
	"os"
	"strings"
	"testing"

	"github.com/ringkms/kms/internal/hsmtest"
)

func TestNew(t *testing.T) {
	tok := hsmtest.New(t, "kms test")
	if got := os.Getenv(hsmtest.ConfEnv); got != tok.Conf || tok.Env != hsmtest.ConfEnv+"="+tok.Conf {
		t.Errorf("%s = %q, Env = %q; want %q", hsmtest.ConfEnv, got, tok.Env, tok.Conf)
	}
	fi, err := os.Stat(tok.PINFile)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("PIN file: %v, %v; want mode 0600", fi, err)
	}
	if b, _ := os.ReadFile(tok.PINFile); string(b) != tok.PIN+"\n" {
		t.Errorf("PIN file holds %q, want the PIN and a newline", b)
	}
	uri := tok.URI("kms master")
	for _, want := range []string{"pkcs11:token=kms%20test;object=kms%20master?module-path=" + tok.ModulePath, "&pin-source=file:" + tok.PINFile} {
		if !strings.Contains(uri, want) {
			t.Errorf("URI() = %q, want it to hold %q", uri, want)
		}
	}
	tok.GenerateAESKey(t, "kms master", hsmtest.AESKeyOptions{ID: []byte{1}})
	tok.GenerateEd25519(t, "signing", []byte{2})
	tok.InitToken(t, "second")
}
