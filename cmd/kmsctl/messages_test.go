package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"net"
	"strings"
	"testing"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/httpapi"
	"github.com/ringkms/kms/kmstest"
)

// TestMessages: what kmsctl prints when the call goes wrong on the way.
// Each names the trouble once, with the right word for it.
func TestMessages(t *testing.T) {
	t.Run("address without scheme", func(t *testing.T) {
		e := env{"KMS_API_KEY": "rk_0123456789abcdef0123456789abcdef", "KMSCTL_CONFIG_DIR": t.TempDir()}
		for _, c := range []struct {
			e    env
			args []string
			from string
		}{
			{e, []string{"-addr", "127.0.0.1:8200", "ring", "list"}, "-addr"},
			{e.with("KMS_ADDR", "127.0.0.1:8200"), []string{"ring", "list"}, "KMS_ADDR"},
			{e.with("KMS_ADDR", "127.0.0.1:8200"), []string{"status"}, "KMS_ADDR"},
		} {
			r := kmsctl(t, c.e, "", c.args...).want(t, 1, strings.Join(c.args, " "))
			want := c.from + `: base URL "127.0.0.1:8200" has no scheme: write http://127.0.0.1:8200, or https://127.0.0.1:8200`
			if !strings.Contains(r.stderr, want) {
				t.Errorf("%v with %s 127.0.0.1:8200: stderr %q, want %q", c.args, c.from, r.stderr, want)
			}
		}
	})

	t.Run("closed port", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := "http://" + l.Addr().String()
		l.Close()
		e := env{"KMS_ADDR": addr, "KMS_API_KEY": "rk_0123456789abcdef0123456789abcdef", "KMSCTL_CONFIG_DIR": t.TempDir()}
		r := kmsctl(t, e, "", "status").want(t, 1, "status against a closed port")
		if strings.Contains(r.stdout, "unhealthy") || !strings.Contains(r.stdout, "health:      not checked: the service cannot be reached") {
			t.Errorf("status against a closed port printed:\n%s", r.stdout)
		}
		if !strings.Contains(r.stderr, "could not be reached") {
			t.Errorf("status against a closed port: stderr %q, want the reason", r.stderr)
		}
	})

	t.Run("untrusted certificate", func(t *testing.T) {
		e, _ := newTLSServer(t)
		for _, args := range [][]string{{"status"}, {"ring", "list"}} {
			r := kmsctl(t, e, "", args...).want(t, 1, strings.Join(args, " ")+" without the CA")
			if strings.Contains(r.stderr, "(internal)") || !strings.Contains(r.stderr, "certificate is not trusted") {
				t.Errorf("%v without the CA: stderr %q; want the certificate not trusted, and not (internal)", args, r.stderr)
			}
		}
	})

	t.Run("503", func(t *testing.T) {
		// A service whose header signing key is held outside the store,
		// and a process of it started without that key: its encrypt
		// calls answer 503 (unavailable).
		st := kmstest.MemoryStore(t)
		mk := kms.GenerateMasterKey()
		_, signingKey, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		first := kmstest.New(t, st, kms.Options{MasterKey: mk, SigningKey: signingKey})
		ring, err := first.Service.CreateKeyRing(first.RootCtx, kms.CreateKeyRingInput{Name: "payments"})
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		keyFile := writeFile(t, dir, "payments.key", []byte(ring.PrivateKey))
		in := writeFile(t, dir, "report.txt", []byte("Q3"))
		first.Service.Close()
		svc, err := kms.New(st, kms.Options{MasterKey: mk})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { svc.Close() })
		_, url := kmstest.Serve(t, httpapi.New(svc, httpapi.Options{}), "")
		e := env{"KMS_ADDR": url, "KMS_API_KEY": first.RootKey, "KMSCTL_CONFIG_DIR": t.TempDir()}
		r := kmsctl(t, e, "", "encrypt", "-ring", "payments", "-private-key", keyFile, "-in", in, "-out", in+".rkms").want(t, 1, "encrypt without the signing key")
		if !strings.Contains(r.stderr, "service unavailable") || strings.Count(r.stderr, "(unavailable)") != 1 || strings.Contains(r.stderr, "HTTP 503") {
			t.Errorf("encrypt answered 503: stderr %q; want the message and (unavailable) once, no HTTP 503", r.stderr)
		}
	})
}
