package e2e

import (
	"bytes"
	"encoding/base64"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ringkms/kms"
)

// TestBackupRestore: kmsd backup of a running kmsd under load, kmsd
// restore into a new directory, verify-audit on it, and a kmsd on it
// that decrypts what was encrypted before; the backup holds no secret in
// the clear; with kmsd stopped, kmsd backup takes the store itself; a
// damaged backup does not restore and leaves no directory.
func TestBackupRestore(t *testing.T) {
	in, p, v, root := serve(t)
	ring := must[*kms.CreateKeyRingResult](t, "CreateKeyRing")(root.CreateKeyRing(bg, kms.CreateKeyRingInput{Name: "docs"}))
	before := must[*kms.EncryptResult](t, "Encrypt")(root.Encrypt(bg, kms.EncryptInput{RingName: "docs", Asset: &kms.AssetInput{Data: map[string]any{"f": "a"}}}))
	key := unwrap(t, ring.PrivateKey, before.RingID, before.Key)

	// Encrypt calls go on during the backup.
	var load loop
	var calls atomic.Int64
	for range 4 {
		load.run(func(int) bool {
			if _, err := root.Encrypt(bg, kms.EncryptInput{RingName: "docs"}); err != nil {
				t.Errorf("Encrypt during the backup: %v", err)
				return false
			}
			calls.Add(1)
			return true
		})
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "kms.backup")
	for calls.Load() < 20 {
		runtime.Gosched()
	}
	out := in.kmsdCmd(t, "backup", "-data", in.data, "-o", file)
	during := calls.Load()
	load.halt()
	if !strings.Contains(out, "backup (online)") {
		t.Fatalf("kmsd backup of a running kmsd printed:\n%s", out)
	}
	t.Logf("kmsd backup: %s(%d encrypt calls by then)", out, during)
	fi, err := os.Stat(file)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("backup file: %v, mode %v; want 0600", err, fi.Mode())
	}
	backup, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	mk, _ := base64.StdEncoding.DecodeString(in.masterKey)
	for name, secret := range map[string][]byte{"bootstrap API key": []byte(in.bootstrap), "master key": []byte(in.masterKey), "raw master key": mk,
		"ring private key": []byte(ring.PrivateKey), "ring key": key} {
		if bytes.Contains(backup, secret) {
			t.Errorf("the backup holds the %s in the clear", name)
		}
	}

	// Restore into a new directory, verify, serve.
	restored := *in
	restored.data = filepath.Join(dir, "restored")
	out = in.kmsdCmd(t, "restore", "-i", file, "-data", restored.data)
	if !strings.Contains(out, "restored ") {
		t.Fatalf("kmsd restore printed:\n%s", out)
	}
	restored.verifyAudit(t)
	p2 := restored.start(t)
	root2 := clientOf(p2, t, v, in.bootstrap)
	dec := must[*kms.DecryptResult](t, "Decrypt on the restored kmsd")(root2.Decrypt(bg, kms.DecryptInput{Hash: before.Hash, Header: before.Header}))
	if !dec.Asset.Valid || !bytes.Equal(unwrap(t, ring.PrivateKey, dec.RingID, dec.Key), key) {
		t.Fatalf("Decrypt on the restored kmsd = %+v, want the key from before the backup", dec)
	}
	p2.Stop(t)

	// With kmsd stopped, the backup is taken offline.
	p.Stop(t)
	offline := filepath.Join(dir, "offline.backup")
	if out := in.kmsdCmd(t, "backup", "-data", in.data, "-o", offline); !strings.Contains(out, "backup (offline)") {
		t.Fatalf("kmsd backup of a stopped kmsd printed:\n%s", out)
	}

	// A damaged backup does not restore, and leaves nothing behind.
	backup[len(backup)/2] ^= 1
	damaged := filepath.Join(dir, "damaged.backup")
	if err := os.WriteFile(damaged, backup, 0o600); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(dir, "from-damaged")
	if out, err := in.kmsdRun("restore", "-i", damaged, "-data", target); err == nil || !strings.Contains(out, "not an intact backup") {
		t.Fatalf("kmsd restore of a damaged backup: %v\n%s", err, out)
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Fatalf("kmsd restore left %s after failing: %v", target, err)
	}
}
