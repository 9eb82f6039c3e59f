package transit_test

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/vaultct"
)

// TestExport: Vault's export of an exportable key, with the export flag:
// data.name, data.type and data.keys (version -> base64 of the key),
// whose keys open the key's ciphertexts; a key that is not exportable
// answers 400 "key is not exportable", a caller without the flag 403;
// exportable cannot be unset.
func TestExport(t *testing.T) {
	e := newEnv(t, kms.Options{})
	c := e.vault
	s := mustWrite(t, c, "transit/keys/open", map[string]any{"exportable": true})
	if s.Data["exportable"] != true {
		t.Fatalf("create with exportable answered %v", s.Data)
	}
	mustWrite(t, c, "transit/keys/closed", nil)
	ct := str(mustWrite(t, c, "transit/encrypt/open", map[string]any{"plaintext": b64("exported")}), "ciphertext")

	exporter := e.keyWith(t, "keyring.open.export", "keyring.closed.export")
	got, err := exporter.Logical().Read("transit/export/encryption-key/open")
	if err != nil || got == nil {
		t.Fatalf("export = %v, %v", got, err)
	}
	keys, _ := got.Data["keys"].(map[string]any)
	if str(got, "name") != "open" || str(got, "type") != "aes256-gcm96" || len(keys) != 1 {
		t.Fatalf("export answered %v", got.Data)
	}
	key, _ := base64.StdEncoding.DecodeString(keys["1"].(string))
	_, blob, err := vaultct.Parse(ct)
	if err != nil {
		t.Fatal(err)
	}
	aead, err := vaultct.NewAEAD(key)
	if err != nil {
		t.Fatalf("the exported key: %v", err)
	}
	if plain, err := vaultct.Open(aead, blob); err != nil || string(plain) != "exported" {
		t.Errorf("the exported key opens the ciphertext: %q, %v", plain, err)
	}
	mustWrite(t, c, "transit/keys/open/rotate", nil)
	for path, want := range map[string]string{"/1": "1", "/latest": "2"} {
		one, err := exporter.Logical().Read("transit/export/encryption-key/open" + path)
		if err != nil || one == nil {
			t.Fatalf("export%s = %v, %v", path, one, err)
		}
		if ks, _ := one.Data["keys"].(map[string]any); len(ks) != 1 || ks[want] == nil {
			t.Errorf("export%s = %v, %v; want version %s alone", path, one, err, want)
		}
	}

	for _, tc := range []struct {
		name, path string
		flags      []string
		status     int
		want       string
	}{
		{"not exportable", "transit/export/encryption-key/closed", []string{"keyring.closed.export"}, 400, "key is not exportable"},
		{"no export flag", "transit/export/encryption-key/open", []string{"keyring.open.read", "keyring.open.rotate", "keyring.open.create", "keyring.open.config"}, 403, "keyring.open.export"},
		{"every op but export", "transit/export/encryption-key/open", []string{"keyring.open.*"}, 403, "keyring.open.export"},
		{"other type", "transit/export/signing-key/open", []string{"keyring.open.export"}, 400, "encryption-key"},
		{"bad version", "transit/export/encryption-key/open/x", []string{"keyring.open.export"}, 400, "invalid key version"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.keyWith(t, tc.flags...).Logical().Read(tc.path)
			if status(err) != tc.status || !strings.Contains(errorsOf(err), tc.want) {
				t.Errorf("Read(%s) = %v (status %d), want %d naming %q", tc.path, err, status(err), tc.status, tc.want)
			}
		})
	}

	// exportable by config, never unset.
	if cfg := mustWrite(t, c, "transit/keys/closed/config", map[string]any{"exportable": true}); cfg.Data["exportable"] != true {
		t.Errorf("config exportable answered %v", cfg.Data)
	}
	_, err = c.Logical().Write("transit/keys/closed/config", map[string]any{"exportable": false})
	if status(err) != 400 || !strings.Contains(errorsOf(err), "cannot be unset") {
		t.Errorf("config exportable false = %v, want 400 saying it cannot be unset", err)
	}
	if read, err := c.Logical().Read("transit/keys/closed"); err != nil || read.Data["exportable"] != true {
		t.Errorf("read after the refusal = %v, %v; want exportable", read, err)
	}
}

// TestHandedOutRing: a ring made by POST /asym/keyrings is no transit
// key: encrypt answers 400 saying why and what to do.
func TestHandedOutRing(t *testing.T) {
	e := newEnv(t, kms.Options{})
	if _, err := e.Service.CreateAsymKeyRing(e.RootCtx, kms.CreateAsymKeyRingInput{Name: "pre"}); err != nil {
		t.Fatal(err)
	}
	_, err := e.vault.Logical().Write("transit/encrypt/pre", map[string]any{"plaintext": b64("x")})
	if status(err) != 400 || !strings.Contains(errorsOf(err), "POST /asym/keyrings") || !strings.Contains(errorsOf(err), "another name") {
		t.Errorf("encrypt with a ring made by POST /asym/keyrings = %v, want 400 saying why and what to do", err)
	}
}
