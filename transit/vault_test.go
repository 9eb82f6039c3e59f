package transit_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/kmstest"
	"github.com/ringkms/kms/transit"
)

// env is a Service on an in-memory store whose transit handler is served
// over loopback HTTP, and a caller of it acting as the root API key.
type env struct {
	*kmstest.Env
	url   string
	root  *caller
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
	e.root = e.as(e.RootKey)
	return e
}

// as is a caller of e's service acting with secret.
func (e *env) as(secret string) *caller { return &caller{url: e.url, token: secret} }

// keyWith returns a caller acting as a new API key with flags.
func (e *env) keyWith(t *testing.T, flags ...string) *caller {
	t.Helper()
	f := kms.Flags{}
	for _, name := range flags {
		f[name] = true
	}
	k, err := e.Service.CreateAPIKey(e.RootCtx, kms.APIKeyInput{AccountID: kms.PrincipalFrom(e.RootCtx).AccountID, Flags: f})
	if err != nil {
		t.Fatalf("CreateAPIKey(%v) = %v", flags, err)
	}
	return e.as(k.Key)
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// TestPermissions: each route needs its flag (403 without, as Vault
// answers a missing capability); a bad credential is 403 too.
func TestPermissions(t *testing.T) {
	e := newEnv(t, kms.Options{})
	ct := e.root.mustWrite(t, "transit/encrypt/p", map[string]any{"plaintext": b64("x")}).str("ciphertext")
	calls := []struct {
		flag, method, path string
		data               map[string]any
	}{
		{"keyring.p.create", http.MethodPut, "transit/keys/p", nil},
		{"keyring.p.read", http.MethodGet, "transit/keys/p", nil},
		{"keyring.*.read", http.MethodGet, "transit/keys?list=true", nil},
		{"keyring.p.rotate", http.MethodPut, "transit/keys/p/rotate", nil},
		{"keyring.p.config", http.MethodPut, "transit/keys/p/config", map[string]any{"deletion_allowed": false}},
		{"keyring.p.encrypt", http.MethodPut, "transit/encrypt/p", map[string]any{"plaintext": b64("y")}},
		{"keyring.p.decrypt", http.MethodPut, "transit/decrypt/p", map[string]any{"ciphertext": ct}},
		{"keyring.p.encrypt", http.MethodPut, "transit/rewrap/p", map[string]any{"ciphertext": ct}},
		{"keyring.p.encrypt", http.MethodPut, "transit/datakey/wrapped/p", nil},
		{"keyring.p.delete", http.MethodDelete, "transit/keys/p", nil},
	}
	for _, call := range calls {
		without := e.keyWith(t, "keyring.q.*")
		if a := without.do(t, call.method, call.path, call.data); a.status != 403 || !strings.Contains(a.errs(), call.flag) {
			t.Errorf("%s without it = %v, want 403 naming it", call.flag, a)
		}
		with := e.keyWith(t, call.flag)
		if a := with.do(t, call.method, call.path, call.data); a.status == 403 {
			t.Errorf("%s with it = %v", call.flag, a)
		}
	}
	for _, secret := range []string{"", "rk_nope", e.RootKey + "x"} {
		if a := e.as(secret).write(t, "transit/encrypt/p", map[string]any{"plaintext": b64("y")}); a.status != 403 ||
			a.errs() != "permission denied" {
			t.Errorf("credential %q = %v", secret, a)
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
	user := e.as(login.AccessToken)
	if a := user.write(t, "transit/encrypt/p", map[string]any{"plaintext": b64("y")}); a.status != 200 {
		t.Errorf("encrypt with a User's access token = %v", a)
	}
	if a := user.write(t, "transit/decrypt/p", map[string]any{"ciphertext": ct}); a.status != 403 {
		t.Errorf("decrypt with a User's access token without the flag = %v", a)
	}
	// Encrypting with a key that does not exist makes it only for a
	// caller that may create it.
	enc := e.keyWith(t, "keyring.fresh.encrypt")
	if a := enc.write(t, "transit/encrypt/fresh", map[string]any{"plaintext": b64("x")}); a.status != 403 ||
		!strings.Contains(a.errs(), "keyring.fresh.create") {
		t.Errorf("encrypt making a key without create = %v", a)
	}
	both := e.keyWith(t, "keyring.fresh.encrypt", "keyring.fresh.create")
	if a := both.write(t, "transit/encrypt/fresh", map[string]any{"plaintext": b64("x")}); a.status != 200 {
		t.Errorf("encrypt making a key with create = %v", a)
	}
	// A /ks ring is no transit key.
	if _, err := e.Service.CreateKeyRing(e.RootCtx, kms.CreateKeyRingInput{Name: "ksring"}); err != nil {
		t.Fatal(err)
	}
	if a := e.root.write(t, "transit/encrypt/ksring", map[string]any{"plaintext": b64("x")}); a.status != 400 ||
		!strings.Contains(a.errs(), "/ks ring") {
		t.Errorf("encrypt with a /ks ring's name = %v", a)
	}
	if a := e.root.read(t, "transit/keys/ksring"); a.status != 404 || a.data != nil {
		t.Errorf("read of a /ks ring as a transit key = %v; want 404", a)
	}
}

// TestActivity: every call is an activity record under a transit action,
// naming the ring, the key and the version, and no record and no log line
// holds a plaintext; the usage counts count transit's uses.
func TestActivity(t *testing.T) {
	e := newEnv(t, kms.Options{})
	c := e.root
	secret := "plaintext-that-must-not-leak"
	ct := c.mustWrite(t, "transit/encrypt/audit", map[string]any{"plaintext": b64(secret)}).str("ciphertext")
	c.mustWrite(t, "transit/decrypt/audit", map[string]any{"ciphertext": ct})
	c.mustWrite(t, "transit/rewrap/audit", map[string]any{"ciphertext": ct})
	dk := c.mustWrite(t, "transit/datakey/plaintext/audit", nil)
	reader := e.keyWith(t, "keyring.audit.read")
	if a := reader.write(t, "transit/decrypt/audit", map[string]any{"ciphertext": ct}); a.status != 403 {
		t.Fatalf("decrypt without the flag = %v", a)
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
	for _, leak := range []string{secret, b64(secret), dk.str("plaintext")} {
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
	c := &caller{url: url + "/kms", token: e.RootKey}
	if a := c.write(t, "secrets/encrypt/m", map[string]any{"plaintext": b64("x")}); a.status != 200 {
		t.Errorf("encrypt at mount secrets = %v", a)
	}
	if a := c.write(t, "transit/encrypt/m", map[string]any{"plaintext": b64("x")}); a.status != 404 {
		t.Errorf("encrypt at the default mount = %v, want 404", a)
	}
}

// TestLogRedactsSecrets: a path segment shaped like a secret (a token
// pasted in the path by mistake) is not logged; nor is a credential.
func TestLogRedactsSecrets(t *testing.T) {
	e := newEnv(t, kms.Options{})
	e.root.write(t, "transit/encrypt/"+e.RootKey, map[string]any{"plaintext": b64("x")})
	if strings.Contains(e.logs.String(), e.RootKey) {
		t.Errorf("the log holds the secret:\n%s", e.logs.String())
	}
	if !strings.Contains(e.logs.String(), "<redacted>") {
		t.Errorf("the log line does not show the redaction:\n%s", e.logs.String())
	}
}
