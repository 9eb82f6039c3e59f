package main

import (
	"bytes"
	"crypto/ecdh"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/envelope"
)

// TestEncryptOnChunkBoundary: encrypt of a file or standard input whose
// size is on or next to a multiple of 64 KiB writes the chunks that
// docs/FORMAT.md section 9.2 says a writer makes (a full chunk last when
// the input ends on a boundary, never a full chunk and an empty last
// one), and decrypt gives the input back.
func TestEncryptOnChunkBoundary(t *testing.T) {
	_, e := newRingServer(t, "chunks")
	dir := t.TempDir()
	for _, size := range []int{0, 1, envelope.ChunkSize - 1, envelope.ChunkSize, envelope.ChunkSize + 1, 2 * envelope.ChunkSize} {
		plain, in, sealed := plainFile(t, dir, size)
		kmsctl(t, e, "", "encrypt", "-ring", "chunks", "-force", "-in", in, "-out", sealed).want(t, 0, "encrypt a file")
		fromFile, _ := os.ReadFile(sealed)
		fromStdin := []byte(kmsctl(t, e, string(plain), "encrypt", "-ring", "chunks").want(t, 0, "encrypt standard input").stdout)
		for what, env := range map[string][]byte{"file": fromFile, "standard input": fromStdin} {
			info, err := envelope.ReadInfo(bytes.NewReader(env))
			if err != nil {
				t.Fatalf("%d bytes from %s: %v", size, what, err)
			}
			hash, _ := base64.RawURLEncoding.DecodeString(info.Hash)
			header, _ := base64.RawURLEncoding.DecodeString(info.Header)
			chunks := max(1, (size+envelope.ChunkSize-1)/envelope.ChunkSize)
			if got, want := len(env)-(44+len(hash)+len(header)), size+16*chunks; got != want {
				t.Errorf("%d bytes from %s: the chunks are %d bytes, want %d (%d chunks)", size, what, got, want, chunks)
			}
			out := kmsctl(t, e, string(env), "decrypt").want(t, 0, "decrypt")
			if out.stdout != string(plain) {
				t.Errorf("%d bytes from %s: decrypt gave %d bytes", size, what, len(out.stdout))
			}
		}
	}
}

// TestAssociatedDataBytes: -ad is the bytes of the argument as given,
// with no encoding, terminator or trimming, so a program that opens the
// envelope with the envelope package (or by docs/FORMAT.md) passes the
// same bytes; -ad "" is no associated data.
func TestAssociatedDataBytes(t *testing.T) {
	s := newServer(t, kms.Options{})
	keyFile := createRing(t, s, "ad")
	e := s.env.with("KMS_PRIVATE_KEY_FILE", keyFile)
	text, _ := os.ReadFile(keyFile)
	pk, err := kms.ParsePrivateKey(text)
	if err != nil {
		t.Fatal(err)
	}
	opener := envelope.New(s.Service, pk)
	for _, ad := range []string{"", "report.pdf", " spaced \n", "caf\u00e9/\u65e5\u672c", "\xff\xfe not UTF-8"} {
		env := kmsctl(t, e, "data", "encrypt", "-ring", "ad", "-ad", ad).want(t, 0, "encrypt").stdout
		if got, err := opener.Open(s.RootCtx, []byte(env), []byte(ad)); err != nil || string(got) != "data" {
			t.Errorf("-ad %q: Open with the argument's bytes = %q, %v", ad, got, err)
		}
		if ad == "" {
			if _, err := opener.Open(s.RootCtx, []byte(env), nil); err != nil {
				t.Errorf("-ad \"\": Open without associated data = %v", err)
			}
			continue
		}
		if _, err := opener.Open(s.RootCtx, []byte(env), []byte(strings.TrimSpace(ad)+"\x00")); err == nil {
			t.Errorf("-ad %q: Open with other bytes succeeded", ad)
		}
	}
}

// TestPrivateKeyFile pins the forms of a -private-key file that
// docs/KMSCTL.md section 5 lists (KMS_PRIVATE_KEY and standard input
// hold the same text): standard base64 with padding of the 32 bytes the
// service answered at the ring's creation, as ring create -private-key-out
// writes it, with white space around it and line breaks inside it; or
// one PEM block, PKCS #8 "PRIVATE KEY" (X25519 or RSA) or PKCS #1 "RSA
// PRIVATE KEY". Each accepted form unwraps the ring's keys; anything else
// is refused.
func TestPrivateKeyFile(t *testing.T) {
	s := newServer(t, kms.Options{})
	ctx := s.RootCtx
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	rsaPub, _ := x509.MarshalPKIXPublicKey(&rsaKey.PublicKey)
	rsaPKCS8, _ := x509.MarshalPKCS8PrivateKey(rsaKey)
	xKey, _ := ecdh.X25519().GenerateKey(rand.Reader)
	xPub, _ := x509.MarshalPKIXPublicKey(xKey.PublicKey())
	xPKCS8, _ := x509.MarshalPKCS8PrivateKey(xKey)
	pemOf := func(typ string, der []byte) string {
		return string(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}))
	}

	// A ring made by kmsctl: its key file as written.
	written, err := os.ReadFile(createRing(t, s, "xwing"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(string(written), "\n") || len(written) != 45 {
		t.Fatalf("ring create -private-key-out wrote %d bytes, want 44 of base64 and a line feed", len(written))
	}
	b64 := strings.TrimSuffix(string(written), "\n")
	x25519, err := s.Service.CreateKeyRing(ctx, kms.CreateKeyRingInput{Name: "x25519", KEM: "x25519"})
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []kms.CreateKeyRingInput{
		{Name: "x25519-pem", PublicKey: pemOf("PUBLIC KEY", xPub)},
		{Name: "rsa", PublicKey: pemOf("PUBLIC KEY", rsaPub)},
	} {
		if _, err := s.Service.CreateKeyRing(ctx, in); err != nil {
			t.Fatal(err)
		}
	}

	accepted := []struct{ name, ring, text string }{
		{"as ring create writes it", "xwing", string(written)},
		{"without a line feed", "xwing", b64},
		{"CRLF and blanks around it", "xwing", "\r\n  " + b64 + " \r\n\r\n"},
		{"broken across lines", "xwing", b64[:20] + "\n" + b64[20:40] + "\r\n" + b64[40:] + "\n"},
		{"X25519 from the service", "x25519", x25519.PrivateKey},
		{"X25519 PKCS #8 PEM", "x25519-pem", pemOf("PRIVATE KEY", xPKCS8)},
		{"RSA PKCS #8 PEM", "rsa", pemOf("PRIVATE KEY", rsaPKCS8)},
		{"RSA PKCS #1 PEM", "rsa", pemOf("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(rsaKey))},
		{"PEM with blanks around it", "rsa", "\n\n" + pemOf("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(rsaKey)) + "\n  \n"},
	}
	dir := t.TempDir()
	for _, tc := range accepted {
		res, err := s.Service.Encrypt(ctx, kms.EncryptInput{RingName: tc.ring})
		if err != nil {
			t.Fatal(err)
		}
		path := writeFile(t, dir, "key", []byte(tc.text))
		for how, c := range map[string]*cli{
			"-private-key FILE": {getenv: env{}.get},
			"-private-key -":    {getenv: env{}.get, stdin: strings.NewReader(tc.text)},
			"KMS_PRIVATE_KEY":   {getenv: env{"KMS_PRIVATE_KEY": tc.text}.get},
		} {
			arg := map[string]string{"-private-key FILE": path, "-private-key -": "-"}[how]
			pk, err := c.privateKey("kmsctl decrypt", arg)
			if err != nil {
				t.Errorf("%s, %s: %v", tc.name, how, err)
				continue
			}
			if key, err := pk.Unwrap(res.RingID, res.Key); err != nil || len(key) != 32 {
				t.Errorf("%s, %s: Unwrap = %d bytes, %v", tc.name, how, len(key), err)
			}
		}
	}

	raw, _ := base64.StdEncoding.DecodeString(b64)
	refused := map[string]string{
		"base64 without padding": strings.TrimRight(b64, "="),
		"base64url":              base64.URLEncoding.EncodeToString(bytes.Repeat([]byte{0xfb, 0xff}, 16)),
		"blank inside base64":    b64[:20] + " " + b64[20:],
		"hex":                    hex.EncodeToString(raw),
		"the 32 bytes raw":       string(raw),
		"base64 of 31 bytes":     base64.StdEncoding.EncodeToString(raw[:31]),
		"JSON string":            `"` + b64 + `"`,
		"text before PEM":        "ring rsa\n" + pemOf("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(rsaKey)),
		"two PEM blocks":         pemOf("PRIVATE KEY", xPKCS8) + pemOf("PRIVATE KEY", xPKCS8),
		"PEM public key":         pemOf("PUBLIC KEY", xPub),
		"PEM EC PRIVATE KEY":     pemOf("EC PRIVATE KEY", xPKCS8),
		"empty":                  "",
	}
	for name, text := range refused {
		path := writeFile(t, dir, "bad", []byte(text))
		c := &cli{getenv: env{}.get}
		if _, err := c.privateKey("kmsctl decrypt", path); kms.ErrorKind(err) != kms.KindInvalid {
			t.Errorf("%s: privateKey = %v, want invalid", name, err)
		}
	}
	// As a command: exit 1, and the message does not quote the key.
	bad := writeFile(t, dir, "bad", []byte(strings.TrimRight(b64, "=")))
	r := kmsctl(t, s.env, "", "decrypt", "-private-key", bad, "-in", bad).want(t, 1, "decrypt with a key without padding")
	if strings.Contains(r.stderr, b64[:20]) {
		t.Errorf("the error quotes the key: %s", r.stderr)
	}
}

// TestCryptChecksFirst: encrypt and decrypt check their input and output
// before they call the service, so that a file that cannot be read or
// written costs no hash (an encrypt counts against the key's limit), and
// say what is wrong with the path given, not with a temporary file. A
// file at -out is replaced only with -force, by both commands.
func TestCryptChecksFirst(t *testing.T) {
	s, e := newRingServer(t, "files")
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
