package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ringkms/kms/internal/hsmtest"
	"github.com/ringkms/kms/internal/kmsdtest"
)

// tokenEnv is the environment of a kmsd whose master key is the object
// named object on tok.
func tokenEnv(tok *hsmtest.Token, object string) env {
	return env{"KMS_MASTER_KEY_PKCS11": tok.URI(object), "KMS_BOOTSTRAP_API_KEY": "pkcs11-bootstrap-secret-0123456789"}
}

// encryptDecrypt encrypts on ring rk through s and returns a function that
// checks the call still decrypts through another server.
func encryptOn(t *testing.T, s *server, root string) func(*server) {
	t.Helper()
	call(t, nil, "POST", s.url+"/ks/keyrings", root, map[string]any{"name": "rk"})
	code, enc := call(t, nil, "POST", s.url+"/ks/encrypt", root, map[string]any{"ringname": "rk"})
	if code != 200 {
		t.Fatalf("encrypt = %d %v", code, enc)
	}
	return func(o *server) {
		t.Helper()
		if code, body := call(t, nil, "POST", o.url+"/ks/decrypt", root, map[string]any{"hash": enc["hash"], "header": enc["header"]}); code != 200 {
			t.Fatalf("decrypt of the first encrypt = %d %v", code, body)
		}
		if code, body := call(t, nil, "GET", o.url+"/ks/header/"+url.PathEscape(enc["header"].(string)), root, nil); code != 200 || body["valid"] != true {
			t.Fatalf("header lookup of the first encrypt = %d %v", code, body)
		}
	}
}

// TestMasterKeyInToken: kmsd with its master key in a PKCS#11 token (a
// real SoftHSM2 token) serves, starts again on its store, and no plain
// master key opens that store; kmsd rekey moves the store to a plain key
// and then to another key of the token (never back to one it has left),
// every hash and header staying valid.
func TestMasterKeyInToken(t *testing.T) {
	tok := hsmtest.New(t, "kms")
	tok.GenerateAESKey(t, "kms-master", hsmtest.AESKeyOptions{})
	tok.GenerateAESKey(t, "kms-master-2", hsmtest.AESKeyOptions{})
	data := t.TempDir()
	e := tokenEnv(tok, "kms-master")
	root := e["KMS_BOOTSTRAP_API_KEY"]
	args := []string{"-data", data, "-addr", "127.0.0.1:0"}
	s := startRun(t, args, e)
	check := encryptOn(t, s, root)
	s.stop(t)
	s = startRun(t, args, e)
	check(s)
	s.stop(t)

	plain := newKey()
	if err := run(context.Background(), args, env{"KMS_MASTER_KEY": plain}.get, io.Discard, io.Discard); err == nil {
		t.Fatal("kmsd with a plain master key opened the store of a token's key")
	}
	var out bytes.Buffer
	rekey := func(from, to env) {
		t.Helper()
		out.Reset()
		renv := env{}
		for k, v := range from {
			renv[k] = v
		}
		for k, v := range to {
			renv[k] = v
		}
		if err := run(context.Background(), []string{"rekey", "-data", data}, renv.get, &out, io.Discard); err != nil {
			t.Fatalf("rekey = %v; output:\n%s", err, out.String())
		}
	}
	rekey(env{"KMS_MASTER_KEY_PKCS11": tok.URI("kms-master")}, env{"KMS_NEW_MASTER_KEY": plain})
	s = startRun(t, args, env{"KMS_MASTER_KEY": plain})
	check(s)
	s.stop(t)
	if err := run(context.Background(), args, e.get, io.Discard, io.Discard); err == nil {
		t.Fatal("kmsd with the token's key opened the store rekeyed away from it")
	}
	rekey(env{"KMS_MASTER_KEY": plain}, env{"KMS_NEW_MASTER_KEY_PKCS11": tok.URI("kms-master-2")})
	e = tokenEnv(tok, "kms-master-2")
	s = startRun(t, args, e)
	check(s)
	s.stop(t)
	// Back to the token's first key, which the store has left: refused.
	back := env{"KMS_MASTER_KEY_PKCS11": tok.URI("kms-master-2"), "KMS_NEW_MASTER_KEY_PKCS11": tok.URI("kms-master")}
	if err := run(context.Background(), []string{"rekey", "-data", data}, back.get, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "rekeyed away from") {
		t.Errorf("rekey back to the token key the store left = %v, want it refused saying so", err)
	}
	out.Reset()
	if err := run(context.Background(), []string{"verify-audit", "-data", data}, e.get, &out, io.Discard); err != nil || !strings.Contains(out.String(), "intact") {
		t.Fatalf("verify-audit with the token's key = %v:\n%s", err, out.String())
	}
}

// TestMasterKeyTokenErrors: a wrong PIN, a missing token, a missing
// object, a key that is extractable, not sensitive or not AES-256, or a
// PIN given in the URI: kmsd exits 2 with a message naming the problem,
// and writes nothing.
func TestMasterKeyTokenErrors(t *testing.T) {
	tok := hsmtest.New(t, "kms")
	tok.GenerateAESKey(t, "good", hsmtest.AESKeyOptions{})
	tok.GenerateAESKey(t, "extractable", hsmtest.AESKeyOptions{Extractable: true})
	tok.GenerateAESKey(t, "not-sensitive", hsmtest.AESKeyOptions{NotSensitive: true})
	tok.GenerateAESKey(t, "aes128", hsmtest.AESKeyOptions{Size: 16})
	wrongPIN := filepath.Join(t.TempDir(), "pin")
	if err := os.WriteFile(wrongPIN, []byte("000000\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, uri, want string
	}{
		{"wrong PIN", strings.Replace(tok.URI("good"), tok.PINFile, wrongPIN, 1), "PIN"},
		{"no such token", strings.Replace(tok.URI("good"), "token=kms", "token=nosuch", 1), "token"},
		{"no such object", tok.URI("nosuch"), "nosuch"},
		{"extractable", tok.URI("extractable"), "extractable"},
		{"not sensitive", tok.URI("not-sensitive"), "sensitive"},
		{"AES-128", tok.URI("aes128"), "256"},
		{"PIN in the URI", tok.URI("good") + "&pin-value=1234", "pin-source"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := t.TempDir()
			err := run(context.Background(), []string{"-data", data, "-addr", "127.0.0.1:0"}, env{"KMS_MASTER_KEY_PKCS11": tc.uri}.get, io.Discard, io.Discard)
			if code := exitCode(err); code != 2 || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("kmsd = %v (exit %d), want exit 2 naming %q", err, code, tc.want)
			}
			if hasStore(data) {
				t.Errorf("kmsd wrote a store before refusing its key")
			}
		})
	}
	// One way only.
	err := run(context.Background(), []string{"-data", t.TempDir()}, env{"KMS_MASTER_KEY_PKCS11": tok.URI("good"), "KMS_MASTER_KEY": newKey()}.get, io.Discard, io.Discard)
	if exitCode(err) != 2 || !strings.Contains(err.Error(), "one way only") {
		t.Errorf("two master keys = %v, want exit 2 saying one way only", err)
	}
}

// TestRekeyThroughTheSocket: kmsd rekey, with kmsd running on the embedded
// store, has that kmsd rekey to the next master key it was started with;
// it serves on without a restart, and then starts with the new key alone.
// A kmsd started without a next key refuses, saying so.
func TestRekeyThroughTheSocket(t *testing.T) {
	tok := hsmtest.New(t, "kms")
	tok.GenerateAESKey(t, "kms-next", hsmtest.AESKeyOptions{})
	data := t.TempDir()
	plain := newKey()
	root := "socket-rekey-bootstrap-secret-0123456789"
	args := []string{"-data", data, "-addr", "127.0.0.1:0"}
	alone := startRun(t, args, env{"KMS_MASTER_KEY": plain, "KMS_BOOTSTRAP_API_KEY": root})
	check := encryptOn(t, alone, root)
	err := run(context.Background(), []string{"rekey", "-data", data}, env{"KMS_MASTER_KEY": plain}.get, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "no next master key") {
		t.Errorf("rekey through a kmsd without a next key = %v, want an error saying so", err)
	}
	alone.stop(t)

	s := startRun(t, args, env{"KMS_MASTER_KEY": plain, "KMS_MASTER_KEY_NEXT_PKCS11": tok.URI("kms-next")})
	var out bytes.Buffer
	if err := run(context.Background(), []string{"rekey", "-data", data}, env{"KMS_MASTER_KEY": plain}.get, &out, io.Discard); err != nil {
		t.Fatalf("rekey through the running kmsd = %v; output:\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "by the running kmsd") {
		t.Errorf("rekey printed %q, want it to say the running kmsd did it", out.String())
	}
	check(s)
	if code, body := call(t, nil, "POST", s.url+"/ks/keyrings", root, map[string]any{"name": "after"}); code != 200 {
		t.Errorf("create ring after the rekey = %d %v", code, body)
	}
	s.stop(t)
	if err := run(context.Background(), args, env{"KMS_MASTER_KEY": plain}.get, io.Discard, io.Discard); err == nil {
		t.Fatal("kmsd with the old key opened the store after the rekey")
	}
	s = startRun(t, args, env{"KMS_MASTER_KEY_PKCS11": tok.URI("kms-next")})
	defer s.stop(t)
	check(s)
}

// TestPINSourceMode: a token's pin-source file is checked as the master
// key file is: one that other users may read or write stops kmsd (exit
// status 2, naming the file and its mode) before it logs in or writes
// anything, for the master key's token and the signing key's alike; one
// its group may read is accepted with a warning that names it.
func TestPINSourceMode(t *testing.T) {
	tok := hsmtest.New(t, "kms")
	tok.GenerateAESKey(t, "kms-master", hsmtest.AESKeyOptions{})
	tok.GenerateEd25519(t, "kms-signing", []byte{0x10})
	for _, tc := range []struct {
		name string
		e    env
		args []string
	}{
		{"master key", env{"KMS_MASTER_KEY_PKCS11": tok.URI("kms-master")}, nil},
		{"signing key", env{"KMS_MASTER_KEY": newKey()}, []string{"-signing-key-pkcs11", tok.URI("kms-signing")}},
	} {
		for _, mode := range []os.FileMode{0o644, 0o604, 0o606} {
			t.Run(fmt.Sprintf("%s %04o", tc.name, mode), func(t *testing.T) {
				if err := os.Chmod(tok.PINFile, mode); err != nil {
					t.Fatal(err)
				}
				defer os.Chmod(tok.PINFile, 0o600)
				data := t.TempDir()
				err, stderr := runErr(t, append([]string{"-data", data, "-addr", "127.0.0.1:0"}, tc.args...), tc.e)
				want := fmt.Sprintf("pin-source file %s has mode %04o", tok.PINFile, mode)
				if code := exitCode(err); code != 2 || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "chmod 600") {
					t.Fatalf("kmsd with a pin-source of mode %04o = %v (exit %d), want exit 2 saying %q and how to fix it", mode, err, code, want)
				}
				if hasStore(data) {
					t.Errorf("kmsd wrote a store before refusing the pin-source")
				}
				if strings.Contains(err.Error()+stderr, tok.PIN) {
					t.Errorf("the PIN was printed")
				}
			})
		}
		t.Run(tc.name+" 0640 warns", func(t *testing.T) {
			if err := os.Chmod(tok.PINFile, 0o640); err != nil {
				t.Fatal(err)
			}
			defer os.Chmod(tok.PINFile, 0o600)
			s := startRun(t, append([]string{"-data", t.TempDir(), "-addr", "127.0.0.1:0"}, tc.args...), tc.e)
			s.stop(t)
			logs := s.stderr.String()
			if !strings.Contains(logs, `"level":"warn"`) || !strings.Contains(logs, "pin-source file is accessible to its group") || !strings.Contains(logs, tok.PINFile) {
				t.Errorf("kmsd with a pin-source of mode 0640 logged no warning naming it:\n%s", logs)
			}
		})
	}
}

// TestPINPastedInTheURI: a PIN put in a PKCS#11 URI's path or query as an
// attribute of its own (not name=value) stops kmsd with exit status 2,
// and neither the error nor the log shows it.
func TestPINPastedInTheURI(t *testing.T) {
	tok := hsmtest.New(t, "kms")
	tok.GenerateAESKey(t, "kms-master", hsmtest.AESKeyOptions{})
	tok.GenerateEd25519(t, "kms-signing", []byte{0x10})
	inPath := func(object string) string {
		return strings.Replace(tok.URI(object), ";object=", ";"+tok.PIN+";object=", 1)
	}
	inQuery := func(object string) string { return tok.URI(object) + "&" + tok.PIN }
	for _, tc := range []struct {
		name string
		e    env
		args []string
	}{
		{"master key, path", env{"KMS_MASTER_KEY_PKCS11": inPath("kms-master")}, nil},
		{"master key, query", env{"KMS_MASTER_KEY_PKCS11": inQuery("kms-master")}, nil},
		{"next master key, path", env{"KMS_MASTER_KEY": newKey()}, []string{"-master-key-next-pkcs11", inPath("kms-master")}},
		{"signing key, path", env{"KMS_MASTER_KEY": newKey()}, []string{"-signing-key-pkcs11", inPath("kms-signing")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr syncBuffer
			err := run(context.Background(), append([]string{"-data", t.TempDir(), "-addr", "127.0.0.1:0"}, tc.args...), tc.e.get, io.Discard, &stderr)
			if code := exitCode(err); code != 2 || !strings.Contains(err.Error(), "not name=value") {
				t.Fatalf("kmsd = %v (exit %d), want exit 2 saying an attribute is not name=value", err, code)
			}
			if strings.Contains(err.Error(), tok.PIN) || strings.Contains(stderr.String(), tok.PIN) {
				t.Errorf("kmsd showed the PIN: %v\n%s", err, stderr.String())
			}
		})
	}
}

// TestSigningKeyPKCS11WithoutCgo builds kmsd without cgo, as
// CGO_ENABLED=0 builds it, and gives it -signing-key-pkcs11: it answers
// that this build lacks PKCS#11 support, exit status 2, before it writes
// anything.
func TestSigningKeyPKCS11WithoutCgo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds kmsd; skipped with -short")
	}
	bin := filepath.Join(t.TempDir(), "kmsd")
	build := exec.Command(kmsdtest.GoTool(), "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("CGO_ENABLED=0 go build: %v\n%s", err, out)
	}
	data := filepath.Join(t.TempDir(), "data")
	uri := "pkcs11:token=kms;object=kms-signing?module-path=/usr/lib/softhsm/libsofthsm2.so"
	for _, args := range [][]string{{"-data", data}, {"rotate-signing-key", "-data", data}} {
		cmd := exec.Command(bin, args...)
		cmd.Env = kmsdtest.Env("KMS_MASTER_KEY="+newKey(), "KMS_SIGNING_KEY_PKCS11="+uri, "KMS_PKCS11_PIN=1234")
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 {
			t.Fatalf("kmsd %s with -signing-key-pkcs11, built without cgo = %v, want exit status 2; output:\n%s", args[0], err, out)
		}
		for _, want := range []string{"-signing-key-pkcs11", "no PKCS#11 support", "CGO_ENABLED=0"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("kmsd %s printed %q, want it to say %q", args[0], out, want)
			}
		}
		if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("kmsd %s made the data directory (%v)", args[0], err)
		}
	}
}
