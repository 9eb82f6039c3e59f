package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// backupTestEnv runs a kmsd on a new data directory, makes an API key
// with the single flag keyring.docs.encrypt, stops it and takes a backup
// (offline). It returns the environment, the data directory, the backup
// file and the API key's ID.
func backupTestEnv(t *testing.T) (e env, data, file, keyID string) {
	t.Helper()
	dir := t.TempDir()
	data = filepath.Join(dir, "data")
	e = env{"KMS_MASTER_KEY": newKey(), "KMS_BOOTSTRAP_API_KEY": "backup-test-bootstrap-secret-0123456789"}
	s := startRun(t, []string{"-data", data, "-addr", "127.0.0.1:0", "-log-level", "warn"}, e)
	boot := e["KMS_BOOTSTRAP_API_KEY"]
	if code, body := call(t, nil, "POST", s.url+"/ks/keyrings", boot, map[string]any{"name": "docs"}); code != 200 {
		t.Fatalf("create ring = %d %v", code, body)
	}
	code, list := call(t, nil, "GET", s.url+"/auth/apikey", boot, nil)
	items, _ := list["data"].([]any)
	if code != 200 || len(items) == 0 {
		t.Fatalf("GET /auth/apikey = %d %v", code, list)
	}
	acct := items[0].(map[string]any)["accountId"]
	code, key := call(t, nil, "POST", s.url+"/auth/apikey", boot, map[string]any{"accountId": acct, "flags": map[string]bool{"keyring.docs.encrypt": true}})
	if code != 200 {
		t.Fatalf("create API key = %d %v", code, key)
	}
	keyID = key["keyid"].(string)
	s.stop(t)
	file = filepath.Join(dir, "kms.backup")
	if err := run(context.Background(), []string{"backup", "-data", data, "-o", file, "-log-level", "warn"}, e.get, io.Discard, io.Discard); err != nil {
		t.Fatalf("kmsd backup = %v", err)
	}
	return e, data, file, keyID
}

// raiseFlags returns the backup b with the flags of the API key keyID
// raised to "*", and its digests recomputed as plain SHA-256, the way
// that altered a backup of version 1 unseen: the end's of every byte
// before the end frame, and any other 32-byte MAC frame's ('A') of every
// byte before it.
func raiseFlags(t *testing.T, b []byte, keyID string) []byte {
	t.Helper()
	const magicLen = 8
	out := append([]byte(nil), b[:magicLen]...)
	entries, records, raised := uint64(0), uint64(0), false
	for off := magicLen; off < len(b); {
		kind := b[off]
		size, n := binary.Uvarint(b[off+1:])
		if n <= 0 || off+1+n+int(size) > len(b) {
			t.Fatalf("backup frame at %d is malformed", off)
		}
		body := b[off+1+n : off+1+n+int(size)]
		off += 1 + n + int(size)
		switch kind {
		case 'K':
			entries++
			kl, m := binary.Uvarint(body)
			k, v := body[m:m+int(kl)], body[m+int(kl):]
			if string(k) == "ak/id/"+keyID {
				var rec map[string]any
				if err := json.Unmarshal(v, &rec); err != nil {
					t.Fatalf("API key record: %v", err)
				}
				rec["flags"] = map[string]bool{"*": true}
				nv, err := json.Marshal(rec)
				if err != nil {
					t.Fatal(err)
				}
				body = append(binary.AppendUvarint(nil, kl), k...)
				body = append(body, nv...)
				raised = true
			}
		case 'T':
			records++
		case 'A':
			out = binary.AppendUvarint(append(out, kind), sha256.Size)
			sum := sha256.Sum256(out)
			out = append(out, sum[:]...)
			continue
		case 'E':
			sum := sha256.Sum256(out)
			tail := binary.AppendUvarint(binary.AppendUvarint(nil, entries), records)
			tail = append(tail, sum[:]...)
			out = binary.AppendUvarint(append(out, kind), uint64(len(tail)))
			out = append(out, tail...)
			continue
		}
		out = binary.AppendUvarint(append(out, kind), uint64(len(body)))
		out = append(out, body...)
	}
	if !raised {
		t.Fatalf("the backup holds no API key record ak/id/%s", keyID)
	}
	return out
}

// TestRestoreRefusesRaisedFlags: an API key's flags raised to "*" in a
// backup, its digests recomputed, does not restore, and restore leaves
// nothing behind; the backup as written restores.
func TestRestoreRefusesRaisedFlags(t *testing.T) {
	e, _, file, keyID := backupTestEnv(t)
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	tampered := filepath.Join(t.TempDir(), "tampered.backup")
	if err := os.WriteFile(tampered, raiseFlags(t, b, keyID), 0o600); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), "restored")
	var out bytes.Buffer
	err = run(context.Background(), []string{"restore", "-i", tampered, "-data", target, "-log-level", "warn"}, e.get, &out, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "not an intact backup") {
		t.Fatalf("restore(flags raised) = %v, want not an intact backup; printed:\n%s", err, out.String())
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Errorf("restore(flags raised) left %s: %v", target, err)
	}
	// An empty directory that was there is left there, empty.
	empty := t.TempDir()
	if err := run(context.Background(), []string{"restore", "-i", tampered, "-data", empty, "-log-level", "warn"}, e.get, io.Discard, io.Discard); err == nil {
		t.Fatal("restore(flags raised) into an empty directory = nil")
	}
	if entries, err := os.ReadDir(empty); err != nil || len(entries) != 0 {
		t.Errorf("restore(flags raised) into an empty directory left %d entries, %v; want it empty", len(entries), err)
	}
	// The backup as written restores.
	if err := run(context.Background(), []string{"restore", "-i", file, "-data", target, "-log-level", "warn"}, e.get, io.Discard, io.Discard); err != nil {
		t.Fatalf("restore(intact) = %v", err)
	}
}

// TestRestoreNeedsTheMasterKey: restore without a master key, or with
// another one, is refused and creates nothing.
func TestRestoreNeedsTheMasterKey(t *testing.T) {
	_, _, file, _ := backupTestEnv(t)
	for _, c := range []struct {
		name string
		e    env
		want string
	}{
		{"no master key", env{}, "no master key"},
		{"another master key", env{"KMS_MASTER_KEY": newKey()}, "another master key"},
	} {
		t.Run(c.name, func(t *testing.T) {
			target := filepath.Join(t.TempDir(), "restored")
			err := run(context.Background(), []string{"restore", "-i", file, "-data", target, "-log-level", "warn"}, c.e.get, io.Discard, io.Discard)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("restore = %v, want an error saying %q", err, c.want)
			}
			if _, err := os.Stat(target); !os.IsNotExist(err) {
				t.Errorf("restore left %s: %v", target, err)
			}
		})
	}
}

// TestRestoreHintRuns: the verify-audit command that restore prints runs
// as printed, in a shell, with the master key given as it was to restore
// (a file, or KMS_MASTER_KEY in the environment), into a path that needs
// quoting.
func TestRestoreHintRuns(t *testing.T) {
	bin := kmsdBinary(t)
	e, _, file, _ := backupTestEnv(t)
	keyFile := filepath.Join(t.TempDir(), "master key")
	if err := os.WriteFile(keyFile, []byte(e["KMS_MASTER_KEY"]+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		e    env // the environment of restore and of the printed command
	}{
		{"KMS_MASTER_KEY", nil, env{"KMS_MASTER_KEY": e["KMS_MASTER_KEY"]}},
		{"master key file", []string{"-master-key-file", keyFile}, env{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			target := filepath.Join(t.TempDir(), "restored data's dir")
			var out bytes.Buffer
			args := append([]string{"restore", "-i", file, "-data", target, "-log-level", "warn"}, c.args...)
			if err := run(context.Background(), args, c.e.get, &out, io.Discard); err != nil {
				t.Fatalf("restore = %v", err)
			}
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			hint := strings.TrimSpace(lines[len(lines)-1])
			if !strings.HasPrefix(hint, "kmsd verify-audit ") {
				t.Fatalf("restore printed:\n%s\nwant a kmsd verify-audit command on its last line", out.String())
			}
			cmd := exec.Command("/bin/sh", "-c", hint)
			cmd.Env = append(childEnv(c.e), "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"))
			cmd.Dir = t.TempDir() // the command does not depend on where it runs
			got, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(got), "activity chain intact") {
				t.Errorf("%s: %v\n%s", hint, err, got)
			}
		})
	}
}
