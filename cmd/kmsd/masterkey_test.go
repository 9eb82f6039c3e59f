package main

import (
	"bytes"
	"encoding/base64"
	"errors"
	"os"
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
