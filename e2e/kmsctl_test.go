package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/client"
	"github.com/ringkms/kms/envelope"
	"github.com/ringkms/kms/internal/kmsdtest"
	"github.com/ringkms/kms/internal/testcert"
)

// ringKeyOnly answers decrypt calls without their share: what a holder
// of a ring's key who made no decrypt call has.
type ringKeyOnly struct{ envelope.Keys }

func (k ringKeyOnly) Decrypt(ctx context.Context, in kms.DecryptInput) (*kms.DecryptResult, error) {
	res, err := k.Keys.Decrypt(ctx, in)
	if res != nil {
		res.KeyShare = ""
	}
	return res, err
}

// kmsctlRun is what one run of the kmsctl binary gave.
type kmsctlRun struct {
	code           int
	stdout, stderr string
}

// kmsctlEnv is the environment of kmsctl against p: ours without KMS_*,
// the address, the secret (none when empty) and a configuration
// directory of the test's.
func kmsctlEnv(t *testing.T, p *proc, secret string) []string {
	env := kmsdtest.Env("KMS_ADDR="+p.URL, "KMSCTL_CONFIG_DIR="+t.TempDir())
	if secret != "" {
		env = append(env, "KMS_API_KEY="+secret)
	}
	return env
}

// kmsctl runs the kmsctl binary with env, stdin and args, and fails the
// test unless it exits with code.
func kmsctl(t *testing.T, env []string, stdin []byte, code int, args ...string) kmsctlRun {
	t.Helper()
	cmd := exec.Command(kmsctlPath, args...)
	cmd.Env = env
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := kmsctlRun{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("kmsctl %s: %v", strings.Join(args, " "), err)
	}
	if r.code != code {
		t.Fatalf("kmsctl %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, code, r.stdout, r.stderr)
	}
	return r
}

// decode decodes the -json output of r into v.
func (r kmsctlRun) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(r.stdout), v); err != nil {
		t.Fatalf("kmsctl -json output does not decode into %T: %v\n%s", v, err, r.stdout)
	}
}

func TestKmsctlUsage(t *testing.T) {
	needKmsd(t)
	env := kmsdtest.Env("KMS_ADDR=http://127.0.0.1:1", "KMS_API_KEY=rk_unused", "KMSCTL_CONFIG_DIR="+t.TempDir())
	for _, args := range [][]string{
		{},
		{"rings", "list"},
		{"ring", "list", "-nosuchflag"},
		{"ring", "show"},
		{"key", "show", "ID"},
		{"-api-key", "rk_secret", "ring", "list"},
	} {
		r := kmsctl(t, env, nil, 2, args...)
		if !strings.HasPrefix(r.stderr, "kmsctl: ") || !strings.Contains(r.stderr, "-h' for usage") {
			t.Errorf("kmsctl %v: stderr %q", args, r.stderr)
		}
	}
	if r := kmsctl(t, env, nil, 0, "encrypt", "-h"); !strings.Contains(r.stdout, "-private-key FILE") {
		t.Errorf("kmsctl encrypt -h printed:\n%s", r.stdout)
	}
}

func TestKmsctl(t *testing.T) {
	in, p, _, root := serve(t)
	env := kmsctlEnv(t, p, in.bootstrap)
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "payments.key")

	t.Run("ring", func(t *testing.T) {
		r := kmsctl(t, env, nil, 0, "ring", "create", "-private-key-out", keyFile, "payments")
		if strings.Contains(r.stdout+r.stderr, "privateKey") || !strings.Contains(r.stdout, "written to "+keyFile) {
			t.Errorf("ring create printed:\n%s\n%s", r.stdout, r.stderr)
		}
		if st, err := os.Stat(keyFile); err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("private key file: %v, %v; want mode 0600", st, err)
		}
		var rings kms.List[*kms.KeyRing]
		kmsctl(t, env, nil, 0, "ring", "list", "-json").decode(t, &rings)
		if len(rings.Data) != 1 || rings.Data[0].Name != "payments" || rings.Pagination.HasMore {
			t.Fatalf("ring list -json = %+v", rings)
		}
	})

	plain := make([]byte, 300<<10)
	rand.Read(plain)
	plainFile := filepath.Join(dir, "plain")
	if err := os.WriteFile(plainFile, plain, 0o600); err != nil {
		t.Fatal(err)
	}
	sealed := filepath.Join(dir, "plain.rkms")
	t.Run("encrypt and decrypt", func(t *testing.T) {
		kmsctl(t, env, nil, 0, "encrypt", "-ring", "payments", "-private-key", keyFile, "-ad", "plain", "-in", plainFile, "-out", sealed)
		out := filepath.Join(dir, "plain.out")
		kmsctl(t, env, nil, 0, "decrypt", "-private-key", keyFile, "-ad", "plain", "-in", sealed, "-out", out)
		if got, err := os.ReadFile(out); err != nil || !bytes.Equal(got, plain) {
			t.Fatalf("decrypted %d bytes (%v), want the %d encrypted", len(got), err, len(plain))
		}
		// Through pipes, the private key from the environment.
		pipes := append(env, "KMS_PRIVATE_KEY_FILE="+keyFile)
		envelope := kmsctl(t, pipes, plain, 0, "encrypt", "-ring", "payments").stdout
		if got := kmsctl(t, pipes, []byte(envelope), 0, "decrypt").stdout; got != string(plain) {
			t.Fatalf("decrypt of a pipe gave %d bytes, want %d", len(got), len(plain))
		}
	})

	// kmsctl makes rings with split data keys: its envelope opens only
	// with the share a decrypt answers, not with the ring's key alone, and
	// it prints no share. One made with -data-keys ring opens with the
	// ring's key.
	t.Run("split data keys", func(t *testing.T) {
		var shown struct{ Ring kms.KeyRing }
		kmsctl(t, env, nil, 0, "ring", "show", "-json", "payments").decode(t, &shown)
		if shown.Ring.DataKeys != kms.DataKeysSplit {
			t.Fatalf("ring show -json: dataKeys %q, want split", shown.Ring.DataKeys)
		}
		plainKey := filepath.Join(dir, "plain.key")
		kmsctl(t, env, nil, 0, "ring", "create", "-data-keys", "ring", "-private-key-out", plainKey, "plain")
		kmsctl(t, env, nil, 0, "ring", "show", "-json", "plain").decode(t, &shown)
		if shown.Ring.DataKeys != kms.DataKeysRing {
			t.Fatalf("ring show -json after -data-keys ring: dataKeys %q, want ring", shown.Ring.DataKeys)
		}
		for _, c := range []struct {
			ring, keyFile string
			split         bool
		}{{"payments", keyFile, true}, {"plain", plainKey, false}} {
			sealedFile := filepath.Join(dir, c.ring+".split.rkms")
			r := kmsctl(t, env, nil, 0, "encrypt", "-json", "-ring", c.ring, "-private-key", c.keyFile, "-in", plainFile, "-out", sealedFile)
			if strings.Contains(r.stdout+r.stderr, "keyShare") {
				t.Errorf("kmsctl encrypt printed a share:\n%s", r.stdout)
			}
			r = kmsctl(t, env, nil, 0, "decrypt", "-json", "-private-key", c.keyFile, "-in", sealedFile, "-out", sealedFile+".out")
			if strings.Contains(r.stdout+r.stderr, "keyShare") {
				t.Errorf("kmsctl decrypt printed a share:\n%s", r.stdout)
			}
			sealed, err := os.ReadFile(sealedFile)
			if err != nil {
				t.Fatal(err)
			}
			text, err := os.ReadFile(c.keyFile)
			if err != nil {
				t.Fatal(err)
			}
			pk, err := kms.ParsePrivateKey(text)
			if err != nil {
				t.Fatal(err)
			}
			if got, err := envelope.New(root, pk).Open(bg, sealed, nil); err != nil || !bytes.Equal(got, plain) {
				t.Fatalf("%s: Open = %d bytes, %v", c.ring, len(got), err)
			}
			_, err = envelope.New(ringKeyOnly{root}, pk).Open(bg, sealed, nil)
			if c.split && !errors.Is(err, envelope.ErrFormat) {
				t.Fatalf("%s: Open with the ring's key alone = %v, want ErrFormat", c.ring, err)
			}
			if !c.split && err != nil {
				t.Fatalf("%s: Open of a ring of ring keys without a share = %v", c.ring, err)
			}
		}
	})

	t.Run("tampered", func(t *testing.T) {
		b, err := os.ReadFile(sealed)
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)/2] ^= 0x40
		tdir := t.TempDir()
		bad := filepath.Join(tdir, "bad.rkms")
		os.WriteFile(bad, b, 0o600)
		out := filepath.Join(tdir, "bad.out")
		r := kmsctl(t, env, nil, 1, "decrypt", "-private-key", keyFile, "-ad", "plain", "-in", bad, "-out", out)
		if !strings.Contains(r.stderr, "fails authentication") {
			t.Errorf("tampered envelope: stderr %q", r.stderr)
		}
		if entries, _ := os.ReadDir(tdir); len(entries) != 1 {
			t.Errorf("a tampered envelope left files: %v, want bad.rkms alone", entries)
		}
	})

	t.Run("key disable", func(t *testing.T) {
		var keys kms.List[*kms.Key]
		kmsctl(t, env, nil, 0, "key", "list", "-ring", "payments", "-json").decode(t, &keys)
		if len(keys.Data) != 1 || keys.Data[0].State != kms.KeyEnabled {
			t.Fatalf("key list -json = %+v", keys.Data)
		}
		id := keys.Data[0].ID
		kmsctl(t, env, nil, 0, "key", "disable", "-ring", "payments", "-rotate", id)
		r := kmsctl(t, env, nil, 1, "decrypt", "-private-key", keyFile, "-ad", "plain", "-in", sealed, "-out", filepath.Join(dir, "disabled.out"))
		// The service's message and code.
		if !strings.Contains(r.stderr, "key "+id+" of ring payments is disabled") || !strings.Contains(r.stderr, "(disabled)") {
			t.Errorf("decrypt under a disabled key: stderr %q", r.stderr)
		}
		if _, err := os.Stat(filepath.Join(dir, "disabled.out")); !os.IsNotExist(err) {
			t.Errorf("decrypt under a disabled key left its -out: %v", err)
		}
		kmsctl(t, env, nil, 0, "key", "enable", "-ring", "payments", id)
		kmsctl(t, env, nil, 0, "decrypt", "-private-key", keyFile, "-ad", "plain", "-in", sealed, "-out", filepath.Join(dir, "enabled.out"))
	})

	t.Run("apikey", func(t *testing.T) {
		accounts, err := root.ListAccounts(bg, kms.PageRequest{})
		if err != nil || len(accounts.Data) != 1 {
			t.Fatalf("ListAccounts = %v, %v", accounts, err)
		}
		var key kms.APIKey
		kmsctl(t, env, nil, 0, "apikey", "create", "-json", "-account", accounts.Data[0].ID, "-flag", "keyring.payments.read").decode(t, &key)
		if !strings.HasPrefix(key.Key, "rk_") || !key.Flags["keyring.payments.read"] {
			t.Fatalf("apikey create -json = %+v", key)
		}
		var keys kms.List[*kms.APIKey]
		kmsctl(t, env, nil, 0, "apikey", "list", "-json", "-all").decode(t, &keys)
		found := false
		for _, k := range keys.Data {
			found = found || k.KeyID == key.KeyID && k.Key == ""
		}
		if !found {
			t.Fatalf("apikey list -json = %+v, want %s without its secret", keys.Data, key.KeyID)
		}
		// The new key works from a file, never from argv.
		secretFile := filepath.Join(t.TempDir(), "key")
		os.WriteFile(secretFile, []byte(key.Key+"\n"), 0o600)
		noKey := kmsctlEnv(t, p, "")
		kmsctl(t, noKey, nil, 0, "-api-key-file", secretFile, "ring", "show", "payments")
		kmsctl(t, noKey, []byte(key.Key+"\n"), 0, "ring", "show", "-api-key-file", "-", "payments")
		kmsctl(t, env, nil, 0, "apikey", "revoke", key.KeyID)
		r := kmsctl(t, noKey, nil, 1, "-api-key-file", secretFile, "ring", "show", "payments")
		if !strings.Contains(r.stderr, "(unauthenticated)") {
			t.Errorf("a revoked key: stderr %q", r.stderr)
		}
	})

	t.Run("activity", func(t *testing.T) {
		var acts kms.List[*kms.Activity]
		kmsctl(t, env, nil, 0, "activity", "search", "-json", "-action", "encrypt", "-ring", "payments", "-valid", "true", "-limit", "1", "-all").decode(t, &acts)
		if len(acts.Data) != 3 { // the file, the pipe and the split check
			t.Fatalf("activity search -json found %d encrypt records, want 3: %+v", len(acts.Data), acts.Data)
		}
		for _, a := range acts.Data {
			if a.Action != "encrypt" || !a.Valid || a.Ring != "payments" || a.Props["result"] != "ok" {
				t.Errorf("activity search -json returned %+v", a)
			}
		}
	})

	// After rotations, the files of both rings move to the active key:
	// to a new file, then in place. Which key a file is under, decrypt
	// -json says.
	t.Run("rewrap", func(t *testing.T) {
		for _, c := range []struct{ ring, keyFile, in, ad string }{
			{"payments", keyFile, sealed, "plain"},
			{"payments", keyFile, filepath.Join(dir, "payments.split.rkms"), ""},
			{"plain", filepath.Join(dir, "plain.key"), filepath.Join(dir, "plain.split.rkms"), ""},
		} {
			opened := func(path string) (*kms.DecryptResult, []byte) {
				t.Helper()
				var res kms.DecryptResult
				kmsctl(t, env, nil, 0, "decrypt", "-json", "-force", "-private-key", c.keyFile, "-ad", c.ad, "-in", path, "-out", path+".out").decode(t, &res)
				b, err := os.ReadFile(path + ".out")
				if err != nil {
					t.Fatal(err)
				}
				return &res, b
			}
			old, _ := opened(c.in)
			var rotated struct{ Key kms.Key }
			kmsctl(t, env, nil, 0, "ring", "rotate", "-json", c.ring).decode(t, &rotated)
			moved := c.in + ".new"
			r := kmsctl(t, env, nil, 0, "rewrap", "-private-key", c.keyFile, "-ad", c.ad, "-in", c.in, "-out", moved)
			if !strings.Contains(r.stdout, "old key:   "+old.Key.ID) || !strings.Contains(r.stdout, "new key:   "+rotated.Key.ID) {
				t.Errorf("rewrap printed:\n%s", r.stdout)
			}
			if res, _ := opened(moved); res.Key.ID != rotated.Key.ID {
				t.Errorf("%s rewrapped is under key %s, want %s", c.in, res.Key.ID, rotated.Key.ID)
			}
			kmsctl(t, env, nil, 0, "ring", "rotate", c.ring)
			kmsctl(t, env, nil, 0, "rewrap", "-private-key", c.keyFile, "-ad", c.ad, "-in", moved, "-out", moved)
			var active struct{ Ring kms.KeyRing }
			kmsctl(t, env, nil, 0, "ring", "show", "-json", c.ring).decode(t, &active)
			res, got := opened(moved)
			if res.Key.ID == rotated.Key.ID || res.Key.ID != active.Ring.ActiveKey {
				t.Errorf("%s rewrapped in place is under key %s, want the active %s", c.in, res.Key.ID, active.Ring.ActiveKey)
			}
			if !bytes.Equal(got, plain) {
				t.Errorf("%s rewrapped twice decrypts to %d bytes, want %d", c.in, len(got), len(plain))
			}
		}
	})

	t.Run("login", func(t *testing.T) {
		created, err := root.CreateUser(bg, kms.UserInput{Username: "ada", Email: "ada@example.com", FirstName: "Ada", LastName: "Lovelace",
			Flags: kms.Flags{"keyring.*.read": true}})
		if err != nil {
			t.Fatalf("CreateUser: %v", err)
		}
		user := kmsctlEnv(t, p, "")
		kmsctl(t, user, []byte(created.Password+"\n"), 0, "login", "ada@example.com")
		var rings kms.List[*kms.KeyRing]
		kmsctl(t, user, nil, 0, "ring", "list", "-json").decode(t, &rings)
		if len(rings.Data) != 2 { // payments and plain
			t.Errorf("ring list as ada = %+v", rings.Data)
		}
		r := kmsctl(t, user, nil, 1, "ring", "create", "other")
		if !strings.Contains(r.stderr, "(permission_denied)") {
			t.Errorf("ring create as ada: stderr %q", r.stderr)
		}
		kmsctl(t, user, nil, 0, "logout")
		kmsctl(t, user, nil, 1, "ring", "list")
	})

	// The mailed links, completed by kmsctl with the link and the
	// password on standard input.
	t.Run("invitation and reset", func(t *testing.T) {
		mails := map[string]bool{}
		kmsctl(t, env, nil, 0, "user", "invite", "-email", "grace@example.com", "-first-name", "Grace", "-last-name", "Hopper",
			"-flag", "keyring.*.read", "grace")
		link, _ := in.waitMail(t, "grace@example.com", mails).link(t, "/auth/user/invite-validate")
		user := kmsctlEnv(t, p, "")
		kmsctl(t, user, []byte(link+"\nGrace-Hopper-1906\n"), 0, "user", "accept-invite")
		kmsctl(t, user, nil, 0, "ring", "show", "payments")

		kmsctl(t, user, nil, 0, "user", "forgot-password", "grace@example.com")
		link, _ = in.waitMail(t, "grace@example.com", mails).link(t, "/auth/basic/reset-password-complete")
		kmsctl(t, user, []byte(link+"\nAmazing-Grace-1952\n"), 0, "user", "reset-password")
		kmsctl(t, user, nil, 1, "ring", "show", "payments") // the reset revoked the saved token
		kmsctl(t, user, []byte("Amazing-Grace-1952\n"), 0, "login", "-user", "grace")
		kmsctl(t, user, nil, 0, "ring", "show", "payments")
	})
}

// privateCA is a CA of the test's own and a server certificate for
// 127.0.0.1 that it signed, in files.
type privateCA struct {
	caFile, certFile, keyFile string
	caPEM                     []byte
}

func newPrivateCA(t *testing.T) *privateCA {
	t.Helper()
	ca := testcert.NewCA(t)
	p := &privateCA{caFile: filepath.Join(t.TempDir(), "ca.pem"), caPEM: ca.PEM()}
	p.certFile, p.keyFile = ca.Server(t).WriteFiles(t)
	if err := os.WriteFile(p.caFile, p.caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestKmsctlTLS runs kmsd over TLS with a certificate of a private CA,
// started in an environment set up for the clients (KMS_ADDR holds a
// URL), and kmsctl and the Go client against it: refused with a message
// that says the certificate is not trusted and how to trust it, until
// given the CA's certificate (KMS_CACERT, -ca-cert, WithCACert).
func TestKmsctlTLS(t *testing.T) {
	in := newInstance(t)
	ca := newPrivateCA(t)
	// kmsd in a shell set up for kmsctl: KMS_ADDR is the clients' URL.
	env := append(in.env(), "KMS_ADDR=https://127.0.0.1:8200")
	p := kmsdtest.Launch(t, kmsdPath, env, "-data", in.data, "-mail-outbox", in.outbox, "-log-level", "warn",
		"-tls-cert", ca.certFile, "-tls-key", ca.keyFile, "-addr", "127.0.0.1:0")
	p.Listen(t, startTimeout)
	if !strings.HasPrefix(p.URL, "https://127.0.0.1:") {
		t.Fatalf("kmsd listens on %s, want https://127.0.0.1:PORT", p.URL)
	}
	kenv := kmsdtest.Env("KMS_ADDR="+p.URL, "KMS_API_KEY="+in.bootstrap, "KMSCTL_CONFIG_DIR="+t.TempDir())

	r := kmsctl(t, kenv, nil, 1, "status")
	if strings.Contains(r.stdout, "unhealthy") || !strings.Contains(r.stdout, "TLS certificate is not trusted") {
		t.Errorf("status without the CA printed:\n%s", r.stdout)
	}
	if !strings.Contains(r.stderr, "certificate is not trusted") || !strings.Contains(r.stderr, "-ca-cert FILE or KMS_CACERT=FILE") {
		t.Errorf("status without the CA: stderr %q", r.stderr)
	}

	withCA := append(kenv, "KMS_CACERT="+ca.caFile)
	kmsctl(t, withCA, nil, 0, "status")
	kmsctl(t, withCA, nil, 0, "ring", "create", "payments")
	if r := kmsctl(t, kenv, nil, 0, "-ca-cert", ca.caFile, "ring", "list"); !strings.Contains(r.stdout, "payments") {
		t.Errorf("ring list -ca-cert printed:\n%s", r.stdout)
	}

	c, err := client.New(p.URL, client.WithAPIKey(in.bootstrap))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Healthz(bg); kms.ErrorKind(err) != kms.KindInternal || !strings.Contains(err.Error(), "not trusted") {
		t.Errorf("Healthz without the CA = %v, want the certificate not trusted", err)
	}
	if c, err = client.New(p.URL, client.WithAPIKey(in.bootstrap), client.WithCACert(ca.caPEM)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetKeyRing(bg, kms.RingRef{Name: "payments"}); err != nil {
		t.Errorf("GetKeyRing with the CA = %v", err)
	}
}
