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
