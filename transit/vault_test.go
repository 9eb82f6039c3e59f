package transit_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	vault "github.com/hashicorp/vault/api"
	"github.com/rs/zerolog"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/kmstest"
	"github.com/ringkms/kms/transit"
)

// env is a Service on an in-memory store whose transit handler is served
// over loopback HTTP, and HashiCorp's own Vault client for it.
type env struct {
	*kmstest.Env
	url   string
	vault *vault.Client // acting as the root API key
	clock *kmstest.Clock
	logs  *kmstest.LogBuffer
}

func newEnv(t *testing.T, opts kms.Options) *env {
	t.Helper()
	clock := kmstest.NewClock()
	if opts.Now == nil {
		opts.Now = clock.Now
	}
	e := &env{Env: kmstest.New(t, kmstest.MemoryStore(t), opts), clock: clock, logs: &kmstest.LogBuffer{}}
	log := zerolog.New(e.logs)
	_, e.url = kmstest.Serve(t, transit.New(e.Service, transit.Options{Logger: &log}), "")
	e.vault = e.client(t, e.RootKey)
	return e
}

// client is a Vault client of e's service acting with secret, which
// neither retries nor reads the environment's VAULT_ settings.
func (e *env) client(t *testing.T, secret string) *vault.Client {
	t.Helper()
	cfg := vault.DefaultConfig()
	cfg.Address = e.url
	cfg.MaxRetries = 0
	c, err := vault.NewClient(cfg)
	if err != nil {
		t.Fatalf("vault.NewClient = %v", err)
	}
	c.SetToken(secret)
	return c
}

// keyWith returns a Vault client acting as a new API key with flags.
func (e *env) keyWith(t *testing.T, flags ...string) *vault.Client {
	t.Helper()
	f := kms.Flags{}
	for _, name := range flags {
		f[name] = true
	}
	k, err := e.Service.CreateAPIKey(e.RootCtx, kms.APIKeyInput{AccountID: kms.PrincipalFrom(e.RootCtx).AccountID, Flags: f})
	if err != nil {
		t.Fatalf("CreateAPIKey(%v) = %v", flags, err)
	}
	return e.client(t, k.Key)
}

// status returns the HTTP status of a Vault client's error (0 for none).
func status(err error) int {
	var re *vault.ResponseError
	if errors.As(err, &re) {
		return re.StatusCode
	}
	return 0
}

func errorsOf(err error) string {
	var re *vault.ResponseError
	if errors.As(err, &re) {
		return strings.Join(re.Errors, "; ")
	}
	return ""
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func mustWrite(t *testing.T, c *vault.Client, path string, data map[string]any) *vault.Secret {
	t.Helper()
	s, err := c.Logical().Write(path, data)
	if err != nil {
		t.Fatalf("Write(%s, %v) = %v", path, data, err)
	}
	if s == nil {
		t.Fatalf("Write(%s) answered no data", path)
	}
	return s
}

func str(s *vault.Secret, name string) string {
	v, _ := s.Data[name].(string)
	return v
}

func num(t *testing.T, s *vault.Secret, name string) int64 {
	t.Helper()
	n, ok := s.Data[name].(json.Number)
	if !ok {
		t.Fatalf("data %s = %#v, want a number", name, s.Data[name])
	}
	v, err := n.Int64()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// rawWrite sends a write with the Vault client and returns the answer's
// status and body, whatever the status: a batch that failed answers 400
// with its batch_results, which the client's Write hides in its error.
func rawWrite(t *testing.T, c *vault.Client, path string, data map[string]any) (int, map[string]any) {
	t.Helper()
	b, _ := json.Marshal(data)
	resp, err := c.Logical().WriteRawWithContext(context.Background(), path, b)
	if resp == nil {
		t.Fatalf("WriteRaw(%s) = %v", path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("WriteRaw(%s) body %q: %v", path, raw, err)
		}
	}
	return resp.StatusCode, out
}

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
		name   string
		do     func() error
		status int
		want   string
	}{
		{"other type", func() error {
			_, err := c.Logical().Write("transit/keys/rsa", map[string]any{"type": "rsa-2048"})
			return err
		}, 400, "aes256-gcm96"},
		{"derived", func() error {
			_, err := c.Logical().Write("transit/keys/d", map[string]any{"derived": true})
			return err
		}, 400, "derived is not supported"},
		{"short period", func() error {
			_, err := c.Logical().Write("transit/keys/p", map[string]any{"auto_rotate_period": "30m"})
			return err
		}, 400, "at least an hour"},
		{"bad name", func() error {
			_, err := c.Logical().Write("transit/keys/a.b", nil)
			return err
		}, 400, "invalid"},
		{"deletion not allowed", func() error {
			_, err := c.Logical().Delete("transit/keys/app")
			return err
		}, 400, "deletion is not allowed"},
		{"rotate unknown", func() error {
			_, err := c.Logical().Write("transit/keys/nope/rotate", nil)
			return err
		}, 400, "not found"},
		{"config unknown", func() error {
			_, err := c.Logical().Write("transit/keys/nope/config", map[string]any{"deletion_allowed": true})
			return err
		}, 400, "not found"},
		{"min decryption past latest", func() error {
			_, err := c.Logical().Write("transit/keys/app/config", map[string]any{"min_decryption_version": 5})
			return err
		}, 400, "latest key version is 1"},
		{"plaintext backup", func() error {
			_, err := c.Logical().Write("transit/keys/app/config", map[string]any{"allow_plaintext_backup": true})
			return err
		}, 400, "allow_plaintext_backup is not supported"},
		{"unsupported path", func() error {
			_, err := c.Logical().Write("transit/hmac/app", map[string]any{"input": b64("x")})
			return err
		}, 404, "unsupported path"},
		{"unsupported operation", func() error {
			_, err := c.Logical().Read("transit/keys")
			return err
		}, 405, "unsupported operation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.do()
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

func TestEncryptDecrypt(t *testing.T) {
	e := newEnv(t, kms.Options{})
	c := e.vault
	// Encrypt makes the key on first use.
	enc := mustWrite(t, c, "transit/encrypt/orders", map[string]any{"plaintext": b64("the quick brown fox")})
	ct := str(enc, "ciphertext")
	if !strings.HasPrefix(ct, "vault:v1:") || num(t, enc, "key_version") != 1 {
		t.Fatalf("encrypt answered %v", enc.Data)
	}
	blob, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(ct, "vault:v1:"))
	if err != nil || len(blob) != 12+len("the quick brown fox")+16 {
		t.Errorf("ciphertext %q: %d bytes (%v), want nonce, ciphertext and tag", ct, len(blob), err)
	}
	dec := mustWrite(t, c, "transit/decrypt/orders", map[string]any{"ciphertext": ct})
	if str(dec, "plaintext") != b64("the quick brown fox") {
		t.Errorf("decrypt answered %v", dec.Data)
	}
	// An empty plaintext is one.
	empty := mustWrite(t, c, "transit/encrypt/orders", map[string]any{"plaintext": ""})
	if got := str(mustWrite(t, c, "transit/decrypt/orders", map[string]any{"ciphertext": str(empty, "ciphertext")}), "plaintext"); got != "" {
		t.Errorf("decrypt of an empty plaintext = %q", got)
	}

	// Older versions decrypt; encrypt takes the latest unless told.
	mustWrite(t, c, "transit/keys/orders/rotate", nil)
	if got := str(mustWrite(t, c, "transit/decrypt/orders", map[string]any{"ciphertext": ct}), "plaintext"); got != b64("the quick brown fox") {
		t.Errorf("decrypt of v1 after rotation = %q", got)
	}
	v2 := mustWrite(t, c, "transit/encrypt/orders", map[string]any{"plaintext": b64("x")})
	if !strings.HasPrefix(str(v2, "ciphertext"), "vault:v2:") || num(t, v2, "key_version") != 2 {
		t.Errorf("encrypt after rotation answered %v", v2.Data)
	}
	v1 := mustWrite(t, c, "transit/encrypt/orders", map[string]any{"plaintext": b64("x"), "key_version": 1})
	if !strings.HasPrefix(str(v1, "ciphertext"), "vault:v1:") {
		t.Errorf("encrypt with key_version 1 answered %v", v1.Data)
	}

	flipped := bytes.Clone(blob)
	flipped[len(flipped)-1] ^= 1 // a bit of the tag
	tampered := "vault:v1:" + base64.StdEncoding.EncodeToString(flipped)
	for _, tc := range []struct {
		name, path string
		data       map[string]any
		status     int
		want       string
	}{
		{"not base64", "transit/encrypt/orders", map[string]any{"plaintext": "***"}, 400, "illegal base64"},
		{"no plaintext", "transit/encrypt/orders", map[string]any{}, 400, "missing plaintext"},
		{"version too new for encrypt", "transit/encrypt/orders", map[string]any{"plaintext": b64("x"), "key_version": 3}, 400, "higher than the latest"},
		{"context", "transit/encrypt/orders", map[string]any{"plaintext": b64("x"), "context": b64("c")}, 400, "context is not supported"},
		{"other type on upsert", "transit/encrypt/new", map[string]any{"plaintext": b64("x"), "type": "chacha20-poly1305"}, 400, "aes256-gcm96"},
		{"garbage", "transit/decrypt/orders", map[string]any{"ciphertext": "garbage"}, 400, "invalid ciphertext: no prefix"},
		{"bad base64", "transit/decrypt/orders", map[string]any{"ciphertext": "vault:v1:***"}, 400, "could not decode base64"},
		{"tampered", "transit/decrypt/orders", map[string]any{"ciphertext": tampered}, 400, "message authentication failed"},
		{"too short", "transit/decrypt/orders", map[string]any{"ciphertext": "vault:v1:" + b64("short")}, 400, "too short"},
		{"version too new", "transit/decrypt/orders", map[string]any{"ciphertext": "vault:v9:" + strings.TrimPrefix(ct, "vault:v1:")}, 400, "version is too new"},
		{"another key's", "transit/decrypt/other", map[string]any{"ciphertext": ct}, 400, "not found"},
		{"no ciphertext", "transit/decrypt/orders", map[string]any{}, 400, "missing ciphertext"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Logical().Write(tc.path, tc.data)
			if status(err) != tc.status || !strings.Contains(errorsOf(err), tc.want) {
				t.Errorf("Write(%s, %v) = %v, want %d naming %q", tc.path, tc.data, err, tc.status, tc.want)
			}
		})
	}
	// A ciphertext of one key does not open with another.
	mustWrite(t, c, "transit/keys/other", nil)
	if _, err := c.Logical().Write("transit/decrypt/other", map[string]any{"ciphertext": ct}); status(err) != 400 ||
		!strings.Contains(errorsOf(err), "message authentication failed") {
		t.Errorf("decrypt with another key = %v", err)
	}

	// The minimum decryption version refuses older ciphertexts; the
	// minimum encryption version older key versions.
	mustWrite(t, c, "transit/keys/orders/config", map[string]any{"min_decryption_version": 2, "min_encryption_version": 2})
	if _, err := c.Logical().Write("transit/decrypt/orders", map[string]any{"ciphertext": ct}); status(err) != 400 || !strings.Contains(errorsOf(err), "too old") {
		t.Errorf("decrypt below min_decryption_version = %v", err)
	}
	if _, err := c.Logical().Write("transit/encrypt/orders", map[string]any{"plaintext": b64("x"), "key_version": 1}); status(err) != 400 ||
		!strings.Contains(errorsOf(err), "less than the minimum") {
		t.Errorf("encrypt below min_encryption_version = %v", err)
	}
}

func TestBatch(t *testing.T) {
	e := newEnv(t, kms.Options{})
	c := e.vault
	mustWrite(t, c, "transit/keys/batch", nil)
	in := []any{
		map[string]any{"plaintext": b64("one"), "reference": "a"},
		map[string]any{"plaintext": b64("two"), "reference": "b"},
		map[string]any{"plaintext": b64("three")},
	}
	enc := mustWrite(t, c, "transit/encrypt/batch", map[string]any{"batch_input": in})
	results, _ := enc.Data["batch_results"].([]any)
	if len(results) != 3 {
		t.Fatalf("batch_results = %v", enc.Data)
	}
	var cts []any
	for i, r := range results {
		m := r.(map[string]any)
		if !strings.HasPrefix(m["ciphertext"].(string), "vault:v1:") || m["key_version"].(json.Number).String() != "1" || m["error"] != nil {
			t.Errorf("item %d = %v", i, m)
		}
		cts = append(cts, map[string]any{"ciphertext": m["ciphertext"], "reference": m["reference"]})
	}
	if results[0].(map[string]any)["reference"] != "a" || results[2].(map[string]any)["reference"] != "" {
		t.Errorf("references = %v", results)
	}
	dec := mustWrite(t, c, "transit/decrypt/batch", map[string]any{"batch_input": cts})
	for i, want := range []string{"one", "two", "three"} {
		if got := dec.Data["batch_results"].([]any)[i].(map[string]any)["plaintext"]; got != b64(want) {
			t.Errorf("decrypted item %d = %v, want %q", i, got, b64(want))
		}
	}

	// One bad item fails itself, not the others, and the batch answers
	// 400 with every item's result, as Vault answers; with a
	// partial_failure_response_code, that code.
	bad := []any{map[string]any{"plaintext": b64("ok")}, map[string]any{"plaintext": "%%%", "reference": "bad"}}
	code, body := rawWrite(t, c, "transit/encrypt/batch", map[string]any{"batch_input": bad})
	items := body["data"].(map[string]any)["batch_results"].([]any)
	if code != 400 || !strings.HasPrefix(items[0].(map[string]any)["ciphertext"].(string), "vault:v1:") ||
		!strings.Contains(items[1].(map[string]any)["error"].(string), "illegal base64") || items[1].(map[string]any)["reference"] != "bad" {
		t.Errorf("partly bad batch = %d %v", code, body)
	}
	code, _ = rawWrite(t, c, "transit/encrypt/batch", map[string]any{"batch_input": bad, "partial_failure_response_code": 207})
	if code != 207 {
		t.Errorf("partly bad batch with partial_failure_response_code 207 = %d", code)
	}
	code, body = rawWrite(t, c, "transit/decrypt/batch", map[string]any{"batch_input": []any{
		map[string]any{"ciphertext": "vault:v1:AAAA"}, map[string]any{"ciphertext": "nope"}}, "partial_failure_response_code": 200})
	if code != 400 { // every item failed: the override does not apply
		t.Errorf("all-bad decrypt batch = %d %v", code, body)
	}
	if _, err := c.Logical().Write("transit/encrypt/batch", map[string]any{"batch_input": []any{}}); status(err) != 400 ||
		!strings.Contains(errorsOf(err), "missing batch input") {
		t.Errorf("empty batch = %v", err)
	}
	if _, err := c.Logical().Write("transit/encrypt/batch", map[string]any{"batch_input": "x"}); status(err) != 400 {
		t.Errorf("batch_input not an array = %v", err)
	}
}

func TestRewrapAndDataKey(t *testing.T) {
	e := newEnv(t, kms.Options{})
	c := e.vault
	old := str(mustWrite(t, c, "transit/encrypt/r", map[string]any{"plaintext": b64("secret")}), "ciphertext")
	mustWrite(t, c, "transit/keys/r/rotate", nil)
	rw := mustWrite(t, c, "transit/rewrap/r", map[string]any{"ciphertext": old})
	if !strings.HasPrefix(str(rw, "ciphertext"), "vault:v2:") || num(t, rw, "key_version") != 2 {
		t.Fatalf("rewrap answered %v", rw.Data)
	}
	if got := str(mustWrite(t, c, "transit/decrypt/r", map[string]any{"ciphertext": str(rw, "ciphertext")}), "plaintext"); got != b64("secret") {
		t.Errorf("decrypt of the rewrapped = %q", got)
	}
	batch := mustWrite(t, c, "transit/rewrap/r", map[string]any{"batch_input": []any{
		map[string]any{"ciphertext": old, "reference": "x"}, map[string]any{"ciphertext": old, "key_version": 1}}})
	items := batch.Data["batch_results"].([]any)
	if !strings.HasPrefix(items[0].(map[string]any)["ciphertext"].(string), "vault:v2:") || items[0].(map[string]any)["reference"] != "x" ||
		!strings.HasPrefix(items[1].(map[string]any)["ciphertext"].(string), "vault:v1:") {
		t.Errorf("rewrap batch = %v", items)
	}
	if _, err := c.Logical().Write("transit/rewrap/r", map[string]any{"ciphertext": "vault:v1:xx"}); status(err) != 400 {
		t.Errorf("rewrap of a bad ciphertext = %v", err)
	}

	for _, bits := range []int{0, 128, 256, 512} {
		data := map[string]any{}
		if bits != 0 {
			data["bits"] = bits
		}
		dk := mustWrite(t, c, "transit/datakey/plaintext/r", data)
		plain, err := base64.StdEncoding.DecodeString(str(dk, "plaintext"))
		if want := max(bits, 256) / 8; bits == 128 && len(plain) != 16 || bits != 128 && len(plain) != want || err != nil {
			t.Errorf("datakey bits %d: plaintext of %d bytes (%v)", bits, len(plain), err)
		}
		// The ciphertext decrypts to the key itself, as Vault's does.
		if got := str(mustWrite(t, c, "transit/decrypt/r", map[string]any{"ciphertext": str(dk, "ciphertext")}), "plaintext"); got != str(dk, "plaintext") {
			t.Errorf("decrypt of the data key = %q, want %q", got, str(dk, "plaintext"))
		}
	}
	wrapped := mustWrite(t, c, "transit/datakey/wrapped/r", nil)
	if _, ok := wrapped.Data["plaintext"]; ok || !strings.HasPrefix(str(wrapped, "ciphertext"), "vault:v2:") || num(t, wrapped, "key_version") != 2 {
		t.Errorf("wrapped datakey answered %v", wrapped.Data)
	}
	if _, err := c.Logical().Write("transit/datakey/plaintext/r", map[string]any{"bits": 100}); status(err) != 400 || !strings.Contains(errorsOf(err), "bits") {
		t.Errorf("datakey of 100 bits = %v", err)
	}
	if _, err := c.Logical().Write("transit/datakey/other/r", nil); status(err) != 400 || !strings.Contains(errorsOf(err), "invalid type") {
		t.Errorf("datakey of type other = %v", err)
	}
	if _, err := c.Logical().Write("transit/datakey/plaintext/none", nil); status(err) != 400 || !strings.Contains(errorsOf(err), "not found") {
		t.Errorf("datakey of an unknown key = %v", err)
	}
}

// TestPermissions: each route needs its flag (403 without, as Vault
// answers a missing capability); a bad credential is 403 too.
func TestPermissions(t *testing.T) {
	e := newEnv(t, kms.Options{})
	ct := str(mustWrite(t, e.vault, "transit/encrypt/p", map[string]any{"plaintext": b64("x")}), "ciphertext")
	calls := []struct {
		flag string
		do   func(c *vault.Client) error
	}{
		{"keyring.p.create", func(c *vault.Client) error { _, err := c.Logical().Write("transit/keys/p", nil); return err }},
		{"keyring.p.read", func(c *vault.Client) error { _, err := c.Logical().Read("transit/keys/p"); return err }},
		{"keyring.*.read", func(c *vault.Client) error { _, err := c.Logical().List("transit/keys"); return err }},
		{"keyring.p.rotate", func(c *vault.Client) error { _, err := c.Logical().Write("transit/keys/p/rotate", nil); return err }},
		{"keyring.p.config", func(c *vault.Client) error {
			_, err := c.Logical().Write("transit/keys/p/config", map[string]any{"deletion_allowed": false})
			return err
		}},
		{"keyring.p.encrypt", func(c *vault.Client) error {
			_, err := c.Logical().Write("transit/encrypt/p", map[string]any{"plaintext": b64("y")})
			return err
		}},
		{"keyring.p.decrypt", func(c *vault.Client) error {
			_, err := c.Logical().Write("transit/decrypt/p", map[string]any{"ciphertext": ct})
			return err
		}},
		{"keyring.p.encrypt", func(c *vault.Client) error {
			_, err := c.Logical().Write("transit/rewrap/p", map[string]any{"ciphertext": ct})
			return err
		}},
		{"keyring.p.encrypt", func(c *vault.Client) error { _, err := c.Logical().Write("transit/datakey/wrapped/p", nil); return err }},
		{"keyring.p.delete", func(c *vault.Client) error { _, err := c.Logical().Delete("transit/keys/p"); return err }},
	}
	for _, call := range calls {
		without := e.keyWith(t, "keyring.q.*")
		if err := call.do(without); status(err) != 403 || !strings.Contains(errorsOf(err), call.flag) {
			t.Errorf("%s without it = %v (%d), want 403 naming it", call.flag, err, status(err))
		}
		with := e.keyWith(t, call.flag)
		if err := call.do(with); status(err) == 403 {
			t.Errorf("%s with it = %v", call.flag, err)
		}
	}
	for _, secret := range []string{"", "rk_nope", e.RootKey + "x"} {
		if _, err := e.client(t, secret).Logical().Write("transit/encrypt/p", map[string]any{"plaintext": b64("y")}); status(err) != 403 ||
			errorsOf(err) != "permission denied" {
			t.Errorf("credential %q = %v", secret, err)
		}
	}
	// The credential may come as Authorization: Bearer too.
	req, _ := http.NewRequest(http.MethodPost, e.url+"/v1/transit/encrypt/p", strings.NewReader(`{"plaintext":"eA=="}`))
	req.Header.Set("Authorization", "Bearer "+e.RootKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("Authorization: Bearer = %v, %v", resp, err)
	} else {
		resp.Body.Close()
	}
	// A User's access token is a credential as an API key is, with the
	// User's flags.
	u, err := e.Service.CreateUser(e.RootCtx, kms.UserInput{Username: "ada", Email: "ada@example.com", FirstName: "Ada", LastName: "L",
		Flags: kms.Flags{"keyring.p.encrypt": true}})
	if err != nil {
		t.Fatal(err)
	}
	login, err := e.Service.Login(context.Background(), kms.LoginInput{Username: "ada", Password: u.Password})
	if err != nil {
		t.Fatal(err)
	}
	user := e.client(t, login.AccessToken)
	if _, err := user.Logical().Write("transit/encrypt/p", map[string]any{"plaintext": b64("y")}); err != nil {
		t.Errorf("encrypt with a User's access token = %v", err)
	}
	if _, err := user.Logical().Write("transit/decrypt/p", map[string]any{"ciphertext": ct}); status(err) != 403 {
		t.Errorf("decrypt with a User's access token without the flag = %v", err)
	}
	// Encrypting with a key that does not exist makes it only for a
	// caller that may create it.
	enc := e.keyWith(t, "keyring.fresh.encrypt")
	if _, err := enc.Logical().Write("transit/encrypt/fresh", map[string]any{"plaintext": b64("x")}); status(err) != 403 ||
		!strings.Contains(errorsOf(err), "keyring.fresh.create") {
		t.Errorf("encrypt making a key without create = %v", err)
	}
	both := e.keyWith(t, "keyring.fresh.encrypt", "keyring.fresh.create")
	if _, err := both.Logical().Write("transit/encrypt/fresh", map[string]any{"plaintext": b64("x")}); err != nil {
		t.Errorf("encrypt making a key with create = %v", err)
	}
	// A /ks ring is no transit key.
	if _, err := e.Service.CreateKeyRing(e.RootCtx, kms.CreateKeyRingInput{Name: "ksring"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.vault.Logical().Write("transit/encrypt/ksring", map[string]any{"plaintext": b64("x")}); status(err) != 400 ||
		!strings.Contains(errorsOf(err), "/ks ring") {
		t.Errorf("encrypt with a /ks ring's name = %v", err)
	}
	if s, err := e.vault.Logical().Read("transit/keys/ksring"); s != nil || err != nil {
		t.Errorf("read of a /ks ring as a transit key = %v, %v; want 404", s, err)
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
	k, err := e.Service.GetTransitKey(e.RootCtx, name)
	if err != nil || k.KeyIDs[v] == "" {
		t.Fatalf("GetTransitKey(%s) = %+v, %v; want version %d", name, k, err, v)
	}
	return k.KeyIDs[v]
}

// TestActivity: every call is an activity record under a transit action,
// naming the ring, the key and the version, and no record and no log line
// holds a plaintext; the usage counts count transit's uses.
func TestActivity(t *testing.T) {
	e := newEnv(t, kms.Options{})
	c := e.vault
	secret := "plaintext-that-must-not-leak"
	ct := str(mustWrite(t, c, "transit/encrypt/audit", map[string]any{"plaintext": b64(secret)}), "ciphertext")
	mustWrite(t, c, "transit/decrypt/audit", map[string]any{"ciphertext": ct})
	mustWrite(t, c, "transit/rewrap/audit", map[string]any{"ciphertext": ct})
	dk := mustWrite(t, c, "transit/datakey/plaintext/audit", nil)
	reader := e.keyWith(t, "keyring.audit.read")
	if _, err := reader.Logical().Write("transit/decrypt/audit", map[string]any{"ciphertext": ct}); status(err) != 403 {
		t.Fatalf("decrypt without the flag = %v", err)
	}
	list, err := e.Service.SearchActivity(e.RootCtx, kms.ActivityFilter{Ring: "audit"}, kms.PageRequest{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	all, _ := json.Marshal(list.Data)
	for _, a := range list.Data {
		actions = append(actions, a.Action)
		switch a.Action {
		case "transit.encrypt", "transit.decrypt", "transit.rewrap", "transit.datakey":
			if a.Valid && (a.Props["keyId"] == nil || a.Props["version"] == nil || a.Props["ringId"] == nil) {
				t.Errorf("record %s lacks the key: %v", a.Action, a.Props)
			}
		}
	}
	want := []string{"transit.key.create", "transit.encrypt", "transit.decrypt", "transit.rewrap", "transit.datakey", "transit.decrypt"}
	if !slices.Equal(actions, want) {
		t.Errorf("actions = %q, want %q", actions, want)
	}
	if last := list.Data[len(list.Data)-1]; last.Valid || last.Props["result"] != "permission_denied" {
		t.Errorf("the refused decrypt's record = %+v", last)
	}
	for _, leak := range []string{secret, b64(secret), str(dk, "plaintext")} {
		if bytes.Contains(all, []byte(leak)) {
			t.Errorf("an activity record holds %q", leak)
		}
		if strings.Contains(e.logs.String(), leak) {
			t.Errorf("the log holds %q", leak)
		}
	}
	// Usage: encrypt, rewrap and datakey encrypt with v1; decrypt and
	// rewrap decrypt with it.
	u, err := e.Service.AsymKeyUsage(e.RootCtx, kms.RingRef{Name: "audit"}, keyID(t, e, "audit", 1))
	if err != nil {
		t.Fatal(err)
	}
	if u.EncryptCount != 3 || u.DecryptCount != 2 {
		t.Errorf("usage = %d encrypts, %d decrypts; want 3 and 2", u.EncryptCount, u.DecryptCount)
	}
}

// TestRateLimits: each item of a batch is a call of the credential's
// limit; a batch past the burst is 400, a call past the rate 429.
func TestRateLimits(t *testing.T) {
	e := newEnv(t, kms.Options{RateLimits: kms.RateLimits{PerAPIKey: kms.Rate{PerSecond: 1, Burst: 3}}})
	c := e.vault
	mustWrite(t, c, "transit/keys/rl", nil)
	many := []any{}
	for range 4 {
		many = append(many, map[string]any{"plaintext": b64("x")})
	}
	if _, err := c.Logical().Write("transit/encrypt/rl", map[string]any{"batch_input": many}); status(err) != 400 || !strings.Contains(errorsOf(err), "burst") {
		t.Errorf("batch past the burst = %v", err)
	}
	var err error
	for range 5 {
		if _, err = c.Logical().Write("transit/encrypt/rl", map[string]any{"plaintext": b64("x")}); err != nil {
			break
		}
	}
	if status(err) != 429 {
		t.Errorf("calls past the rate = %v, want 429", err)
	}
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

// TestMount: the engine serves under another mount, and the handler
// under a prefix of an application's mux.
func TestMount(t *testing.T) {
	e := newEnv(t, kms.Options{})
	_, url := kmstest.Serve(t, http.StripPrefix("/kms", transit.New(e.Service, transit.Options{Mount: "secrets"})), "")
	cfg := vault.DefaultConfig()
	cfg.Address, cfg.MaxRetries = url+"/kms", 0
	c, err := vault.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.SetToken(e.RootKey)
	if _, err := c.Logical().Write("secrets/encrypt/m", map[string]any{"plaintext": b64("x")}); err != nil {
		t.Errorf("encrypt at mount secrets = %v", err)
	}
	if _, err := c.Logical().Write("transit/encrypt/m", map[string]any{"plaintext": b64("x")}); status(err) != 404 {
		t.Errorf("encrypt at the default mount = %v, want 404", err)
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

// TestLogRedactsSecrets: a path segment shaped like a secret (a token
// pasted in the path by mistake) is not logged; nor is a credential.
func TestLogRedactsSecrets(t *testing.T) {
	e := newEnv(t, kms.Options{})
	e.vault.Logical().Write("transit/encrypt/"+e.RootKey, map[string]any{"plaintext": b64("x")})
	if strings.Contains(e.logs.String(), e.RootKey) {
		t.Errorf("the log holds the secret:\n%s", e.logs.String())
	}
	if !strings.Contains(e.logs.String(), "<redacted>") {
		t.Errorf("the log line does not show the redaction:\n%s", e.logs.String())
	}
}
