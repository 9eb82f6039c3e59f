package main

import (
	"bytes"
	"encoding/base64"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ringkms/kms"

	"github.com/rs/zerolog"
)

func TestRunRefusesWithoutMasterKey(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	err, _ := runErr(t, []string{"-data", data, "-addr", "127.0.0.1:0"}, env{})
	if err == nil {
		t.Fatal("run without a master key = nil, want an error")
	}
	for _, want := range []string{"no master key", "KMS_MASTER_KEY", "head -c 32 /dev/urandom | base64", "-master-key-file", "-dev"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if code := exitCode(err); code == 0 {
		t.Errorf("exit code = 0")
	}
	if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("run without a key created the data directory (%v)", err)
	}
}

func TestRunBadMasterKey(t *testing.T) {
	short := base64.StdEncoding.EncodeToString(make([]byte, 16))
	tests := []struct {
		name, key, want string
	}{
		{"not base64", "this is not base64!", "not base64"},
		{"16 bytes", short, "16 bytes"},
		{"blank", "   ", "0 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err, _ := runErr(t, []string{"-data", t.TempDir(), "-addr", "127.0.0.1:0"}, env{"KMS_MASTER_KEY": tt.key})
			if err == nil || !strings.Contains(err.Error(), "KMS_MASTER_KEY") || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("run = %v, want an error about KMS_MASTER_KEY: %s", err, tt.want)
			}
			if strings.TrimSpace(tt.key) != "" && strings.Contains(err.Error(), tt.key) {
				t.Errorf("error %q repeats the key", err)
			}
		})
	}
}

func TestRunMasterKeyTwoWays(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "mk")
	os.WriteFile(file, []byte(newKey()), 0o600)
	err, _ := runErr(t, []string{"-data", dir, "-master-key-file", file}, env{"KMS_MASTER_KEY": newKey()})
	if err == nil || !strings.Contains(err.Error(), "one way") {
		t.Fatalf("run with KMS_MASTER_KEY and -master-key-file = %v, want an error", err)
	}
}

func TestMasterKeyFile(t *testing.T) {
	key := newKey()
	tests := []struct {
		name     string
		content  string
		mode     os.FileMode
		wantErr  string
		wantWarn bool
	}{
		{"0600", key + "\n", 0o600, "", false},
		{"0400", key, 0o400, "", false},
		{"0640 warns", key, 0o640, "", true},
		{"0644 refused", key, 0o644, "chmod 600", false},
		{"0606 refused", key, 0o606, "other users", false},
		{"bad content", "hello", 0o600, "base64", false},
		{"wrong size", base64.StdEncoding.EncodeToString(make([]byte, 31)), 0o600, "31 bytes", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "master.key")
			if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, tt.mode); err != nil {
				t.Fatal(err)
			}
			var logs bytes.Buffer
			log := zerolog.New(&logs)
			k, err := loadMasterKey(&config{masterKeyFile: path}, env{}.get, true, &log)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("loadMasterKey = %v, want an error about %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("loadMasterKey = %v", err)
			}
			if mk, ok := k.(kms.MasterKey); !ok || mk.Base64() != key {
				t.Errorf("loadMasterKey read a different key")
			}
			if got := strings.Contains(logs.String(), `"level":"warn"`); got != tt.wantWarn {
				t.Errorf("warned = %v, want %v; logs: %s", got, tt.wantWarn, logs.String())
			}
			if strings.Contains(logs.String(), key) {
				t.Errorf("the key was logged")
			}
		})
	}
	t.Run("missing", func(t *testing.T) {
		log := zerolog.Nop()
		_, err := loadMasterKey(&config{masterKeyFile: filepath.Join(t.TempDir(), "nope")}, env{}.get, true, &log)
		if err == nil || !strings.Contains(err.Error(), "master key file") {
			t.Errorf("loadMasterKey(missing file) = %v, want an error naming the master key file", err)
		}
	})
}

// TestStartWrongMasterKey: only a master key that does not open the store
// is reported as one.
func TestStartWrongMasterKey(t *testing.T) {
	e := env{"KMS_MASTER_KEY": newKey()}
	data := trailDataDir(t, e, 0, 0)
	err, _ := runErr(t, []string{"-data", data, "-addr", "127.0.0.1:0"}, env{"KMS_MASTER_KEY": newKey()})
	if err == nil || !strings.Contains(err.Error(), "master key is not the one this store was created with") {
		t.Errorf("kmsd with another master key = %v, want an error saying so", err)
	}
}

// runCommand runs the built kmsd with args and the environment e (and no
// other KMS_* variable) until it exits, and returns its exit status and
// what it printed.
func runCommand(t *testing.T, e env, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(kmsdBinary(t), args...)
	cmd.Env = childEnv(e)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatalf("kmsd %s: %v", strings.Join(args, " "), err)
	}
	return code, out.String(), errOut.String()
}

// keyFile writes a master key file (mode 0600) holding key in dir.
func keyFile(t *testing.T, dir, name, key string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestE2ERekeyGoesOneWay: kmsd rekey, through the admin socket of a
// running kmsd and with kmsd stopped, moves the store to a new master key
// once: run again, or asked to go back to a key the store has left, or to
// the key it is under, it exits 1 saying why and changes nothing, so the
// new key goes on opening the store. A key given that the path does not
// use is refused (exit 2, naming it) before anything is done.
func TestE2ERekeyGoesOneWay(t *testing.T) {
	a, b, c := newKey(), newKey(), newKey()
	keys := t.TempDir()
	fileB, fileC := keyFile(t, keys, "b.key", b), keyFile(t, keys, "c.key", c)
	data := t.TempDir()
	p := startKmsd(t, data, env{"KMS_MASTER_KEY": a, "KMS_MASTER_KEY_NEXT": b, "KMS_BOOTSTRAP_API_KEY": e2eBootstrap})
	call(t, nil, "POST", p.URL+"/ks/keyrings", e2eBootstrap, map[string]any{"name": "rk"})
	code, enc := call(t, nil, "POST", p.URL+"/ks/encrypt", e2eBootstrap, map[string]any{"ringname": "rk"})
	if code != 200 {
		t.Fatalf("encrypt = %d %v", code, enc)
	}
	decrypts := func(url, when string) {
		t.Helper()
		if code, body := call(t, nil, "POST", url+"/ks/decrypt", e2eBootstrap, map[string]any{"hash": enc["hash"], "header": enc["header"]}); code != 200 {
			t.Fatalf("decrypt %s = %d %v", when, code, body)
		}
	}
	// decryptsUnder starts kmsd on the store with e, decrypts, and stops it.
	decryptsUnder := func(e env, when string) {
		t.Helper()
		p := startKmsd(t, data, e)
		decrypts(p.URL, when)
		p.Stop(t)
	}
	expect := func(wantCode int, want string, e env, args ...string) {
		t.Helper()
		code, stdout, stderr := runCommand(t, e, append([]string{"rekey", "-data", data}, args...)...)
		if code != wantCode || !strings.Contains(stderr, want) {
			t.Fatalf("kmsd rekey %s = exit %d, want %d saying %q; stdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, wantCode, want, stdout, stderr)
		}
	}

	// Online: a new key named here is not the running kmsd's next key.
	expect(2, "-new-master-key-file", env{}, "-new-master-key-file", fileC)
	expect(2, "KMS_NEW_MASTER_KEY", env{"KMS_NEW_MASTER_KEY": c})
	expect(2, "-master-key-file", env{}, "-master-key-file", fileB)
	expect(0, "", env{})
	decrypts(p.URL, "after the rekey")
	// Run again, it would go back to the old key.
	expect(1, "already under the new master key", env{})
	decrypts(p.URL, "after the second rekey was refused")
	p.Stop(t)

	// Step 3: the new key alone.
	decryptsUnder(env{"KMS_MASTER_KEY": b}, "under the new key alone")

	// Offline, the same rules.
	expect(1, "already under the new master key", env{"KMS_MASTER_KEY": a, "KMS_NEW_MASTER_KEY": b})
	expect(1, "rekeyed away from", env{"KMS_MASTER_KEY": b, "KMS_NEW_MASTER_KEY": a})
	expect(1, "is the one the store is under", env{"KMS_MASTER_KEY": b}, "-new-master-key-file", fileB)
	expect(2, "-master-key-next-file", env{"KMS_MASTER_KEY": b}, "-master-key-next-file", fileC)
	expect(0, "", env{"KMS_MASTER_KEY": b}, "-new-master-key-file", fileC)
	expect(1, "rekeyed away from", env{"KMS_MASTER_KEY": c, "KMS_NEW_MASTER_KEY": a})
	expect(1, "rekeyed away from", env{"KMS_MASTER_KEY": c, "KMS_NEW_MASTER_KEY": b})

	// Online again, with the store's old key as the running kmsd's next.
	p = startKmsd(t, data, env{"KMS_MASTER_KEY": c, "KMS_MASTER_KEY_NEXT": b})
	expect(1, "rekeyed away from", env{})
	decrypts(p.URL, "after a rekey back was refused")
	p.Stop(t)
	decryptsUnder(env{"KMS_MASTER_KEY": c}, "under the last key alone")
}
