package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ringkms/kms"
)

// TestCryptChecksFirst: encrypt and decrypt check their input and output
// before they call the service, so that a file that cannot be read or
// written costs no hash (an encrypt counts against the key's limit), and
// say what is wrong with the path given, not with a temporary file. A
// file at -out is replaced only with -force, by both commands.
func TestCryptChecksFirst(t *testing.T) {
	s := newServer(t, kms.Options{})
	keyFile := createRing(t, s, "files")
	e := s.env.with("KMS_PRIVATE_KEY_FILE", keyFile)
	dir := t.TempDir()
	plain := writeFile(t, dir, "plain", []byte("some plaintext"))
	exists := writeFile(t, dir, "exists", []byte("keep"))
	unreadable := writeFile(t, dir, "unreadable", []byte("secret"))
	if err := os.Chmod(unreadable, 0); err != nil {
		t.Fatal(err)
	}
	missingDir := filepath.Join(dir, "nosuch", "out")

	tests := []struct {
		name      string
		args      []string
		want      []string // in stderr
		needsPerm bool     // the case needs file permissions to hold (not root)
	}{
		{"input is a directory", []string{"-in", dir, "-out", filepath.Join(dir, "a.rkms")}, []string{"-in " + dir + ": is a directory"}, false},
		{"input does not exist", []string{"-in", filepath.Join(dir, "nosuch"), "-out", filepath.Join(dir, "b.rkms")}, []string{"-in " + filepath.Join(dir, "nosuch") + ": "}, false},
		{"input unreadable", []string{"-in", unreadable, "-out", filepath.Join(dir, "c.rkms")}, []string{"-in " + unreadable + ": permission denied"}, true},
		{"output is a directory", []string{"-in", plain, "-out", dir}, []string{"-out " + dir + ": is a directory"}, false},
		{"output exists", []string{"-in", plain, "-out", exists}, []string{"-out " + exists + ": the file exists", "-force"}, false},
		{"output's directory does not exist", []string{"-in", plain, "-out", missingDir}, []string{"-out " + missingDir + ": the directory " + filepath.Dir(missingDir) + " does not exist"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.needsPerm && os.Geteuid() == 0 {
				t.Skip("root reads files whatever their mode")
			}
			r := kmsctl(t, e, "", append([]string{"encrypt", "-ring", "files"}, tt.args...)...).want(t, 1, "encrypt "+tt.name)
			for _, w := range tt.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr = %q, want %q", r.stderr, w)
				}
			}
			if strings.Contains(r.stderr, ".tmp") {
				t.Errorf("stderr = %q names a temporary file", r.stderr)
			}
		})
	}
	if b, _ := os.ReadFile(exists); string(b) != "keep" {
		t.Errorf("the file at -out holds %q after a refused encrypt", b)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 3 { // plain, exists, unreadable
		t.Errorf("the refused runs left files: %v", entries)
	}

	// None of them called the service: no encrypt record, no hash.
	var acts kms.List[*kms.Activity]
	decodeJSON(t, kmsctl(t, s.env, "", "activity", "search", "-action", "encrypt", "-json").want(t, 0, "activity search"), &acts)
	if len(acts.Data) != 0 {
		t.Errorf("%d encrypt records after refused runs, want none", len(acts.Data))
	}
	var keys kms.List[*kms.Key]
	decodeJSON(t, kmsctl(t, s.env, "", "key", "list", "-ring", "files", "-json").want(t, 0, "key list"), &keys)
	if k := keys.Data[0]; k.EncryptCount == nil || *k.EncryptCount != 0 {
		t.Errorf("encrypt count after refused runs = %s, want 0", cell(k.EncryptCount))
	}

	// -force replaces a file, for encrypt as for decrypt; decrypt refuses
	// one without it, before its call.
	kmsctl(t, e, "", "encrypt", "-ring", "files", "-in", plain, "-out", exists, "-force").want(t, 0, "encrypt -force")
	sealed := exists
	out := writeFile(t, dir, "out", []byte("keep"))
	r := kmsctl(t, e, "", "decrypt", "-in", sealed, "-out", out).want(t, 1, "decrypt onto a file")
	if !strings.Contains(r.stderr, "-out "+out+": the file exists: give -force") {
		t.Errorf("decrypt onto a file: stderr %q", r.stderr)
	}
	if b, _ := os.ReadFile(out); string(b) != "keep" {
		t.Errorf("the file at -out holds %q after a refused decrypt", b)
	}
	decodeJSON(t, kmsctl(t, s.env, "", "activity", "search", "-action", "decrypt", "-json").want(t, 0, "activity search"), &acts)
	if len(acts.Data) != 0 {
		t.Errorf("%d decrypt records after a refused run, want none", len(acts.Data))
	}
	kmsctl(t, e, "", "decrypt", "-in", sealed, "-out", out, "-force").want(t, 0, "decrypt -force")
	if b, _ := os.ReadFile(out); string(b) != "some plaintext" {
		t.Errorf("decrypt -force wrote %q", b)
	}
	r = kmsctl(t, e, "", "decrypt", "-in", sealed, "-out", dir, "-force").want(t, 1, "decrypt onto a directory")
	if !strings.Contains(r.stderr, "-out "+dir+": is a directory") {
		t.Errorf("decrypt onto a directory: stderr %q", r.stderr)
	}
}
