//go:build cgo

package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/hsm"
	"github.com/ringkms/kms/internal/hsmtest"
	"github.com/ringkms/kms/internal/hsmtest/hsmkey"
)

// verifyOffline checks headers with the keys GET /ks/signing-keys
// publishes, as a third party does (kms.SigningKeySet.VerifyHeader), and
// with GET /ks/header.
func verifyOffline(t *testing.T, url, key string, headers ...string) {
	t.Helper()
	var set kms.SigningKeySet
	for _, m := range signingKeys(t, url) {
		set.Keys = append(set.Keys, kms.SigningKey{ID: m["id"].(string), Algorithm: m["algorithm"].(string), PublicKey: m["publicKey"].(string)})
	}
	for _, h := range headers {
		if v, err := set.VerifyHeader(h, nil); err != nil || !v.Valid {
			t.Errorf("VerifyHeader(%.20s...) with the published keys = %+v, %v; want valid", h, v, err)
		}
		if code, body := call(t, nil, "GET", url+"/ks/header/"+h, key, nil); code != 200 || body["valid"] != true {
			t.Errorf("GET /ks/header = %d %v, want valid", code, body)
		}
	}
}

// TestSigningKeyPKCS11 runs kmsd with its header signing key in a
// SoftHSM2 token: the token's key signs, is published and active, a
// restart keeps it, and headers of the key before (one of the store's
// own) keep verifying.
func TestSigningKeyPKCS11(t *testing.T) {
	tok := hsmtest.New(t, "kms")
	tok.GenerateEd25519(t, "kms-signing", []byte{0x10})
	uri := tok.URI("kms-signing")
	tokenID := hsmkey.KeyID(t, uri)

	const boot = "pkcs11-bootstrap-secret-0123456789abcdef"
	s, _, e, args := startWithRing(t, boot, nil)
	ownHeader, ownID := encryptHeader(t, s.url, boot)
	s.stop(t)

	for round := range 2 { // the first start records the token's key; the second finds it
		s = startRun(t, append(args, "-signing-key-pkcs11", uri), e)
		header, id := encryptHeader(t, s.url, boot)
		if id != tokenID {
			t.Fatalf("start %d with -signing-key-pkcs11: header names key %s, want the token's %s", round+1, id, tokenID)
		}
		if ids, active := signingKeyIDs(t, s.url); len(ids) != 2 || ids[0] != ownID || ids[1] != tokenID || active != tokenID {
			t.Fatalf("start %d: signing keys %v, active %s; want [%s %s], the token's active", round+1, ids, active, ownID, tokenID)
		}
		verifyOffline(t, s.url, boot, ownHeader, header)
		if strings.Contains(s.stderr.String(), tok.PIN) {
			t.Errorf("kmsd logged the PIN")
		}
		s.stop(t)
	}
	// The store keeps the public key and the URI without its pin-source,
	// sealed: the rotation record says which key, and where.
	s = startRun(t, append(args, "-signing-key-pkcs11", uri), e)
	defer s.stop(t)
	code, body := call(t, nil, "POST", s.url+"/auth/search/activity", boot, map[string]any{"action": "signingkey.rotate"})
	if code != 200 {
		t.Fatalf("search activity = %d %v", code, body)
	}
	recs, _ := body["data"].([]any)
	if len(recs) != 1 {
		t.Fatalf("signingkey.rotate records: %v, want the one of the first start with the token's key", body)
	}
	props, _ := recs[0].(map[string]any)["props"].(map[string]any)
	if props["signingKeyId"] != tokenID || props["previousSigningKeyId"] != ownID || props["held"] != true ||
		!strings.Contains(props["uri"].(string), "object=kms-signing") || strings.Contains(props["uri"].(string), "pin-source") {
		t.Errorf("signingkey.rotate props = %v; want the token's key, the one before, and the URI without pin-source", props)
	}
}

// TestSigningKeyPKCS11Errors: each way the token or its key can be wrong
// stops kmsd with exit status 2 and a message naming it, before it
// writes anything.
func TestSigningKeyPKCS11Errors(t *testing.T) {
	tok := hsmtest.New(t, "kms")
	tok.GenerateEd25519(t, "kms-signing", nil)
	tok.GenerateAESKey(t, "kms-aes", hsmtest.AESKeyOptions{})
	uri := tok.URI("kms-signing")
	noPINSource := uri[:strings.Index(uri, "&pin-source=")]
	wrongPIN := filepath.Join(t.TempDir(), "wrong-pin")
	os.WriteFile(wrongPIN, []byte("not-the-pin\n"), 0o600)
	tests := []struct {
		name, uri string
		env       env
		want      []string
	}{
		{"wrong PIN in the file", strings.Replace(uri, tok.PINFile, wrongPIN, 1), nil, []string{"wrong PIN", `token "kms"`}},
		{"wrong PIN in the environment", noPINSource, env{hsm.PINEnv: "0000"}, []string{"wrong PIN"}},
		{"no PIN", noPINSource, nil, []string{"no PIN", hsm.PINEnv}},
		{"no such token", strings.Replace(uri, "token=kms", "token=other", 1), nil, []string{"no token matches", `"other"`}},
		{"no such key", strings.Replace(uri, "object=kms-signing", "object=nope", 1), nil, []string{"no private key", `"nope"`}},
		{"not an Ed25519 key", strings.Replace(uri, "object=kms-signing", "object=kms-aes", 1), nil, []string{"secret key, not a private key"}},
		{"no such module", strings.Replace(uri, tok.ModulePath, "/nonexistent/libpkcs11.so", 1), nil, []string{"cannot load PKCS#11 module"}},
		{"a PIN in the URI", uri + "&pin-value=1234", nil, []string{"pin-value", "pin-source"}},
		{"no module-path", "pkcs11:token=kms;object=kms-signing", nil, []string{"module-path"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "data")
			e := env{"KMS_MASTER_KEY": newKey(), "KMS_SIGNING_KEY_PKCS11": tt.uri}
			for k, v := range tt.env {
				e[k] = v
			}
			for _, cmd := range [][]string{{"-data", data, "-addr", "127.0.0.1:0"}, {"rotate-signing-key", "-data", data}} {
				err, _ := runErr(t, cmd, e)
				if err == nil || exitCode(err) != 2 {
					t.Fatalf("kmsd %s = %v (exit %d), want exit status 2", cmd[0], err, exitCode(err))
				}
				for _, want := range append([]string{"-signing-key-pkcs11"}, tt.want...) {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("kmsd %s = %q, want it to say %q", cmd[0], err, want)
					}
				}
				if strings.Contains(err.Error(), tok.PIN) {
					t.Errorf("the error shows the PIN")
				}
				if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("kmsd %s made the data directory (%v)", cmd[0], err)
				}
			}
		})
	}
}

// TestRotateSigningKeyPKCS11 rotates the signing key in the token: kmsd
// rotate-signing-key makes the next key pair there and prints its URI;
// a node restarted with the old URI signs with the old key, still
// published, one with the new URI with the new key, and one without the
// flag refuses to start; every header keeps verifying.
func TestRotateSigningKeyPKCS11(t *testing.T) {
	tok := hsmtest.New(t, "kms")
	tok.GenerateEd25519(t, "kms-signing", []byte{0x01, 0xff})
	oldURI := strings.Replace(tok.URI("kms-signing"), "object=kms-signing?", "object=kms-signing;id=%01%FF?", 1)
	oldID := hsmkey.KeyID(t, oldURI)

	const boot = "pkcs11-rotate-secret-0123456789abcdefgh"
	s, data, e, args := startWithRing(t, boot, env{"KMS_SIGNING_KEY_PKCS11": oldURI})
	oldHeader, id := encryptHeader(t, s.url, boot)
	if id != oldID {
		t.Fatalf("header names key %s, want the token's %s", id, oldID)
	}
	s.stop(t)

	var out bytes.Buffer
	if err := run(context.Background(), []string{"rotate-signing-key", "-data", data}, e.get, &out, io.Discard); err != nil {
		t.Fatalf("rotate-signing-key -signing-key-pkcs11 = %v; output:\n%s", err, out.String())
	}
	_, newURI, ok := strings.Cut(out.String(), "new key URI: ")
	newURI, _, _ = strings.Cut(newURI, "\n")
	_, newID, _ := strings.Cut(out.String(), "new key ID: ")
	newID, _, _ = strings.Cut(newID, "\n")
	if !ok || !strings.Contains(newURI, "object=kms-signing-2;id=%02%00") || !strings.Contains(newURI, "pin-source=file:") || newID == oldID {
		t.Fatalf("rotate-signing-key printed:\n%s\nwant a new key labelled kms-signing-2 with id 0200 and its URI", out.String())
	}
	if got := hsmkey.KeyID(t, newURI); got != newID {
		t.Fatalf("the key of the printed URI has ID %s, the printed ID is %s", got, newID)
	}

	// A node not yet restarted with the new URI signs with the old key.
	s = startRun(t, args, e)
	header, id := encryptHeader(t, s.url, boot)
	if ids, active := signingKeyIDs(t, s.url); id != oldID || len(ids) != 2 || active != newID {
		t.Fatalf("with the old URI: header of key %s, keys %v, active %s; want the old key %s signing, the new %s active", id, ids, active, oldID, newID)
	}
	verifyOffline(t, s.url, boot, oldHeader, header)
	s.stop(t)

	s = startRun(t, append(args, "-signing-key-pkcs11", newURI), e)
	newHeader, id := encryptHeader(t, s.url, boot)
	if id != newID {
		t.Fatalf("with the new URI, the header names key %s, want %s", id, newID)
	}
	verifyOffline(t, s.url, boot, oldHeader, header, newHeader)
	s.stop(t)

	// Without the flag, the node has no key to sign with: it says so.
	noFlag := env{"KMS_MASTER_KEY": e["KMS_MASTER_KEY"]}
	err, _ := runErr(t, args, noFlag)
	if err == nil || exitCode(err) != 2 || !strings.Contains(err.Error(), newID) || !strings.Contains(err.Error(), "object=kms-signing-2") ||
		!strings.Contains(err.Error(), "-signing-key-pkcs11") || strings.Contains(err.Error(), "pin-source") {
		t.Fatalf("kmsd without -signing-key-pkcs11 on a store whose active key is in a token = %v (exit %d); want exit 2 naming the key and its URI", err, exitCode(err))
	}
	// Rotating without the flag goes back to a key of the store's own.
	out.Reset()
	if err := run(context.Background(), []string{"rotate-signing-key", "-data", data}, noFlag.get, &out, io.Discard); err != nil {
		t.Fatalf("rotate-signing-key without the flag = %v", err)
	}
	s = startRun(t, args, noFlag)
	defer s.stop(t)
	if _, id := encryptHeader(t, s.url, boot); id == oldID || id == newID {
		t.Errorf("after a rotation without the flag, headers name key %s, a key of the token", id)
	}
	verifyOffline(t, s.url, boot, oldHeader, header, newHeader)
}
