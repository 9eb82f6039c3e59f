package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	kmsapi "k8s.io/kms/apis/v2"

	"github.com/ringkms/kms/internal/kmsdtest"
	"github.com/ringkms/kms/internal/pgtest"
	"github.com/ringkms/kms/k8skms"
)

// k8sClient is the plugin API's own client on the socket sock.
func k8sClient(t *testing.T, sock string) *k8skms.Client {
	t.Helper()
	c, err := k8skms.Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip checks that the plugin on sock is healthy, with a key_id of
// the key name, and that a data key goes through Encrypt and Decrypt.
func roundTrip(t *testing.T, sock, name string) string {
	t.Helper()
	c := k8sClient(t, sock)
	ctx := context.Background()
	st, err := c.Status(ctx, &kmsapi.StatusRequest{})
	if err != nil || st.Healthz != "ok" || st.Version != "v2" || !strings.HasPrefix(st.KeyId, name+":v1:") {
		t.Fatalf("Status() = %+v, %v; want v2, ok and a key_id of %s", st, err, name)
	}
	dek := bytes.Repeat([]byte{0x5a}, 32)
	enc, err := c.Encrypt(ctx, &kmsapi.EncryptRequest{Plaintext: dek, Uid: "u1"})
	if err != nil || enc.KeyId != st.KeyId {
		t.Fatalf("Encrypt() = %+v, %v", enc, err)
	}
	dec, err := c.Decrypt(ctx, &kmsapi.DecryptRequest{Ciphertext: enc.Ciphertext, KeyId: enc.KeyId, Uid: "u2"})
	if err != nil || !bytes.Equal(dec.Plaintext, dek) {
		t.Fatalf("Decrypt() = %x, %v", dec.GetPlaintext(), err)
	}
	return st.KeyId
}

// kmsd serves the plugin on a socket of mode 0600 beside its HTTP
// listener, with the key of KMS_K8S_KMS_KEY made at its first start and
// found at the next; its calls are recorded under k8s-kms; the socket is
// gone once kmsd stops.
func TestK8sPlugin(t *testing.T) {
	sock := filepath.Join(kmsdtest.SocketDir(t), "kms.sock")
	data := t.TempDir()
	e := env{"KMS_MASTER_KEY": newKey(), "KMS_BOOTSTRAP_API_KEY": e2eBootstrap, "KMS_K8S_KMS_KEY": "prod"}
	s := startRun(t, []string{"-data", data, "-addr", "127.0.0.1:0", "-k8s-kms-socket", sock}, e)
	fi, err := os.Lstat(sock)
	if err != nil || fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket %s: %v, %v; want a socket of mode 0600", sock, fi, err)
	}
	if want := `"k8s_kms":"on, at ` + sock + ` with the key prod"`; !strings.Contains(s.stderr.String(), want) {
		t.Errorf("start log lacks %s:\n%s", want, s.stderr)
	}
	keyID := roundTrip(t, sock, "prod")
	code, body := call(t, nil, "POST", s.url+"/auth/search/activity", e2eBootstrap, map[string]any{"keyid": "k8s-kms", "ring": "prod"})
	if code != 200 || len(body["data"].([]any)) < 3 {
		t.Fatalf("the plugin's records = %d %v, want its Status, Encrypt and Decrypt", code, body)
	}
	code, body = call(t, nil, "POST", s.url+"/auth/search/activity", e2eBootstrap, map[string]any{"keyid": "system", "action": "transit.key.create"})
	if code != 200 || len(body["data"].([]any)) != 1 {
		t.Fatalf("the key's creation by the service: %d %v", code, body)
	}
	s.stop(t)
	if _, err := os.Lstat(sock); !os.IsNotExist(err) {
		t.Fatalf("socket after kmsd stopped: %v, want it gone", err)
	}

	s = startRun(t, []string{"-data", data, "-addr", "127.0.0.1:0", "-k8s-kms-socket", sock}, e)
	if again := roundTrip(t, sock, "prod"); again != keyID {
		t.Fatalf("key_id after a restart = %q, want %q (the same key)", again, keyID)
	}
}

// A socket that a killed kmsd left behind is replaced; anything else at
// the path, a socket in use included, keeps kmsd from starting (exit
// status 2) before it touches its data, and is left as it was.
func TestK8sSocketPath(t *testing.T) {
	dir := kmsdtest.SocketDir(t)
	e := e2eEnv()
	stale := filepath.Join(dir, "stale.sock")
	ln, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	startRun(t, []string{"-data", t.TempDir(), "-addr", "127.0.0.1:0", "-k8s-kms-socket", stale}, e)
	roundTrip(t, stale, "kubernetes")

	file := filepath.Join(dir, "file")
	os.WriteFile(file, []byte("not a socket"), 0o640)
	for _, path := range []string{file, dir, stale} { // stale: served by the kmsd above
		data := filepath.Join(t.TempDir(), "data")
		err, stderr := runErr(t, []string{"-data", data, "-addr", "127.0.0.1:0", "-k8s-kms-socket", path}, e)
		if err == nil || exitCode(err) != 2 || !strings.Contains(err.Error(), "-k8s-kms-socket") {
			t.Fatalf("kmsd -k8s-kms-socket %s = %v (exit %d), want exit 2 naming the flag\n%s", path, err, exitCode(err), stderr)
		}
		if _, err := os.Stat(data); !os.IsNotExist(err) {
			t.Errorf("kmsd refused %s but made its data directory: %v", path, err)
		}
	}
	if b, _ := os.ReadFile(file); string(b) != "not a socket" {
		t.Errorf("the file refused holds %q", b)
	}
	roundTrip(t, stale, "kubernetes") // the kmsd that serves it still does
}

// A key of the plugin's name that is not fit for it (exportable) keeps
// kmsd from starting, exit 2, saying why; the key is left as it is.
func TestK8sUnfitKey(t *testing.T) {
	data := t.TempDir()
	e := e2eEnv()
	s := startRun(t, []string{"-data", data, "-addr", "127.0.0.1:0", "-transit"}, e)
	code, body := call(t, nil, "POST", s.url+"/v1/transit/keys/kubernetes", e2eBootstrap, map[string]any{"exportable": true})
	if code != 200 && code != 204 {
		t.Fatalf("make an exportable key: %d %v", code, body)
	}
	s.stop(t)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var stderr syncBuffer
	err := run(ctx, []string{"-data", data, "-addr", "127.0.0.1:0", "-k8s-kms-socket", filepath.Join(kmsdtest.SocketDir(t), "k.sock")}, e.get, &syncBuffer{}, &stderr)
	if exitCode(err) != 2 || !strings.Contains(err.Error(), "exportable") {
		t.Fatalf("kmsd with an exportable key for the plugin = %v (exit %d), want exit 2 saying it is exportable\n%s", err, exitCode(err), stderr.String())
	}
}

// On PostgreSQL, the plugin serves as on the embedded store.
func TestK8sPluginPostgres(t *testing.T) {
	sock := filepath.Join(kmsdtest.SocketDir(t), "kms.sock")
	e := env{"KMS_MASTER_KEY": newKey(), "KMS_BOOTSTRAP_API_KEY": e2eBootstrap, "KMS_STORE": pgtest.URL(t)}
	startRun(t, []string{"-data", t.TempDir(), "-addr", "127.0.0.1:0", "-k8s-kms-socket", sock}, e)
	roundTrip(t, sock, "kubernetes")
}
