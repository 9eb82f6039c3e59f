package transit_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/pubkeytest"
)

func TestKeyLifecycle(t *testing.T) {
	e := newEnv(t, kms.Options{})
	c := e.root

	s := c.mustWrite(t, "transit/keys/app", nil)
	if s.str("name") != "app" || s.str("type") != "aes256-gcm96" || s.num(t, "latest_version") != 1 ||
		s.num(t, "min_decryption_version") != 1 || s.num(t, "min_encryption_version") != 0 || s.data["deletion_allowed"] != false {
		t.Errorf("create answered %v", s.data)
	}
	keys, _ := s.data["keys"].(map[string]any)
	if created, _ := keys["1"].(json.Number); created.String() != "1772600767" { // kmstest's clock
		t.Errorf("keys = %v, want version 1 made at the clock's time", keys)
	}
	if len(s.warnings) != 0 {
		t.Errorf("create warned %q", s.warnings)
	}

	again := c.mustWrite(t, "transit/keys/app", map[string]any{"type": "aes256-gcm96"})
	if len(again.warnings) != 1 || !strings.Contains(again.warnings[0], "already existed") {
		t.Errorf("second create warnings = %q, want that the key existed", again.warnings)
	}

	read := c.read(t, "transit/keys/app")
	if read.status != 200 || read.data == nil || read.str("name") != "app" || read.num(t, "latest_version") != 1 {
		t.Fatalf("read = %v", read)
	}
	c.mustWrite(t, "transit/keys/other", nil)
	// Vault's clients send GET ?list=true; the LIST method is served too.
	for _, list := range []*answer{c.list(t, "transit/keys"), c.do(t, "LIST", "transit/keys", nil)} {
		if got, _ := list.data["keys"].([]any); list.status != 200 || !slices.Equal(got, []any{"app", "other"}) {
			t.Errorf("list = %v, want keys [app other]", list)
		}
	}

	e.clock.Advance(time.Hour)
	rot := c.mustWrite(t, "transit/keys/app/rotate", nil)
	if rot.num(t, "latest_version") != 2 {
		t.Errorf("rotate answered latest_version %v", rot.data["latest_version"])
	}
	if keys, _ := rot.data["keys"].(map[string]any); len(keys) != 2 {
		t.Errorf("keys after rotation = %v, want versions 1 and 2", keys)
	}

	cfg := c.mustWrite(t, "transit/keys/app/config", map[string]any{
		"min_decryption_version": 2, "min_encryption_version": 2, "deletion_allowed": true, "auto_rotate_period": "720h"})
	if cfg.num(t, "min_decryption_version") != 2 || cfg.num(t, "min_encryption_version") != 2 ||
		cfg.data["deletion_allowed"] != true || cfg.num(t, "auto_rotate_period") != 720*3600 {
		t.Errorf("config answered %v", cfg.data)
	}
	// The period is the ring's algos.aes256.rotationPeriod.
	if got := c.mustWrite(t, "transit/keys/app/config", map[string]any{"auto_rotate_period": 7200}).num(t, "auto_rotate_period"); got != 7200 {
		t.Errorf("auto_rotate_period 7200 (seconds) read back as %d", got)
	}

	if a := c.delete(t, "transit/keys/app"); a.status != http.StatusNoContent {
		t.Fatalf("delete = %v", a)
	}
	if a := c.read(t, "transit/keys/app"); a.status != 404 || a.data != nil {
		t.Errorf("read after delete = %v; want nothing (404)", a)
	}
	if list := c.list(t, "transit/keys"); list.status != 200 || len(list.data["keys"].([]any)) != 1 {
		t.Errorf("list after delete = %v", list)
	}
}

func TestKeyErrors(t *testing.T) {
	e := newEnv(t, kms.Options{})
	c := e.root
	c.mustWrite(t, "transit/keys/app", nil)
	for _, tc := range []struct {
		name, method, path string
		data               map[string]any
		status             int
		want               string
	}{
		{"unknown type", http.MethodPut, "transit/keys/rsa", map[string]any{"type": "rsa-1024"}, 400, "rsa-2048"},
		{"key_size of another type", http.MethodPut, "transit/keys/ks", map[string]any{"type": "ed25519", "key_size": 64}, 400, "key_size"},
		{"derived", http.MethodPut, "transit/keys/d", map[string]any{"derived": true}, 400, "derived is not supported"},
		{"short period", http.MethodPut, "transit/keys/p", map[string]any{"auto_rotate_period": "30m"}, 400, "at least an hour"},
		{"bad name", http.MethodPut, "transit/keys/a.b", nil, 400, "invalid"},
		{"deletion not allowed", http.MethodDelete, "transit/keys/app", nil, 400, "deletion is not allowed"},
		{"rotate unknown", http.MethodPut, "transit/keys/nope/rotate", nil, 400, "not found"},
		{"config unknown", http.MethodPut, "transit/keys/nope/config", map[string]any{"deletion_allowed": true}, 400, "not found"},
		{"min decryption past latest", http.MethodPut, "transit/keys/app/config", map[string]any{"min_decryption_version": 5}, 400, "latest key version is 1"},
		{"plaintext backup", http.MethodPut, "transit/keys/app/config", map[string]any{"allow_plaintext_backup": true}, 400, "allow_plaintext_backup is not supported"},
		{"unsupported path", http.MethodPut, "transit/trim/app", map[string]any{"input": b64("x")}, 404, "unsupported path"},
		{"unsupported operation", http.MethodGet, "transit/keys", nil, 405, "unsupported operation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if a := c.do(t, tc.method, tc.path, tc.data); a.status != tc.status || !strings.Contains(a.errs(), tc.want) {
				t.Errorf("%s %s = %v, want %d naming %q", tc.method, tc.path, a, tc.status, tc.want)
			}
		})
	}
	// Unknown keys: a read is 404 with no data, as Vault answers.
	if a := c.read(t, "transit/keys/nope"); a.status != 404 || a.data != nil {
		t.Errorf("read of an unknown key = %v", a)
	}
	// No transit key yet in a fresh service: the list is 404, no data.
	if a := newEnv(t, kms.Options{}).root.list(t, "transit/keys"); a.status != 404 || a.data != nil {
		t.Errorf("list of none = %v", a)
	}
}

// TestKeyStates: a disabled version neither encrypts nor decrypts (403);
// a destroyed one answers 410, gone.
func TestKeyStates(t *testing.T) {
	e := newEnv(t, kms.Options{MinDestroyDelay: -1})
	c := e.root
	ct := c.mustWrite(t, "transit/encrypt/s", map[string]any{"plaintext": b64("x")}).str("ciphertext")
	c.mustWrite(t, "transit/keys/s/rotate", nil)
	v1 := keyID(t, e, "s", 1)
	if _, err := e.Service.SetAsymKeyState(e.RootCtx, kms.RingRef{Name: "s"}, v1, kms.KeyStateInput{State: kms.KeyDisabled}); err != nil {
		t.Fatal(err)
	}
	if a := c.write(t, "transit/decrypt/s", map[string]any{"ciphertext": ct}); a.status != 403 || !strings.Contains(a.errs(), "disabled") {
		t.Errorf("decrypt with a disabled version = %v", a)
	}
	if a := c.write(t, "transit/encrypt/s", map[string]any{"plaintext": b64("x"), "key_version": 1}); a.status != 403 {
		t.Errorf("encrypt with a disabled version = %v", a)
	}
	if _, err := e.Service.DestroyAsymKey(e.RootCtx, kms.RingRef{Name: "s"}, v1, kms.DestroyKeyInput{After: "1ms"}); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for {
		a := c.write(t, "transit/decrypt/s", map[string]any{"ciphertext": ct})
		if a.status == 410 {
			if !strings.Contains(a.errs(), "destroyed") {
				t.Errorf("decrypt with a destroyed version = %v", a)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("decrypt with a version due for destruction = %v, still not 410", a)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The key's read lists the versions whose material exists.
	if a := c.read(t, "transit/keys/s"); a.status != 200 || len(a.data["keys"].(map[string]any)) != 1 {
		t.Errorf("read after destruction = %v", a)
	}
}

// keyID returns the ID of version v of the transit key name, from the
// /asym ring's keys.
func keyID(t *testing.T, e *env, name string, v int) string {
	t.Helper()
	k, err := e.Service.GetHeldKey(e.RootCtx, name)
	if err != nil || k.KeyIDs[v] == "" {
		t.Fatalf("GetTransitKey(%s) = %+v, %v; want version %d", name, k, err, v)
	}
	return k.KeyIDs[v]
}

// TestRotationPeriod: a key whose period has passed is rotated before an
// encrypt hands it out, recorded as the service's own rotation.
func TestRotationPeriod(t *testing.T) {
	e := newEnv(t, kms.Options{})
	c := e.root
	c.mustWrite(t, "transit/keys/per", map[string]any{"auto_rotate_period": "1h"})
	if v := c.mustWrite(t, "transit/encrypt/per", map[string]any{"plaintext": b64("x")}).num(t, "key_version"); v != 1 {
		t.Fatalf("encrypt within the period used version %d", v)
	}
	e.clock.Advance(time.Hour)
	if v := c.mustWrite(t, "transit/encrypt/per", map[string]any{"plaintext": b64("x")}).num(t, "key_version"); v != 2 {
		t.Errorf("encrypt past the period used version %d, want 2", v)
	}
	if a := c.write(t, "transit/encrypt/per", map[string]any{"plaintext": b64("x"), "key_version": 1}); a.status != 400 ||
		!strings.Contains(a.errs(), "rotation period") {
		t.Errorf("encrypt with a version past the period = %v", a)
	}
	list, err := e.Service.SearchActivity(e.RootCtx, kms.ActivityFilter{Action: "asym.keyring.rotate.period"}, kms.PageRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Data) != 1 || list.Data[0].KeyID != "system" {
		t.Errorf("rotation records = %+v, want one by the service", list.Data)
	}
}

// TestMaxEncryptCount: an /asym ring's maxEncryptCount applies to its
// transit encrypt calls: the call after the last one of a version rotates
// the key first, and an explicit older version that served them is
// refused.
func TestMaxEncryptCount(t *testing.T) {
	e := newEnv(t, kms.Options{})
	c := e.root
	c.mustWrite(t, "transit/keys/cnt", nil)
	cfg := &kms.KeyRingConfig{Algos: kms.ConfigAlgos{AES256: kms.AlgoConfig{MaxEncryptCount: 2}}}
	if _, err := e.Service.SetAsymConfig(e.RootCtx, kms.RingRef{Name: "cnt"}, cfg); err != nil {
		t.Fatal(err)
	}
	var versions []int64
	for range 5 {
		versions = append(versions, c.mustWrite(t, "transit/encrypt/cnt", map[string]any{"plaintext": b64("x")}).num(t, "key_version"))
	}
	if !slices.Equal(versions, []int64{1, 1, 2, 2, 3}) {
		t.Errorf("versions of 5 encrypts with maxEncryptCount 2 = %v", versions)
	}
	if a := c.write(t, "transit/encrypt/cnt", map[string]any{"plaintext": b64("x"), "key_version": 1}); a.status != 400 ||
		!strings.Contains(a.errs(), "maxEncryptCount") {
		t.Errorf("encrypt with a spent version = %v", a)
	}
	list, err := e.Service.SearchActivity(e.RootCtx, kms.ActivityFilter{Action: "asym.keyring.rotate.auto"}, kms.PageRequest{})
	if err != nil || len(list.Data) != 2 {
		t.Errorf("rotations by count = %v, %v; want 2", list, err)
	}
	got, err := e.Service.GetAsymConfig(e.RootCtx, kms.RingRef{Name: "cnt"})
	if err != nil || got.Algos.AES256.MaxEncryptCount != 2 {
		t.Errorf("GetAsymConfig = %+v, %v", got, err)
	}
}

// TestKeyTypes: every type is made with its parameters and read in
// Vault's shape: the keys map has creation times in Unix seconds for the
// symmetric types, and an object with the public key, its name and its
// creation time for the asymmetric ones; the supports_ fields say what
// the type does. A type that does not encrypt refuses encrypt.
func TestKeyTypes(t *testing.T) {
	e := newEnv(t, kms.Options{})
	for _, tc := range []struct {
		typ          string
		params       map[string]any
		encrypts     bool
		signs        bool
		name         string // the keys' name, for an asymmetric type
		keySize      int64
		parameterSet string
	}{
		{typ: "aes256-gcm96", encrypts: true},
		{typ: "chacha20-poly1305", encrypts: true},
		{typ: "hmac", params: map[string]any{"key_size": 64}, keySize: 64},
		{typ: "ed25519", signs: true, name: "ed25519"},
		{typ: "ecdsa-p256", signs: true, name: "P-256"},
		{typ: "ecdsa-p384", signs: true, name: "P-384"},
		{typ: "rsa-2048", signs: true, name: "rsa-2048"},
		{typ: "ml-dsa", signs: true, name: "ML-DSA-65", parameterSet: "65"},
		{typ: "ml-dsa", params: map[string]any{"parameter_set": "44"}, signs: true, name: "ML-DSA-44", parameterSet: "44"},
	} {
		name := "t-" + strings.ReplaceAll(tc.typ, "-", "") + tc.parameterSet
		data := map[string]any{"type": tc.typ}
		for k, v := range tc.params {
			data[k] = v
		}
		e.root.mustWrite(t, "transit/keys/"+name, data)
		a := e.root.read(t, "transit/keys/"+name)
		if a.status != 200 || a.data["type"] != tc.typ || a.data["supports_encryption"] != tc.encrypts ||
			a.data["supports_decryption"] != tc.encrypts || a.data["supports_signing"] != tc.signs || a.data["supports_derivation"] != false {
			t.Errorf("%s: read = %v", tc.typ, a)
			continue
		}
		if tc.keySize != 0 && a.num(t, "key_size") != tc.keySize {
			t.Errorf("%s: key_size = %v, want %d", tc.typ, a.data["key_size"], tc.keySize)
		}
		if tc.parameterSet != "" && a.data["parameter_set"] != tc.parameterSet {
			t.Errorf("%s: parameter_set = %v, want %s", tc.typ, a.data["parameter_set"], tc.parameterSet)
		}
		v1 := a.data["keys"].(map[string]any)["1"]
		if tc.name == "" {
			if _, ok := v1.(interface{ Int64() (int64, error) }); !ok {
				t.Errorf("%s: keys[1] = %#v, want its creation time in Unix seconds", tc.typ, v1)
			}
		} else {
			pub, _ := v1.(map[string]any)
			if pub["name"] != tc.name || pub["creation_time"] == nil || !parses(tc.typ, tc.parameterSet, pub["public_key"]) {
				t.Errorf("%s: keys[1] = %#v, want its public key named %s", tc.typ, v1, tc.name)
			}
		}
		enc := e.root.write(t, "transit/encrypt/"+name, map[string]any{"plaintext": b64("x")})
		if tc.encrypts != (enc.status == 200) || !tc.encrypts && !strings.Contains(enc.errs(), "does not support encryption") {
			t.Errorf("%s: encrypt = %v", tc.typ, enc)
		}
	}
}

// parses reports whether pub is the public key of a key of typ, as the
// key's read writes it.
func parses(typ, paramSet string, pub any) bool {
	text, _ := pub.(string)
	_, err := pubkeytest.Parse(typ, paramSet, text)
	return err == nil
}
