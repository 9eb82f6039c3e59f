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
	c := e.root
	s := c.mustWrite(t, "transit/keys/open", map[string]any{"exportable": true})
	if s.data["exportable"] != true {
		t.Fatalf("create with exportable answered %v", s.data)
	}
	c.mustWrite(t, "transit/keys/closed", nil)
	ct := c.mustWrite(t, "transit/encrypt/open", map[string]any{"plaintext": b64("exported")}).str("ciphertext")

	exporter := e.keyWith(t, "keyring.open.export", "keyring.closed.export")
	got := exporter.read(t, "transit/export/encryption-key/open")
	if got.status != 200 || got.data == nil {
		t.Fatalf("export = %v", got)
	}
	keys, _ := got.data["keys"].(map[string]any)
	if got.str("name") != "open" || got.str("type") != "aes256-gcm96" || len(keys) != 1 {
		t.Fatalf("export answered %v", got.data)
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
	c.mustWrite(t, "transit/keys/open/rotate", nil)
	for path, want := range map[string]string{"/1": "1", "/latest": "2"} {
		one := exporter.read(t, "transit/export/encryption-key/open"+path)
		if one.status != 200 || one.data == nil {
			t.Fatalf("export%s = %v", path, one)
		}
		if ks, _ := one.data["keys"].(map[string]any); len(ks) != 1 || ks[want] == nil {
			t.Errorf("export%s = %v; want version %s alone", path, one, want)
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
		{"kind the type has not", "transit/export/signing-key/open", []string{"keyring.open.export"}, 400, "no signing-key"},
		{"unknown kind", "transit/export/private-key/open", []string{"keyring.open.export"}, 400, "encryption-key"},
		{"bad version", "transit/export/encryption-key/open/x", []string{"keyring.open.export"}, 400, "invalid key version"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if a := e.keyWith(t, tc.flags...).read(t, tc.path); a.status != tc.status || !strings.Contains(a.errs(), tc.want) {
				t.Errorf("read(%s) = %v, want %d naming %q", tc.path, a, tc.status, tc.want)
			}
		})
	}

	// exportable by config, never unset.
	if cfg := c.mustWrite(t, "transit/keys/closed/config", map[string]any{"exportable": true}); cfg.data["exportable"] != true {
		t.Errorf("config exportable answered %v", cfg.data)
	}
	if a := c.write(t, "transit/keys/closed/config", map[string]any{"exportable": false}); a.status != 400 || !strings.Contains(a.errs(), "cannot be unset") {
		t.Errorf("config exportable false = %v, want 400 saying it cannot be unset", a)
	}
	if read := c.read(t, "transit/keys/closed"); read.status != 200 || read.data["exportable"] != true {
		t.Errorf("read after the refusal = %v; want exportable", read)
	}
}

// TestHandedOutRing: a ring made by POST /asym/keyrings is no transit
// key: encrypt answers 400 saying why and what to do.
func TestHandedOutRing(t *testing.T) {
	e := newEnv(t, kms.Options{})
	if _, err := e.Service.CreateAsymKeyRing(e.RootCtx, kms.CreateAsymKeyRingInput{Name: "pre"}); err != nil {
		t.Fatal(err)
	}
	a := e.root.write(t, "transit/encrypt/pre", map[string]any{"plaintext": b64("x")})
	if a.status != 400 || !strings.Contains(a.errs(), "POST /asym/keyrings") || !strings.Contains(a.errs(), "another name") {
		t.Errorf("encrypt with a ring made by POST /asym/keyrings = %v, want 400 saying why and what to do", a)
	}
}

// TestExportKinds: an asymmetric key's public key is exported to a
// caller that may read the key, exportable or not; its signing key and
// every key's HMAC key only from an exportable key, with .export.
func TestExportKinds(t *testing.T) {
	e := newEnv(t, kms.Options{})
	e.root.mustWrite(t, "transit/keys/sealed", map[string]any{"type": "ecdsa-p256"})
	e.root.mustWrite(t, "transit/keys/open", map[string]any{"type": "ed25519", "exportable": true})
	reader := e.keyWith(t, "keyring.sealed.read", "keyring.open.read")
	exporter := e.keyWith(t, "keyring.sealed.export", "keyring.open.export")
	pub := reader.read(t, "transit/export/public-key/sealed/1")
	key, _ := pub.data["keys"].(map[string]any)["1"].(string)
	if pub.status != 200 || pub.data["type"] != "ecdsa-p256" || !parses("ecdsa-p256", "", key) {
		t.Errorf("public-key of a key that is not exportable = %v", pub)
	}
	for _, tc := range []struct {
		c      *caller
		path   string
		status int
	}{
		{exporter, "transit/export/signing-key/sealed", 400}, // not exportable
		{exporter, "transit/export/hmac-key/sealed", 400},
		{reader, "transit/export/signing-key/open", 403},
		{exporter, "transit/export/signing-key/open", 200},
		{exporter, "transit/export/hmac-key/open/latest", 200},
		{exporter, "transit/export/encryption-key/open", 400}, // ed25519 has none
		{reader, "transit/export/public-key/open", 200},
	} {
		if got := tc.c.read(t, tc.path); got.status != tc.status {
			t.Errorf("GET %s = %v, want %d", tc.path, got, tc.status)
		}
	}
	sk := exporter.read(t, "transit/export/signing-key/open").data["keys"].(map[string]any)["1"].(string)
	if raw, err := base64.StdEncoding.DecodeString(sk); err != nil || len(raw) != 64 {
		t.Errorf("signing-key of an ed25519 key = %q, want base64 of 64 bytes", sk)
	}
}
