package transit_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ringkms/kms"
)

func TestKeyLifecycle(t *testing.T) {
	e := newEnv(t, kms.Options{})
	c := e.vault

	s := mustWrite(t, c, "transit/keys/app", nil)
	if str(s, "name") != "app" || str(s, "type") != "aes256-gcm96" || num(t, s, "latest_version") != 1 ||
		num(t, s, "min_decryption_version") != 1 || num(t, s, "min_encryption_version") != 0 || s.Data["deletion_allowed"] != false {
		t.Errorf("create answered %v", s.Data)
	}
	keys, _ := s.Data["keys"].(map[string]any)
	if created, _ := keys["1"].(json.Number); created.String() != "1772600767" { // kmstest's clock
		t.Errorf("keys = %v, want version 1 made at the clock's time", keys)
	}
	if len(s.Warnings) != 0 {
		t.Errorf("create warned %q", s.Warnings)
	}

	again := mustWrite(t, c, "transit/keys/app", map[string]any{"type": "aes256-gcm96"})
	if len(again.Warnings) != 1 || !strings.Contains(again.Warnings[0], "already existed") {
		t.Errorf("second create warnings = %q, want that the key existed", again.Warnings)
	}

	read, err := c.Logical().Read("transit/keys/app")
	if err != nil || read == nil || str(read, "name") != "app" || num(t, read, "latest_version") != 1 {
		t.Fatalf("Read = %v, %v", read, err)
	}
	mustWrite(t, c, "transit/keys/other", nil)
	list, err := c.Logical().List("transit/keys")
	if err != nil || list == nil {
		t.Fatalf("List = %v, %v", list, err)
	}
	if got, _ := list.Data["keys"].([]any); !slices.Equal(got, []any{"app", "other"}) {
		t.Errorf("List keys = %v, want [app other]", list.Data["keys"])
	}
	// The client sends GET ?list=true; the LIST method is served too.
	req, _ := http.NewRequest("LIST", e.url+"/v1/transit/keys", nil)
	req.Header.Set("X-Vault-Token", e.RootKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var listed struct {
		Data struct{ Keys []string } `json:"data"`
	}
	json.NewDecoder(resp.Body).Decode(&listed)
	resp.Body.Close()
	if resp.StatusCode != 200 || !slices.Equal(listed.Data.Keys, []string{"app", "other"}) {
		t.Errorf("LIST /v1/transit/keys = %d %v", resp.StatusCode, listed)
	}

	e.clock.Advance(time.Hour)
	rot := mustWrite(t, c, "transit/keys/app/rotate", nil)
	if num(t, rot, "latest_version") != 2 {
		t.Errorf("rotate answered latest_version %v", rot.Data["latest_version"])
	}
	if keys, _ := rot.Data["keys"].(map[string]any); len(keys) != 2 {
		t.Errorf("keys after rotation = %v, want versions 1 and 2", keys)
	}

	cfg := mustWrite(t, c, "transit/keys/app/config", map[string]any{
		"min_decryption_version": 2, "min_encryption_version": 2, "deletion_allowed": true, "auto_rotate_period": "720h"})
	if num(t, cfg, "min_decryption_version") != 2 || num(t, cfg, "min_encryption_version") != 2 ||
		cfg.Data["deletion_allowed"] != true || num(t, cfg, "auto_rotate_period") != 720*3600 {
		t.Errorf("config answered %v", cfg.Data)
	}
	// The period is the ring's algos.aes256.rotationPeriod.
	if got := num(t, mustWrite(t, c, "transit/keys/app/config", map[string]any{"auto_rotate_period": 7200}), "auto_rotate_period"); got != 7200 {
		t.Errorf("auto_rotate_period 7200 (seconds) read back as %d", got)
	}

	if _, err := c.Logical().Delete("transit/keys/app"); err != nil {
		t.Fatalf("Delete = %v", err)
	}
	if s, err := c.Logical().Read("transit/keys/app"); s != nil || err != nil {
		t.Errorf("Read after delete = %v, %v; want nothing (404)", s, err)
	}
	if list, err := c.Logical().List("transit/keys"); err != nil || list == nil || len(list.Data["keys"].([]any)) != 1 {
		t.Errorf("List after delete = %v, %v", list, err)
	}
}

func TestKeyErrors(t *testing.T) {
	e := newEnv(t, kms.Options{})
	c := e.vault
	mustWrite(t, c, "transit/keys/app", nil)
	for _, tc := range []struct {
		name, op, path string // op: write, read or delete
		data           map[string]any
		status         int
		want           string
	}{
		{"other type", "write", "transit/keys/rsa", map[string]any{"type": "rsa-2048"}, 400, "aes256-gcm96"},
		{"derived", "write", "transit/keys/d", map[string]any{"derived": true}, 400, "derived is not supported"},
		{"short period", "write", "transit/keys/p", map[string]any{"auto_rotate_period": "30m"}, 400, "at least an hour"},
		{"bad name", "write", "transit/keys/a.b", nil, 400, "invalid"},
		{"deletion not allowed", "delete", "transit/keys/app", nil, 400, "deletion is not allowed"},
		{"rotate unknown", "write", "transit/keys/nope/rotate", nil, 400, "not found"},
		{"config unknown", "write", "transit/keys/nope/config", map[string]any{"deletion_allowed": true}, 400, "not found"},
		{"min decryption past latest", "write", "transit/keys/app/config", map[string]any{"min_decryption_version": 5}, 400, "latest key version is 1"},
		{"plaintext backup", "write", "transit/keys/app/config", map[string]any{"allow_plaintext_backup": true}, 400, "allow_plaintext_backup is not supported"},
		{"unsupported path", "write", "transit/hmac/app", map[string]any{"input": b64("x")}, 404, "unsupported path"},
		{"unsupported operation", "read", "transit/keys", nil, 405, "unsupported operation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			switch tc.op {
			case "write":
				_, err = c.Logical().Write(tc.path, tc.data)
			case "read":
				_, err = c.Logical().Read(tc.path)
			case "delete":
				_, err = c.Logical().Delete(tc.path)
			default:
				t.Fatalf("op %q", tc.op)
			}
			if status(err) != tc.status || !strings.Contains(errorsOf(err), tc.want) {
				t.Errorf("err = %v (status %d), want %d naming %q", err, status(err), tc.status, tc.want)
			}
		})
	}
	// Unknown keys: a read is 404 with no data, as Vault answers.
	if s, err := c.Logical().Read("transit/keys/nope"); s != nil || err != nil {
		t.Errorf("Read of an unknown key = %v, %v", s, err)
	}
	// No transit key yet in a fresh service: the list is 404, no data.
	if s, err := newEnv(t, kms.Options{}).vault.Logical().List("transit/keys"); s != nil || err != nil {
		t.Errorf("List of none = %v, %v", s, err)
	}
}

// TestKeyStates: a disabled version neither encrypts nor decrypts (403);
// a destroyed one answers 410, gone.
func TestKeyStates(t *testing.T) {
	e := newEnv(t, kms.Options{MinDestroyDelay: -1})
	c := e.vault
	ct := str(mustWrite(t, c, "transit/encrypt/s", map[string]any{"plaintext": b64("x")}), "ciphertext")
	mustWrite(t, c, "transit/keys/s/rotate", nil)
	v1 := keyID(t, e, "s", 1)
	if _, err := e.Service.SetAsymKeyState(e.RootCtx, kms.RingRef{Name: "s"}, v1, kms.KeyStateInput{State: kms.KeyDisabled}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Logical().Write("transit/decrypt/s", map[string]any{"ciphertext": ct}); status(err) != 403 || !strings.Contains(errorsOf(err), "disabled") {
		t.Errorf("decrypt with a disabled version = %v", err)
	}
	if _, err := c.Logical().Write("transit/encrypt/s", map[string]any{"plaintext": b64("x"), "key_version": 1}); status(err) != 403 {
		t.Errorf("encrypt with a disabled version = %v", err)
	}
	if _, err := e.Service.DestroyAsymKey(e.RootCtx, kms.RingRef{Name: "s"}, v1, kms.DestroyKeyInput{After: "1ms"}); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := c.Logical().Write("transit/decrypt/s", map[string]any{"ciphertext": ct})
		if status(err) == 410 {
			if !strings.Contains(errorsOf(err), "destroyed") {
				t.Errorf("decrypt with a destroyed version = %v", err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("decrypt with a version due for destruction = %v, still not 410", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The key's read lists the versions whose material exists.
	if s, err := c.Logical().Read("transit/keys/s"); err != nil || len(s.Data["keys"].(map[string]any)) != 1 {
		t.Errorf("read after destruction = %v, %v", s, err)
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
	c := e.vault
	mustWrite(t, c, "transit/keys/per", map[string]any{"auto_rotate_period": "1h"})
	if v := num(t, mustWrite(t, c, "transit/encrypt/per", map[string]any{"plaintext": b64("x")}), "key_version"); v != 1 {
		t.Fatalf("encrypt within the period used version %d", v)
	}
	e.clock.Advance(time.Hour)
	if v := num(t, mustWrite(t, c, "transit/encrypt/per", map[string]any{"plaintext": b64("x")}), "key_version"); v != 2 {
		t.Errorf("encrypt past the period used version %d, want 2", v)
	}
	if _, err := c.Logical().Write("transit/encrypt/per", map[string]any{"plaintext": b64("x"), "key_version": 1}); status(err) != 400 ||
		!strings.Contains(errorsOf(err), "rotation period") {
		t.Errorf("encrypt with a version past the period = %v", err)
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
	c := e.vault
	mustWrite(t, c, "transit/keys/cnt", nil)
	cfg := &kms.KeyRingConfig{Algos: kms.ConfigAlgos{AES256: kms.AlgoConfig{MaxEncryptCount: 2}}}
	if _, err := e.Service.SetAsymConfig(e.RootCtx, kms.RingRef{Name: "cnt"}, cfg); err != nil {
		t.Fatal(err)
	}
	var versions []int64
	for range 5 {
		versions = append(versions, num(t, mustWrite(t, c, "transit/encrypt/cnt", map[string]any{"plaintext": b64("x")}), "key_version"))
	}
	if !slices.Equal(versions, []int64{1, 1, 2, 2, 3}) {
		t.Errorf("versions of 5 encrypts with maxEncryptCount 2 = %v", versions)
	}
	if _, err := c.Logical().Write("transit/encrypt/cnt", map[string]any{"plaintext": b64("x"), "key_version": 1}); status(err) != 400 ||
		!strings.Contains(errorsOf(err), "maxEncryptCount") {
		t.Errorf("encrypt with a spent version = %v", err)
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
