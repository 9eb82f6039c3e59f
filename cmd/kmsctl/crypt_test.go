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
	s := newServer(t, kms.Options{})
	keyFile := createRing(t, s, "chunks")
	e := s.env.with("KMS_PRIVATE_KEY_FILE", keyFile)
	dir := t.TempDir()
	for _, size := range []int{0, 1, envelope.ChunkSize - 1, envelope.ChunkSize, envelope.ChunkSize + 1, 2 * envelope.ChunkSize} {
		plain := make([]byte, size)
		rand.Read(plain)
		in := writeFile(t, dir, "plain", plain)
		sealed := filepath.Join(dir, "plain.rkms")
		kmsctl(t, e, "", "encrypt", "-ring", "chunks", "-in", in, "-out", sealed).want(t, 0, "encrypt a file")
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
