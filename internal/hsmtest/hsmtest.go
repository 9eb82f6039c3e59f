// Package hsmtest gives tests a real PKCS#11 token: a SoftHSM2 token,
// initialised in a temporary directory for one test, with keys made by
// the token's own tools (softhsm2-util and OpenSC's pkcs11-tool), as an
// operator would make them.
//
//	tok := hsmtest.New(t, "kms")
//	tok.GenerateAESKey(t, "kms-master", hsmtest.AESKeyOptions{})
//	uri := tok.URI("kms-master") // pkcs11:token=kms;object=kms-master?module-path=...&pin-source=file:...
//
// New points SOFTHSM2_CONF at the token's configuration for the rest of
// the test (t.Setenv, so the test may not be parallel), and Token.Env is
// the same setting for a child process such as kmsd.
//
// Without SoftHSM2 or pkcs11-tool, New skips the test with a message
// saying how to get them; under CI=true it fails it instead, so that CI
// never passes by skipping. The package is pure Go: it runs the tools,
// and loads no PKCS#11 module itself.
package hsmtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Install is what to do when SoftHSM2 or pkcs11-tool is missing.
const Install = "install SoftHSM2 and OpenSC (Debian: apt-get install softhsm2 opensc)"

// ConfEnv is the variable through which SoftHSM2 finds its configuration.
const ConfEnv = "SOFTHSM2_CONF"

// Token is an initialised SoftHSM2 token in a temporary directory.
type Token struct {
	ModulePath string // the SoftHSM2 PKCS#11 module
	Conf       string // the softhsm2.conf that points SoftHSM2 at Dir
	Env        string // ConfEnv + "=" + Conf, for the environment of a child process
	Dir        string // the token directory
	TokenLabel string // the token's label
	PIN        string // the user PIN
	SOPIN      string // the security officer's PIN
	PINFile    string // a file holding PIN, mode 0600, named by URI's pin-source

	util, tool string // softhsm2-util and pkcs11-tool
}

// New initialises a token labelled label (with random PINs) in a
// temporary directory and sets SOFTHSM2_CONF for the rest of the test.
func New(t testing.TB, label string) *Token {
	t.Helper()
	util, tool, module, err := find()
	if err != nil {
		if os.Getenv("CI") != "true" {
			t.Skipf("hsmtest: %v: %s", err, Install)
		}
		t.Fatalf("hsmtest: %v (%s)", err, Install)
	}
	dir := t.TempDir()
	tok := &Token{
		ModulePath: module,
		Conf:       filepath.Join(dir, "softhsm2.conf"),
		Dir:        filepath.Join(dir, "tokens"),
		TokenLabel: label,
		PIN:        rand.Text()[:12],
		SOPIN:      rand.Text()[:12],
		PINFile:    filepath.Join(dir, "pin"),
		util:       util,
		tool:       tool,
	}
	tok.Env = ConfEnv + "=" + tok.Conf
	if err := os.Mkdir(tok.Dir, 0o700); err != nil {
		t.Fatalf("hsmtest: %v", err)
	}
	conf := "directories.tokendir = " + tok.Dir + "\nobjectstore.backend = file\nlog.level = ERROR\nslots.removable = false\n"
	if err := os.WriteFile(tok.Conf, []byte(conf), 0o600); err != nil {
		t.Fatalf("hsmtest: %v", err)
	}
	if err := os.WriteFile(tok.PINFile, []byte(tok.PIN+"\n"), 0o600); err != nil {
		t.Fatalf("hsmtest: %v", err)
	}
	t.Setenv(ConfEnv, tok.Conf)
	tok.InitToken(t, label)
	return tok
}

// InitToken initialises one more token, labelled label, with the same
// PINs, in the same directory.
func (tok *Token) InitToken(t testing.TB, label string) {
	t.Helper()
	tok.run(t, tok.util, "--init-token", "--free", "--label", label, "--pin", tok.PIN, "--so-pin", tok.SOPIN)
}

// URI returns the PKCS#11 URI of the object labelled object on the
// token, with the module's path and the PIN file as pin-source.
func (tok *Token) URI(object string) string {
	return "pkcs11:token=" + escape(tok.TokenLabel, false) + ";object=" + escape(object, false) +
		"?module-path=" + escape(tok.ModulePath, true) + "&pin-source=file:" + escape(tok.PINFile, true)
}

// AESKeyOptions shapes a secret key. The zero value is the key the
// service wants: AES-256, sensitive, not extractable.
type AESKeyOptions struct {
	Size         int    // in bytes: 16, 24 or 32; 0 means 32
	ID           []byte // CKA_ID; none when nil
	Extractable  bool   // CKA_EXTRACTABLE true
	NotSensitive bool   // CKA_SENSITIVE false
}

// GenerateAESKey makes an AES secret key labelled label on the token, as
// an operator would: pkcs11-tool --keygen --key-type AES:32 --sensitive.
func (tok *Token) GenerateAESKey(t testing.TB, label string, o AESKeyOptions) {
	t.Helper()
	size := o.Size
	if size == 0 {
		size = 32
	}
	args := []string{"--keygen", "--key-type", "AES:" + strconv.Itoa(size), "--label", label, "--usage-decrypt"}
	if o.ID != nil {
		args = append(args, "--id", hex.EncodeToString(o.ID))
	}
	if !o.NotSensitive {
		args = append(args, "--sensitive")
	}
	if o.Extractable {
		args = append(args, "--extractable")
	}
	tok.pkcs11Tool(t, args...)
}

// GenerateEd25519 makes an Ed25519 key pair labelled label on the token,
// as an operator would: pkcs11-tool --keypair --key-type EC:edwards25519.
// pkcs11-tool names the curve by the PrintableString "edwards25519".
func (tok *Token) GenerateEd25519(t testing.TB, label string, id []byte) {
	t.Helper()
	args := []string{"--keypair", "--key-type", "EC:edwards25519", "--label", label, "--usage-sign"}
	if id != nil {
		args = append(args, "--id", hex.EncodeToString(id))
	}
	tok.pkcs11Tool(t, args...)
}

func (tok *Token) pkcs11Tool(t testing.TB, args ...string) {
	t.Helper()
	base := []string{"--module", tok.ModulePath, "--token-label", tok.TokenLabel, "--login", "--pin", tok.PIN}
	tok.run(t, tok.tool, append(base, args...)...)
}

// run runs a tool with the token's configuration; its arguments (which
// hold the PIN) stay out of the failure message.
func (tok *Token) run(t testing.TB, name string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), tok.Env)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("hsmtest: %s %s: %v\n%s", filepath.Base(name), args[0], err, out.Bytes())
	}
}

// module is where Debian's libsofthsm2 puts SoftHSM2's module (a link
// to the multiarch directory).
const module = "/usr/lib/softhsm/libsofthsm2.so"

// find locates softhsm2-util, pkcs11-tool and the SoftHSM2 module.
func find() (util, tool, module string, err error) {
	if util, err = exec.LookPath("softhsm2-util"); err != nil {
		return "", "", "", errors.New("no softhsm2-util on PATH")
	}
	if tool, err = exec.LookPath("pkcs11-tool"); err != nil {
		return "", "", "", errors.New("no pkcs11-tool on PATH")
	}
	if _, err := os.Stat(module); err == nil {
		return util, tool, module, nil
	}
	// Debian ships the module in libsofthsm2, which softhsm2 depends on.
	if out, err := exec.Command("dpkg", "-L", "libsofthsm2", "softhsm2").Output(); err == nil || len(out) > 0 {
		for line := range strings.SplitSeq(string(out), "\n") {
			if strings.HasSuffix(line, "/libsofthsm2.so") {
				return util, tool, line, nil
			}
		}
	}
	return "", "", "", errors.New("no SoftHSM2 module (libsofthsm2.so)")
}

// escape percent-encodes s for a PKCS#11 URI's path (or query) value.
func escape(s string, query bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', strings.IndexByte("-._~:@!$'()*+,=", c) >= 0, query && c == '/':
			b.WriteByte(c)
		default:
			b.WriteString("%" + strings.ToUpper(hex.EncodeToString([]byte{c})))
		}
	}
	return b.String()
}
