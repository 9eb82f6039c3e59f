package k8skms_test

import (
	"context"
	"crypto/rand"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	kmsapi "k8s.io/kms/apis/v2"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/kmsdtest"
	"github.com/ringkms/kms/internal/unixsock"
	"github.com/ringkms/kms/k8skms"
	"github.com/ringkms/kms/kmstest"
)

// plugin is a Server on a Unix socket over a Service on a memory store,
// with the plugin API's own client on that socket.
type plugin struct {
	*kmstest.Env
	srv    *k8skms.Server
	client *k8skms.Client
	sock   string
}

// newPlugin serves opts on a fresh socket; attach false leaves the
// server without its Service.
func newPlugin(t *testing.T, opts k8skms.Options, attach bool) *plugin {
	t.Helper()
	env := kmstest.New(t, kmstest.MemoryStore(t), kms.Options{})
	return servePlugin(t, env, opts, attach)
}

func servePlugin(t *testing.T, env *kmstest.Env, opts k8skms.Options, attach bool) *plugin {
	t.Helper()
	sock := filepath.Join(kmsdtest.SocketDir(t), "kms.sock")
	ln, err := unixsock.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := k8skms.New(opts)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Stop(5 * time.Second)
		if err := <-served; err != nil {
			t.Errorf("Serve() = %v after Stop", err)
		}
	})
	if attach {
		if err := srv.Attach(context.Background(), env.Service); err != nil {
			t.Fatalf("Attach() = %v", err)
		}
	}
	client, err := k8skms.Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	return &plugin{Env: env, srv: srv, client: client, sock: sock}
}

func (p *plugin) status(t *testing.T) *kmsapi.StatusResponse {
	t.Helper()
	st, err := p.client.Status(context.Background(), &kmsapi.StatusRequest{})
	if err != nil {
		t.Fatalf("Status() = %v", err)
	}
	if st.Version != "v2" {
		t.Fatalf("Status().Version = %q, want v2", st.Version)
	}
	return st
}

func (p *plugin) encrypt(t *testing.T, plain []byte) *kmsapi.EncryptResponse {
	t.Helper()
	res, err := p.client.Encrypt(context.Background(), &kmsapi.EncryptRequest{Plaintext: plain, Uid: "uid-enc"})
	if err != nil {
		t.Fatalf("Encrypt() = %v", err)
	}
	return res
}

func (p *plugin) decrypt(ct []byte, keyID string) ([]byte, error) {
	res, err := p.client.Decrypt(context.Background(), &kmsapi.DecryptRequest{Ciphertext: ct, KeyId: keyID, Uid: "uid-dec"})
	return res.GetPlaintext(), err
}

// wantCode fails unless err is a gRPC error of code.
func wantCode(t *testing.T, what string, err error, code codes.Code) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("%s = %v, want code %s", what, err, code)
	}
}

// dataKey is what the API server sends to Encrypt: 32 random bytes.
func dataKey() []byte {
	k := make([]byte, 32)
	rand.Read(k)
	return k
}

// Dial takes the socket's path as an EncryptionConfiguration names it
// (unix:// in front) or as a path, absolute or relative to the working
// directory.
func TestDialPaths(t *testing.T) {
	p := newPlugin(t, k8skms.Options{}, true)
	t.Chdir(filepath.Dir(p.sock))
	for _, path := range []string{p.sock, "unix://" + p.sock, filepath.Base(p.sock), "unix://" + filepath.Base(p.sock)} {
		c, err := k8skms.Dial(path)
		if err != nil {
			t.Fatalf("Dial(%q) = %v", path, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		st, err := c.Status(ctx, &kmsapi.StatusRequest{})
		cancel()
		c.Close()
		if err != nil || st.Healthz != "ok" {
			t.Errorf("Status through Dial(%q) = %+v, %v", path, st, err)
		}
	}
}
