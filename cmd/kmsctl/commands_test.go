package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/envelope"
)

// decodeJSON decodes the -json output of r into v.
func decodeJSON(t testing.TB, r result, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(r.stdout), v); err != nil {
		t.Fatalf("-json output does not decode into %T: %v\n%s", v, err, r.stdout)
	}
}

// newRingServer returns a new server with the ring name, made by
// createRing, and the environment of its tests that names the ring's
// private key file.
func newRingServer(t testing.TB, name string) (*server, env) {
	t.Helper()
	s := newServer(t, kms.Options{})
	return s, s.env.with("KMS_PRIVATE_KEY_FILE", createRing(t, s, name))
}

// createRing creates a ring with kmsctl and returns the file of its
// private key.
func createRing(t testing.TB, s *server, name string) string {
	t.Helper()
	keyFile := filepath.Join(t.TempDir(), name+".key")
	r := kmsctl(t, s.env, "", "ring", "create", "-private-key-out", keyFile, name).want(t, 0, "ring create")
	if !strings.Contains(r.stdout, "written to "+keyFile) {
		t.Errorf("ring create printed:\n%s", r.stdout)
	}
	st, err := os.Stat(keyFile)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("private key file: %v, %v; want mode 0600", st, err)
	}
	return keyFile
}

// activeKey is the ID of the active key of a ring, as ring show -json
// gives it.
func activeKey(t testing.TB, s *server, ring string) string {
	t.Helper()
	var out struct{ Ring kms.KeyRing }
	decodeJSON(t, kmsctl(t, s.env, "", "ring", "show", ring, "-json").want(t, 0, "ring show"), &out)
	return out.Ring.ActiveKey
}

func TestRingOutput(t *testing.T) {
	s := newServer(t, kms.Options{})
	createRing(t, s, "payments")

	// The private key, printed when not written to a file, opens the
	// ring's keys.
	r := kmsctl(t, s.env, "", "-json", "ring", "create", "-kem", "x25519", "documents").want(t, 0, "ring create -json")
	var created kms.CreateKeyRingResult
	decodeJSON(t, r, &created)
	if created.Ring.Name != "documents" || created.PrivateKey == "" || created.Key == nil {
		t.Fatalf("ring create -json = %+v", created)
	}
	if _, err := kms.ParsePrivateKey([]byte(created.PrivateKey)); err != nil {
		t.Fatalf("the printed private key does not parse: %v", err)
	}
	// -private-key-out refuses a file that exists: a key is never lost
	// to an overwrite, and no ring is made.
	exists := writeFile(t, t.TempDir(), "k", []byte("keep"))
	kmsctl(t, s.env, "", "ring", "create", "-private-key-out", exists, "third").want(t, 1, "ring create over a file")
	if b, _ := os.ReadFile(exists); string(b) != "keep" {
		t.Errorf("the existing file holds %q", b)
	}
	kmsctl(t, s.env, "", "ring", "show", "third").want(t, 1, "ring show of a ring not made")

	r = kmsctl(t, s.env, "", "ring", "list").want(t, 0, "ring list")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "NAME") || !strings.HasPrefix(lines[1], "documents ") || !strings.HasPrefix(lines[2], "payments ") {
		t.Errorf("ring list =\n%s", r.stdout)
	}

	// Paging: one item a page, the next cursor on stderr; -all gets all.
	r = kmsctl(t, s.env, "", "ring", "list", "-limit", "1").want(t, 0, "ring list -limit 1")
	if strings.Count(r.stdout, "\n") != 2 || !strings.Contains(r.stderr, "more: -cursor ") {
		t.Errorf("ring list -limit 1: stdout\n%s\nstderr %q", r.stdout, r.stderr)
	}
	var page kms.List[*kms.KeyRing]
	decodeJSON(t, kmsctl(t, s.env, "", "ring", "list", "-limit", "1", "-all", "-json").want(t, 0, "ring list -all"), &page)
	if len(page.Data) != 2 || page.Pagination.HasMore || page.Pagination.Count != 2 {
		t.Errorf("ring list -limit 1 -all -json = %+v", page)
	}

	// Configuration: shown, changed member by member, from a file.
	r = kmsctl(t, s.env, "", "ring", "config", "payments", "-max-encrypt-count", "5", "-props", `{"team":"pay"}`).want(t, 0, "ring config set")
	if !strings.Contains(r.stdout, "max encrypt count:  5") || !strings.Contains(r.stdout, `{"team":"pay"}`) {
		t.Errorf("ring config set printed:\n%s", r.stdout)
	}
	r = kmsctl(t, s.env, "", "ring", "config", "payments", "-rotation-period", "720h0m0s").want(t, 0, "ring config rotation period")
	if !strings.Contains(r.stdout, "rotation period:    720h") || !strings.Contains(r.stdout, "max encrypt count:  5") {
		t.Errorf("ring config -rotation-period printed:\n%s", r.stdout)
	}
	kmsctl(t, s.env, "", "ring", "config", "payments", "-rotation-period", "10m").want(t, 1, "ring config with a short rotation period")
	r = kmsctl(t, s.env, "", "ring", "config", "payments", "-key-props", `{"tier":1}`, "-json").want(t, 0, "ring config key props")
	var cfg struct{ Config kms.KeyRingConfig }
	decodeJSON(t, r, &cfg)
	if cfg.Config.Algos.AES256.MaxEncryptCount != 5 || cfg.Config.Props["team"] != "pay" || cfg.Config.Key.Props["tier"] != 1.0 {
		t.Errorf("ring config after two changes = %+v", cfg.Config)
	}
	file := writeFile(t, t.TempDir(), "cfg.json", []byte(r.stdout))
	kmsctl(t, s.env, "", "ring", "config", "documents", "-file", file).want(t, 0, "ring config -file")
	decodeJSON(t, kmsctl(t, s.env, "", "ring", "config", "documents", "-json").want(t, 0, "ring config show"), &cfg)
	if cfg.Config.Algos.AES256.MaxEncryptCount != 5 {
		t.Errorf("ring config from the file = %+v", cfg.Config)
	}
	bad := writeFile(t, t.TempDir(), "bad.json", []byte(`{"algos":{"aes256":{"maxEncrytCount":3}}}`))
	kmsctl(t, s.env, "", "ring", "config", "documents", "-file", bad).want(t, 1, "ring config with a misspelt member")

	// Rotate, then the service's errors: message and code, exit 1.
	var rotated struct{ Key kms.Key }
	decodeJSON(t, kmsctl(t, s.env, "", "-json", "ring", "rotate", "payments").want(t, 0, "ring rotate"), &rotated)
	if rotated.Key.ID == "" || rotated.Key.ID == created.Key.ID {
		t.Errorf("ring rotate -json = %+v", rotated)
	}
	r = kmsctl(t, s.env, "", "ring", "show", "nosuch").want(t, 1, "ring show of an unknown ring")
	if !strings.HasPrefix(r.stderr, "kmsctl: ") || !strings.Contains(r.stderr, "(not_found)") {
		t.Errorf("ring show nosuch: stderr %q", r.stderr)
	}
	kmsctl(t, s.env, "", "ring", "delete", "-yes", "documents").want(t, 0, "ring delete")
	kmsctl(t, s.env, "", "ring", "show", "documents").want(t, 1, "ring show after delete")
}

func TestKeyCommands(t *testing.T) {
	s := newServer(t, kms.Options{})
	createRing(t, s, "payments")
	first := activeKey(t, s, "payments")

	r := kmsctl(t, s.env, "", "key", "disable", first, "-ring", "payments").want(t, 1, "disable the active key")
	if !strings.Contains(r.stderr, "rotate") || !strings.Contains(r.stderr, "(invalid)") {
		t.Errorf("disable the active key: stderr %q", r.stderr)
	}
	r = kmsctl(t, s.env, "", "key", "disable", "-rotate", "-ring", "payments", first).want(t, 0, "disable -rotate")
	if !strings.Contains(r.stdout, "state:          disabled") {
		t.Errorf("key disable printed:\n%s", r.stdout)
	}
	var keys kms.List[*kms.Key]
	decodeJSON(t, kmsctl(t, s.env, "", "key", "list", "-ring", "payments", "-json").want(t, 0, "key list"), &keys)
	if len(keys.Data) != 2 || keys.Data[0].ID != first || keys.Data[0].State != kms.KeyDisabled || keys.Data[1].State != kms.KeyEnabled {
		t.Fatalf("key list = %+v", keys.Data)
	}
	kmsctl(t, s.env, "", "key", "enable", "-ring", "payments", first).want(t, 0, "key enable")
	r = kmsctl(t, s.env, "", "key", "destroy", "-ring", "payments", "-after", "48h", first).want(t, 0, "key destroy")
	if !strings.Contains(r.stdout, "destroy_scheduled") {
		t.Errorf("key destroy printed:\n%s", r.stdout)
	}
	kmsctl(t, s.env, "", "key", "cancel-destroy", "-ring", "payments", first).want(t, 0, "key cancel-destroy")
	kmsctl(t, s.env, "", "key", "enable", "-ring", "payments", first).want(t, 0, "key enable")
	var usage kms.KeyUsage
	decodeJSON(t, kmsctl(t, s.env, "", "key", "usage", "-ring", "payments", first, "-json").want(t, 0, "key usage"), &usage)
	if usage.KeyID != first {
		t.Errorf("key usage = %+v", usage)
	}
	r = kmsctl(t, s.env, "", "key", "hashes", "-ring", "payments", first).want(t, 0, "key hashes")
	if !strings.HasPrefix(r.stdout, "HASH") {
		t.Errorf("key hashes printed:\n%s", r.stdout)
	}
	r = kmsctl(t, s.env, "", "key", "show", "-ring", "payments", first).want(t, 0, "key show")
	if !strings.Contains(r.stdout, "id:             "+first) {
		t.Errorf("key show printed:\n%s", r.stdout)
	}
}

func TestEncryptDecrypt(t *testing.T) {
	s := newServer(t, kms.Options{})
	keyFile := createRing(t, s, "files")
	dir := t.TempDir()
	plain, in, sealed := plainFile(t, dir, 3*envelope.ChunkSize+123)

	r := kmsctl(t, s.env, "", "encrypt", "-ring", "files", "-private-key", keyFile, "-ad", "plain", "-asset-data", `{"name":"plain"}`,
		"-in", in, "-out", sealed).want(t, 0, "encrypt to a file")
	if !strings.Contains(r.stdout, "hash:") || !strings.Contains(r.stdout, "bytes:  "+strconv.Itoa(len(plain))) {
		t.Errorf("encrypt printed:\n%s", r.stdout)
	}
	out := filepath.Join(dir, "plain.out")
	kmsctl(t, s.env, "", "decrypt", "-private-key", keyFile, "-ad", "plain", "-in", sealed, "-out", out).want(t, 0, "decrypt to a file")
	if got, _ := os.ReadFile(out); !bytes.Equal(got, plain) {
		t.Fatalf("decrypt gave %d bytes, not the %d encrypted", len(got), len(plain))
	}

	// Standard input and output, the private key from the environment;
	// the summary then goes to stderr, as JSON with -json.
	e := s.env.with("KMS_PRIVATE_KEY_FILE", keyFile)
	r = kmsctl(t, e, string(plain), "-json", "encrypt", "-ring", "files").want(t, 0, "encrypt stdin to stdout")
	var res kms.EncryptResult
	if err := json.Unmarshal([]byte(r.stderr), &res); err != nil || res.Hash == "" {
		t.Fatalf("encrypt to stdout: stderr %q is not the encrypt answer (%v)", r.stderr, err)
	}
	envBytes := r.stdout
	r = kmsctl(t, e, envBytes, "decrypt").want(t, 0, "decrypt stdin to stdout")
	if r.stdout != string(plain) {
		t.Fatalf("decrypt to stdout gave %d bytes, want %d", len(r.stdout), len(plain))
	}

	// A flipped bit in the last chunk: exit 1, nothing at -out; on
	// stdout, the chunks before it and a warning.
	tampered := []byte(envBytes)
	tampered[len(tampered)-5] ^= 1
	bad := writeFile(t, dir, "bad.rkms", tampered)
	badOut := filepath.Join(dir, "bad.out")
	r = kmsctl(t, e, "", "decrypt", "-in", bad, "-out", badOut).want(t, 1, "decrypt a tampered envelope")
	if !strings.Contains(r.stderr, "fails authentication") {
		t.Errorf("tampered: stderr %q", r.stderr)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 4 { // plain, plain.rkms, plain.out, bad.rkms
		t.Errorf("decrypt of a tampered envelope left files: %v", entries)
	}
	r = kmsctl(t, e, string(tampered), "decrypt").want(t, 1, "decrypt a tampered envelope to stdout")
	if !strings.Contains(r.stderr, "partial: discard them") || len(r.stdout) != 3*envelope.ChunkSize {
		t.Errorf("tampered to stdout: %d bytes out, stderr %q", len(r.stdout), r.stderr)
	}

	// Other associated data, or another ring's private key: exit 1.
	kmsctl(t, e, "", "decrypt", "-ad", "other", "-in", sealed).want(t, 1, "decrypt with other associated data")
	other := createRing(t, s, "other")
	kmsctl(t, s.env, "", "decrypt", "-private-key", other, "-ad", "plain", "-in", sealed).want(t, 1, "decrypt with another ring's key")

	// The private key from standard input, the envelope from a file.
	pk, _ := os.ReadFile(keyFile)
	r = kmsctl(t, s.env, string(pk), "decrypt", "-private-key", "-", "-ad", "plain", "-in", sealed, "-out", out, "-force").want(t, 0, "decrypt with the key on stdin")
	if !strings.Contains(r.stdout, "ring:   files") {
		t.Errorf("decrypt printed:\n%s", r.stdout)
	}
}

func TestAPIKeyAccountUser(t *testing.T) {
	s := newServer(t, kms.Options{})
	var acct kms.Account
	decodeJSON(t, kmsctl(t, s.env, "", "account", "create", "-notes", "a customer", "-json", "acme").want(t, 0, "account create"), &acct)
	if acct.UID != "acme" || acct.Notes != "a customer" {
		t.Fatalf("account create = %+v", acct)
	}
	r := kmsctl(t, s.env, "", "account", "update", "-by-uid", "acme", "-notes", "").want(t, 0, "account update")
	if !strings.Contains(r.stdout, "notes:    -") {
		t.Errorf("account update printed:\n%s", r.stdout)
	}

	r = kmsctl(t, s.env, "", "-json", "apikey", "create", "-account-uid", "acme", "-flag", "keyring.payments.encrypt", "-flags", `{"keyring.payments.decrypt": true}`)
	var key kms.APIKey
	decodeJSON(t, r.want(t, 0, "apikey create"), &key)
	if !strings.HasPrefix(key.Key, "rk_") || !key.Flags["keyring.payments.encrypt"] || !key.Flags["keyring.payments.decrypt"] || key.AccountID != acct.ID {
		t.Fatalf("apikey create = %+v", key)
	}
	r = kmsctl(t, s.env, "", "apikey", "list", "-account", acct.ID).want(t, 0, "apikey list")
	if !strings.Contains(r.stdout, key.KeyID) || strings.Contains(r.stdout, key.Key) {
		t.Errorf("apikey list printed:\n%s", r.stdout)
	}
	r = kmsctl(t, s.env, "", "apikey", "update", key.KeyID, "-active", "false").want(t, 0, "apikey update")
	if !strings.Contains(r.stdout, "active:   false") {
		t.Errorf("apikey update printed:\n%s", r.stdout)
	}
	// The new key, read from a file, is refused while inactive.
	keyFile := writeFile(t, t.TempDir(), "key", []byte(key.Key+"\n"))
	r = kmsctl(t, s.env.without("KMS_API_KEY"), "", "-api-key-file", keyFile, "ring", "list").want(t, 1, "an inactive key")
	if !strings.Contains(r.stderr, "(unauthenticated)") {
		t.Errorf("inactive key: stderr %q", r.stderr)
	}
	kmsctl(t, s.env, "", "apikey", "revoke", key.KeyID).want(t, 0, "apikey revoke")
	kmsctl(t, s.env, "", "apikey", "show", key.KeyID).want(t, 1, "apikey show after revoke")
	kmsctl(t, s.env, "", "account", "delete", acct.ID).want(t, 0, "account delete")

	r = kmsctl(t, s.env, "", "user", "invite", "-email", "ada@example.com", "-first-name", "Ada", "-last-name", "Lovelace", "ada").want(t, 0, "user invite")
	if !strings.Contains(r.stdout, "/auth/user/invite-validate?token=") {
		t.Errorf("user invite printed:\n%s", r.stdout)
	}
	r = kmsctl(t, s.env, "", "user", "show", "-by-email", "ada@example.com").want(t, 0, "user show")
	if !strings.Contains(r.stdout, "status:        invited") {
		t.Errorf("user show printed:\n%s", r.stdout)
	}
	var users kms.List[*kms.User]
	decodeJSON(t, kmsctl(t, s.env, "", "user", "list", "-json").want(t, 0, "user list"), &users)
	if len(users.Data) != 1 || users.Data[0].Username != "ada" {
		t.Errorf("user list = %+v", users.Data)
	}

	var acts kms.List[*kms.Activity]
	decodeJSON(t, kmsctl(t, s.env, "", "activity", "search", "-action", "apikey.create", "-valid", "true", "-from", "1h", "-json").want(t, 0, "activity search"), &acts)
	if len(acts.Data) != 1 || acts.Data[0].Action != "apikey.create" {
		t.Errorf("activity search = %+v", acts.Data)
	}
	r = kmsctl(t, s.env, "", "activity", "show", acts.Data[0].ID).want(t, 0, "activity show")
	if !strings.Contains(r.stdout, "apikey.create") {
		t.Errorf("activity show printed:\n%s", r.stdout)
	}
}

func TestAssets(t *testing.T) {
	_, e := newRingServer(t, "docs")
	var parent, child kms.EncryptResult
	r := kmsctl(t, e, "a", "-json", "encrypt", "-ring", "docs", "-asset-data", `{"name":"a"}`).want(t, 0, "encrypt with an Asset")
	json.Unmarshal([]byte(r.stderr), &parent)
	r = kmsctl(t, e, "b", "-json", "encrypt", "-ring", "docs", "-asset-data", `{"name":"b"}`, "-asset-parent", parent.Asset.ID).want(t, 0, "encrypt with a child")
	json.Unmarshal([]byte(r.stderr), &child)
	if parent.Asset == nil || child.Asset == nil {
		t.Fatalf("encrypt answers without their Assets: %+v, %+v", parent, child)
	}
	r = kmsctl(t, e, "", "asset", "show", child.Asset.ID).want(t, 0, "asset show")
	if !strings.Contains(r.stdout, parent.Asset.ID) || !strings.Contains(r.stdout, `{"name":"b"}`) {
		t.Errorf("asset show printed:\n%s", r.stdout)
	}
	var found kms.List[*kms.Asset]
	decodeJSON(t, kmsctl(t, e, "", "asset", "search", "-parent", parent.Asset.ID, "-json").want(t, 0, "asset search"), &found)
	if len(found.Data) != 1 || found.Data[0].ID != child.Asset.ID {
		t.Errorf("asset search -parent = %+v", found.Data)
	}
	r = kmsctl(t, e, "", "asset", "lineage", child.Asset.ID).want(t, 0, "asset lineage")
	if !strings.Contains(r.stdout, "ancestor") || !strings.Contains(r.stdout, parent.Asset.ID) {
		t.Errorf("asset lineage printed:\n%s", r.stdout)
	}
}

func TestLoginSession(t *testing.T) {
	s := newServer(t, kms.Options{})
	created, err := s.Service.CreateUser(s.RootCtx, kms.UserInput{Username: "ada", Email: "ada@example.com", FirstName: "Ada", LastName: "Lovelace",
		Flags: kms.Flags{"keyring.*.read": true}})
	if err != nil {
		t.Fatalf("CreateUser() = %v", err)
	}
	e := s.env.without("KMS_API_KEY")
	kmsctl(t, e, "", "ring", "list").want(t, 1, "ring list before login")
	r := kmsctl(t, e, "wrong-password\n", "login", "ada@example.com").want(t, 1, "login with a wrong password")
	if !strings.Contains(r.stderr, "invalid username or password") {
		t.Errorf("wrong password: stderr %q", r.stderr)
	}
	kmsctl(t, e, created.Password+"\n", "login", "-refresh-after", "1ms", "ada@example.com").want(t, 0, "login")
	path := filepath.Join(e["KMSCTL_CONFIG_DIR"], "session.json")
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("session file: %v, %v; want mode 0600", st, err)
	}
	before, _ := os.ReadFile(path)
	time.Sleep(5 * time.Millisecond)
	kmsctl(t, e, "", "ring", "list").want(t, 0, "ring list with the saved token")
	after, _ := os.ReadFile(path)
	var s0, s1 session
	json.Unmarshal(before, &s0)
	json.Unmarshal(after, &s1)
	if s0.AccessToken == s1.AccessToken || !s1.IssuedAt.After(s0.IssuedAt) || s1.Username != "ada" {
		t.Fatalf("the token was not refreshed: %+v then %+v", s0, s1)
	}
	// The old token was revoked by the refresh.
	kmsctl(t, e.with("KMS_API_KEY", s0.AccessToken), "", "ring", "list").want(t, 1, "the token before the refresh")
	r = kmsctl(t, e, "", "status").want(t, 0, "status")
	if !strings.Contains(r.stdout, "access token of ada") {
		t.Errorf("status printed:\n%s", r.stdout)
	}
	r = kmsctl(t, e, "", "user", "list").want(t, 1, "a command the User may not run")
	if !strings.Contains(r.stderr, "(permission_denied)") {
		t.Errorf("user list as ada: stderr %q", r.stderr)
	}
	kmsctl(t, e, "", "logout").want(t, 0, "logout")
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("session file after logout: %v", err)
	}
	kmsctl(t, e.with("KMS_API_KEY", s1.AccessToken), "", "ring", "list").want(t, 1, "the token after logout")
	kmsctl(t, e, "", "logout").want(t, 1, "logout when not logged in")
}
