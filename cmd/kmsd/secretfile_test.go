package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSecretFileModes: the master key file and the metrics token file
// are checked one way (checkSecretFile): a file that other users may
// read or write stops kmsd with exit status 2, naming the file and its
// mode, before it writes anything; one its group may read is accepted
// with a warning naming it; one of mode 0600 without a word. (The
// pin-source of a token: TestPINSourceMode.)
func TestSecretFileModes(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, what, content string
		args                func(path string) []string
		e                   env
	}{
		{"master key file", "master key file", newKey(),
			func(path string) []string { return []string{"-master-key-file", path} }, env{}},
		{"metrics token file", "-metrics-token-file", "metrics-token-0123456789abcdef",
			func(path string) []string { return []string{"-metrics", "-metrics-token-file", path} }, env{"KMS_MASTER_KEY": newKey()}},
	} {
		path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
		if err := os.WriteFile(path, []byte(tc.content+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, mode := range []os.FileMode{0o644, 0o604, 0o602, 0o666} {
			t.Run(fmt.Sprintf("%s %04o", tc.name, mode), func(t *testing.T) {
				if err := os.Chmod(path, mode); err != nil {
					t.Fatal(err)
				}
				data := t.TempDir()
				err, _ := runErr(t, append([]string{"-data", data, "-addr", "127.0.0.1:0"}, tc.args(path)...), tc.e)
				want := fmt.Sprintf("%s %s has mode %04o", tc.what, path, mode)
				if code := exitCode(err); code != 2 || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "chmod 600") {
					t.Fatalf("kmsd = %v (exit %d), want exit 2 saying %q and how to fix it", err, code, want)
				}
				if hasStore(data) {
					t.Errorf("kmsd wrote a store before refusing the file")
				}
				if strings.Contains(err.Error(), tc.content) {
					t.Errorf("the error shows the secret")
				}
			})
		}
		for _, mode := range []os.FileMode{0o640, 0o600} {
			t.Run(fmt.Sprintf("%s %04o starts", tc.name, mode), func(t *testing.T) {
				if err := os.Chmod(path, mode); err != nil {
					t.Fatal(err)
				}
				s := startRun(t, append([]string{"-data", t.TempDir(), "-addr", "127.0.0.1:0"}, tc.args(path)...), tc.e)
				s.stop(t)
				logs := s.stderr.String()
				warned := strings.Contains(logs, fmt.Sprintf("the %s is accessible to its group", tc.what)) && strings.Contains(logs, path)
				if want := mode == 0o640; warned != want {
					t.Errorf("kmsd with a %s of mode %04o: warned = %v, want %v; log:\n%s", tc.name, mode, warned, want, logs)
				}
				if strings.Contains(logs, tc.content) {
					t.Errorf("the log shows the secret")
				}
			})
		}
	}
}
