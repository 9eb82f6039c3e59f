package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/envelope"
)

// envelopeKey returns the key that the hash of the envelope in the file
// path names.
func envelopeKey(t *testing.T, s *server, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	info, err := envelope.ReadInfo(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	h, err := s.Service.LookupHash(s.RootCtx, info.Hash)
	if err != nil {
		t.Fatalf("%s: LookupHash = %v", path, err)
	}
	return h.KeyID
}

// dirNames lists the names in dir.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// TestRewrap: a file of several chunks, encrypted with an Asset before a
// rotation, is rewrapped, on a ring of each kind of data keys: the new
// envelope names the ring's new active key, decrypts to the same bytes
// with the same -ad, and signs the same Asset; the summary names both
// keys and hashes and never a share. -out may name the -in file, which
// is then replaced, keeping its permissions, with no -force; through a
// symbolic link, the file it leads to.
func TestRewrap(t *testing.T) {
	s := newServer(t, kms.Options{})
	for _, dataKeys := range []string{kms.DataKeysRing, kms.DataKeysSplit} {
		t.Run(dataKeys, func(t *testing.T) {
			ring := "files-" + dataKeys
			keyFile := filepath.Join(t.TempDir(), ring+".key")
			kmsctl(t, s.env, "", "ring", "create", "-data-keys", dataKeys, "-private-key-out", keyFile, ring).want(t, 0, "ring create")
			e := s.env.with("KMS_PRIVATE_KEY_FILE", keyFile)
			dir := t.TempDir()
			plain, in, sealed := plainFile(t, dir, 5*envelope.ChunkSize+321)
			var enc kms.EncryptResult
			decodeJSON(t, kmsctl(t, e, "", "-json", "encrypt", "-ring", ring, "-ad", "plain", "-asset-data", `{"name":"plain"}`,
				"-in", in, "-out", sealed).want(t, 0, "encrypt"), &enc)
			var rotated struct{ Key kms.Key }
			decodeJSON(t, kmsctl(t, e, "", "-json", "ring", "rotate", ring).want(t, 0, "ring rotate"), &rotated)
			if rotated.Key.ID == enc.Key.ID {
				t.Fatalf("ring rotate kept the key %s", enc.Key.ID)
			}

			out := filepath.Join(dir, "new.rkms")
			r := kmsctl(t, e, "", "-json", "rewrap", "-ad", "plain", "-in", sealed, "-out", out).want(t, 0, "rewrap")
			var got rewrapped
			decodeJSON(t, r, &got)
			if got.Opened.Hash != enc.Hash || got.Decrypt.Key.ID != enc.Key.ID || got.Encrypt.Key.ID != rotated.Key.ID ||
				got.Encrypt.Hash == enc.Hash || got.Encrypt.Asset == nil || got.Encrypt.Asset.ID != enc.Asset.ID {
				t.Errorf("rewrap -json = %s\nwant %s under %s opened, sealed under %s with the Asset %s", r.stdout, enc.Hash, enc.Key.ID, rotated.Key.ID, enc.Asset.ID)
			}
			if strings.Contains(r.stdout+r.stderr, "keyShare") {
				t.Errorf("rewrap printed a share:\n%s", r.stdout)
			}
			if k := envelopeKey(t, s, out); k != rotated.Key.ID {
				t.Errorf("the new envelope names key %s, want the active %s", k, rotated.Key.ID)
			}
			dec := filepath.Join(dir, "new.out")
			r = kmsctl(t, e, "", "-json", "decrypt", "-ad", "plain", "-in", out, "-out", dec).want(t, 0, "decrypt the new envelope")
			var opened kms.DecryptResult
			decodeJSON(t, r, &opened)
			if b, _ := os.ReadFile(dec); !bytes.Equal(b, plain) {
				t.Fatalf("the new envelope decrypts to %d bytes, not the %d encrypted", len(b), len(plain))
			}
			if !opened.Asset.Valid || opened.Asset.ID != enc.Asset.ID || opened.Asset.Data["name"] != "plain" {
				t.Errorf("the new envelope's Asset = %+v, want %s unchanged", opened.Asset, enc.Asset.ID)
			}
			kmsctl(t, e, "", "decrypt", "-ad", "other", "-in", out).want(t, 1, "decrypt the new envelope with other -ad")

			// The table, from the envelope on standard input to standard
			// output: the summary then goes to standard error.
			old, _ := os.ReadFile(sealed)
			r = kmsctl(t, e, string(old), "rewrap", "-ad", "plain").want(t, 0, "rewrap standard input")
			for _, w := range []string{"ring:      " + ring, "old key:   " + enc.Key.ID, "old hash:  " + enc.Hash, "new key:   " + rotated.Key.ID, "out:       standard output"} {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("rewrap printed:\n%s\nwant %q", r.stderr, w)
				}
			}
			if got := kmsctl(t, e, r.stdout, "decrypt", "-ad", "plain").want(t, 0, "decrypt").stdout; got != string(plain) {
				t.Errorf("the envelope rewrapped to standard output decrypts to %d bytes", len(got))
			}

			// In place: -out is -in, spelled otherwise; no -force needed,
			// the file's mode stays.
			if err := os.Chmod(sealed, 0o640); err != nil {
				t.Fatal(err)
			}
			kmsctl(t, e, "", "rewrap", "-ad", "plain", "-in", sealed, "-out", filepath.Join(dir, ".", "plain.rkms")).want(t, 0, "rewrap in place")
			if k := envelopeKey(t, s, sealed); k != rotated.Key.ID {
				t.Errorf("rewrapped in place, the envelope names key %s, want %s", k, rotated.Key.ID)
			}
			if st, err := os.Stat(sealed); err != nil || st.Mode().Perm() != 0o640 {
				t.Errorf("rewrapped in place: %v, %v; want mode 0640 kept", st, err)
			}
			if got := kmsctl(t, e, "", "decrypt", "-ad", "plain", "-in", sealed).want(t, 0, "decrypt").stdout; got != string(plain) {
				t.Errorf("the envelope rewrapped in place decrypts to %d bytes", len(got))
			}

			// Through a symbolic link: the file it leads to is rewritten,
			// and the link stays.
			link := filepath.Join(dir, "link.rkms")
			if err := os.Symlink("plain.rkms", link); err != nil {
				t.Skipf("symlink: %v", err)
			}
			decodeJSON(t, kmsctl(t, e, "", "-json", "ring", "rotate", ring).want(t, 0, "ring rotate"), &rotated)
			kmsctl(t, e, "", "rewrap", "-ad", "plain", "-in", link, "-out", link).want(t, 0, "rewrap through a link")
			if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
				t.Errorf("the link after rewrap: %v, %v", st, err)
			}
			if k := envelopeKey(t, s, sealed); k != rotated.Key.ID {
				t.Errorf("rewrapped through a link, the envelope names key %s, want %s", k, rotated.Key.ID)
			}
			if names := dirNames(t, dir); !slices.Equal(names, []string{"link.rkms", "new.out", "new.rkms", "plain", "plain.rkms"}) {
				t.Errorf("the directory holds %v", names)
			}
		})
	}
}

// TestRewrapAtomic: a rewrap that fails, before the service is called,
// at its decrypt call (refused for want of a permission) or midway (a
// chunk that fails authentication after others were sealed again),
// leaves nothing at -out: no new file, an existing one untouched, the
// input rewrapped in place untouched, no temporary file.
func TestRewrapAtomic(t *testing.T) {
	s, e := newRingServer(t, "files")
	dir := t.TempDir()
	_, in, sealed := plainFile(t, dir, 4*envelope.ChunkSize+7)
	kmsctl(t, e, "", "encrypt", "-ring", "files", "-in", in, "-out", sealed).want(t, 0, "encrypt")
	kmsctl(t, e, "", "ring", "rotate", "files").want(t, 0, "ring rotate")
	old, _ := os.ReadFile(sealed)
	tampered := bytes.Clone(old)
	tampered[len(tampered)-3] ^= 1
	bad := writeFile(t, dir, "bad.rkms", tampered)
	exists := writeFile(t, dir, "exists", []byte("keep"))

	// An API key that may encrypt on the ring but not decrypt.
	kmsctl(t, s.env, "", "account", "create", "acme").want(t, 0, "account create")
	var key kms.APIKey
	decodeJSON(t, kmsctl(t, s.env, "", "-json", "apikey", "create", "-account-uid", "acme", "-flag", "keyring.files.encrypt").want(t, 0, "apikey create"), &key)
	encryptOnly := e.with("KMS_API_KEY", key.Key)

	tests := []struct {
		name string
		e    env
		args []string
		want string // in stderr
	}{
		{"output exists", e, []string{"-in", sealed, "-out", exists}, "-out " + exists + ": the file exists: give -force"},
		{"decrypt refused", encryptOnly, []string{"-in", sealed, "-out", filepath.Join(dir, "new.rkms")}, "(permission_denied)"},
		{"decrypt refused, -force", encryptOnly, []string{"-in", sealed, "-out", exists, "-force"}, "(permission_denied)"},
		{"decrypt refused, in place", encryptOnly, []string{"-in", sealed, "-out", sealed}, "(permission_denied)"},
		{"last chunk fails", e, []string{"-in", bad, "-out", filepath.Join(dir, "new.rkms")}, "chunk 4 fails authentication"},
		{"last chunk fails, -force", e, []string{"-in", bad, "-out", exists, "-force"}, "chunk 4 fails authentication"},
		{"last chunk fails, in place", e, []string{"-in", bad, "-out", bad}, "chunk 4 fails authentication"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := kmsctl(t, tt.e, "", append([]string{"rewrap"}, tt.args...)...).want(t, 1, "rewrap")
			if !strings.Contains(r.stderr, tt.want) || strings.Contains(r.stderr, ".tmp") {
				t.Errorf("stderr = %q, want %q and no temporary file named", r.stderr, tt.want)
			}
			if r.stdout != "" {
				t.Errorf("stdout = %q, want nothing", r.stdout)
			}
			if names := dirNames(t, dir); !slices.Equal(names, []string{"bad.rkms", "exists", "plain", "plain.rkms"}) {
				t.Errorf("the directory holds %v", names)
			}
			for path, want := range map[string][]byte{exists: []byte("keep"), sealed: old, bad: tampered} {
				if b, _ := os.ReadFile(path); !bytes.Equal(b, want) {
					t.Errorf("%s changed", filepath.Base(path))
				}
			}
		})
	}

	// The midway failures made their encrypt call (chunk 0 opened); the
	// others made none.
	var acts kms.List[*kms.Activity]
	decodeJSON(t, kmsctl(t, s.env, "", "activity", "search", "-action", "encrypt", "-json").want(t, 0, "activity search"), &acts)
	if len(acts.Data) != 1+3 {
		t.Errorf("%d encrypt records, want 4: the file's and one a midway failure", len(acts.Data))
	}
}

// TestInPlaceReplacedMeanwhile: an output written in place of its input
// without -force is renamed onto it only if the input's file is still
// there, unchanged: one put there meanwhile, one changed, or none, is
// left as it is.
func TestInPlaceReplacedMeanwhile(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, "env", []byte("old"))
	in, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	replace := func() {
		os.Rename(writeFile(t, dir, "env.new", []byte("other")), path)
	}
	for name, change := range map[string]func(){
		"replaced": replace,
		"changed": func() {
			f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			f.Write([]byte("er"))
			f.Close()
		},
		"removed": func() { os.Remove(path) },
	} {
		writeFile(t, dir, "env", []byte("old"))
		if in, err = os.Stat(path); err != nil {
			t.Fatal(err)
		}
		a, err := createOutput(path, false, in)
		if err != nil {
			t.Fatalf("%s: createOutput in place = %v", name, err)
		}
		a.Write([]byte("new"))
		change()
		before, _ := os.ReadFile(path)
		if err := a.commit(); err == nil || !strings.Contains(err.Error(), "-out "+path+": the file was changed, replaced or removed meanwhile") {
			t.Errorf("%s: commit = %v", name, err)
		}
		a.abort()
		if b, _ := os.ReadFile(path); !bytes.Equal(b, before) {
			t.Errorf("%s: the file holds %q, want %q", name, b, before)
		}
		if names := dirNames(t, dir); len(names) > 1 {
			t.Errorf("%s: the directory holds %v", name, names)
		}
	}
	// With -force, or not in place, the file is replaced as before.
	writeFile(t, dir, "env", []byte("old"))
	in, _ = os.Stat(path)
	if _, err := createOutput(path, false, nil); err == nil {
		t.Error("createOutput onto a file, not in place, without -force succeeded")
	}
	a, err := createOutput(path, true, in)
	if err != nil {
		t.Fatal(err)
	}
	a.Write([]byte("new"))
	replace()
	if err := a.commit(); err != nil {
		t.Errorf("commit in place with -force = %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "new" {
		t.Errorf("with -force the file holds %q", b)
	}
}
