package k8s_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/apiserver/pkg/server/options/encryptionconfig"
	"k8s.io/apiserver/pkg/storage/value"
	kmstypes "k8s.io/apiserver/pkg/storage/value/encrypt/envelope/kmsv2/v2"
	kmsapi "k8s.io/kms/apis/v2"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/client"
	"github.com/ringkms/kms/integration/internal/harness"
	"github.com/ringkms/kms/internal/kmsdtest"
	"github.com/ringkms/kms/k8skms"
)

const (
	// keyName is the held key kmsd's plugin uses by default.
	keyName = "kubernetes"
	// actor is the name the plugin's calls are recorded under.
	actor = "k8s-kms"
	// provider is the KMS provider's name in the EncryptionConfiguration,
	// and storedPrefix what the API server puts before every value it
	// stores through it.
	provider     = "ringkms"
	storedPrefix = "k8s:enc:kms:v2:" + provider + ":"
	// callTimeout is the provider's timeout: how long the API server
	// waits for one call on the socket, its plugin's readiness included
	// (so a call waits that long when kmsd is stopped). Generous, for a
	// loaded machine: the API server's default is 3 s.
	callTimeout = 10 * time.Second
	// probeBound bounds a wait for the API server's probe of the plugin
	// to see a change: it asks for Status again once its last answer is
	// 20 s old when healthy, 3 s when not (encryptionconfig's TTLs).
	probeBound = 2 * time.Minute
)

// node is a kmsd serving the KMS v2 plugin API on a socket.
type node struct {
	in     *harness.Instance
	p      *kmsdtest.Proc
	socket string
	flags  []string
}

// socketPath is a path for a Unix socket in a fresh directory, short
// enough for one (under 108 bytes), which t.TempDir's may not be.
func socketPath(t testing.TB) string {
	t.Helper()
	return filepath.Join(kmsdtest.SocketDir(t), "kms.sock")
}

// newNode is a kmsd on in with the plugin's socket at socket, and the
// flags given, not started yet.
func newNode(in *harness.Instance, socket string, flags ...string) *node {
	return &node{in: in, socket: socket, flags: append([]string{"-k8s-kms-socket", socket}, flags...)}
}

// startNode starts newNode(in, socket, flags...).
func startNode(t testing.TB, in *harness.Instance, socket string, flags ...string) *node {
	t.Helper()
	n := newNode(in, socket, flags...)
	n.start(t)
	return n
}

// start runs the node's kmsd (again) with its data, socket and flags.
func (n *node) start(t testing.TB) {
	t.Helper()
	n.p = n.in.Start(t, n.flags...)
}

// rotate rotates the plugin's key through kmsd's transit interface (the
// node runs with -transit).
func (n *node) rotate(t testing.TB) {
	t.Helper()
	code, body, err := kmsdtest.Do(nil, "POST", n.p.URL+"/v1/transit/keys/"+keyName+"/rotate", n.in.Bootstrap, map[string]any{})
	if err != nil || code != 200 {
		t.Fatalf("rotate %s = %d %s, %v", keyName, code, body, err)
	}
}

// setKeyState sets the state ("disabled", "enabled") of the version of
// the plugin's key whose key ID is id, through kmsd's HTTP API.
func (n *node) setKeyState(t testing.TB, id, state string) {
	t.Helper()
	code, body, err := kmsdtest.Do(nil, "PATCH", n.p.URL+"/asym/keyrings/"+keyName+"/keys/"+id, n.in.Bootstrap, map[string]any{"state": state})
	if err != nil || code != 200 {
		t.Fatalf("make version %s of %s %s = %d %s, %v", id, keyName, state, code, body, err)
	}
}

// versionKeyID is the key ID of version of the plugin's key, as the
// records of the plugin's encryptions with it name it.
func (n *node) versionKeyID(t testing.TB, version int) string {
	t.Helper()
	f := client.ActivityFilter{KeyID: actor, Action: "transit.encrypt", Props: map[string]any{"version": version}}
	list, err := harness.Client(t, n.p, n.in.Bootstrap).SearchActivity(context.Background(), f, kms.PageRequest{Limit: 1})
	if err != nil || len(list.Data) == 0 {
		t.Fatalf("the records of the plugin's encryptions with version %d: %v, %v", version, list, err)
	}
	id, _ := list.Data[0].Props["keyId"].(string)
	if id == "" {
		t.Fatalf("the record of an encryption with version %d names no key: %+v", version, list.Data[0])
	}
	return id
}

// plugin is a gRPC client of the socket, as the API server's own.
func plugin(t testing.TB, socket string) *k8skms.Client {
	t.Helper()
	c, err := k8skms.Dial(socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// callCtx bounds the direct calls on a socket of a step of a test: 30 s
// from now.
func callCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// pluginStatus is the plugin's Status, which must say it serves v2 and is
// healthy.
func pluginStatus(t testing.TB, socket string) *kmsapi.StatusResponse {
	t.Helper()
	st, err := plugin(t, socket).Status(callCtx(t), &kmsapi.StatusRequest{})
	if err != nil {
		t.Fatalf("Status on %s = %v", socket, err)
	}
	if st.Version != "v2" || st.Healthz != "ok" || st.KeyId == "" {
		t.Fatalf("Status on %s = %+v, want version v2, healthz ok and a key_id", socket, st)
	}
	return st
}

// dek is the DEK source (the API server's seed) that the stored value
// carries, decrypted by the plugin on socket.
func dek(t testing.TB, socket string, stored []byte) []byte {
	t.Helper()
	obj := encryptedObject(t, stored)
	out, err := plugin(t, socket).Decrypt(callCtx(t), &kmsapi.DecryptRequest{Uid: "dek", Ciphertext: obj.EncryptedDEKSource, KeyId: obj.KeyID})
	if err != nil || len(out.Plaintext) == 0 {
		t.Fatalf("Decrypt of the stored value's DEK = %v, %v", out, err)
	}
	return out.Plaintext
}

// apiServer is the Kubernetes API server's encryption at rest of
// Secrets, as loaded from an EncryptionConfiguration naming one KMS v2
// provider, kmsd's socket; no other provider, so nothing can be stored
// or read in plain text.
type apiServer struct {
	secrets value.Transformer
	health  healthz.HealthChecker
}

// encryptionConfig is the EncryptionConfiguration of an API server whose
// Secrets go through the plugin on socket.
func encryptionConfig(socket string) string {
	return fmt.Sprintf(`apiVersion: apiserver.config.k8s.io/v1
kind: EncryptionConfiguration
resources:
  - resources:
      - secrets
    providers:
      - kms:
          apiVersion: v2
          name: %s
          endpoint: unix://%s
          timeout: %s
`, provider, socket, callTimeout)
}

// loadAPIServer loads the API server's transformers from an
// EncryptionConfiguration file for the plugin on socket, as
// kube-apiserver --encryption-provider-config does; its probe runs until
// the end of the test.
func loadAPIServer(t testing.TB, socket string) *apiServer {
	t.Helper()
	return loadConfig(t, encryptionConfig(socket))
}

// loadConfig loads the API server's transformers from an
// EncryptionConfiguration file holding config.
func loadConfig(t testing.TB, config string) *apiServer {
	t.Helper()
	path := filepath.Join(t.TempDir(), "encryption.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cfg, err := encryptionconfig.LoadEncryptionConfig(ctx, path, false, "apiserver-"+rand.Text())
	if err != nil {
		t.Fatalf("LoadEncryptionConfig = %v", err)
	}
	secrets := cfg.Transformers[schema.GroupResource{Resource: "secrets"}]
	if secrets == nil || len(cfg.HealthChecks) != 1 {
		t.Fatalf("LoadEncryptionConfig gave transformers %v and %d health checks, want one for secrets and one check", cfg.Transformers, len(cfg.HealthChecks))
	}
	return &apiServer{secrets: secrets, health: cfg.HealthChecks[0]}
}

// check runs the API server's health check of its KMS providers (its
// /healthz/kms-providers).
func (a *apiServer) check() error {
	return a.health.Check(httptest.NewRequest(http.MethodGet, "/healthz/"+a.health.Name(), nil))
}

// write is what the API server stores for data at etcd key key.
func (a *apiServer) write(key string, data []byte) ([]byte, error) {
	return a.secrets.TransformToStorage(context.Background(), data, value.DefaultContext(key))
}

// read is what the API server reads back from stored at key, and whether
// it is stale (written with another key_id than the one it writes with).
func (a *apiServer) read(key string, stored []byte) ([]byte, bool, error) {
	return a.secrets.TransformFromStorage(context.Background(), stored, value.DefaultContext(key))
}

// mustWrite is write, which must succeed and store no plaintext: the
// value starts with the provider's prefix and does not hold secret.
func (a *apiServer) mustWrite(t testing.TB, key string, data, secret []byte) []byte {
	t.Helper()
	stored, err := a.write(key, data)
	if err != nil {
		t.Fatalf("TransformToStorage(%s) = %v", key, err)
	}
	if !bytes.HasPrefix(stored, []byte(storedPrefix)) {
		t.Fatalf("stored value of %s starts %q, want the prefix %q", key, stored[:min(len(stored), len(storedPrefix))], storedPrefix)
	}
	if bytes.Contains(stored, secret) {
		t.Fatalf("stored value of %s holds the Secret's value in plain text", key)
	}
	return stored
}

// mustRead is read, which must give back want; it returns whether the
// value was stale.
func (a *apiServer) mustRead(t testing.TB, key string, stored, want []byte) bool {
	t.Helper()
	got, stale, err := a.read(key, stored)
	if err != nil {
		t.Fatalf("TransformFromStorage(%s) = %v", key, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("TransformFromStorage(%s) gave %d bytes other than the %d written", key, len(got), len(want))
	}
	return stale
}

// encryptedObject is the EncryptedObject that a stored value carries
// after its prefix: the key_id and the encrypted DEK source it was
// written with.
func encryptedObject(t testing.TB, stored []byte) *kmstypes.EncryptedObject {
	t.Helper()
	raw, ok := bytes.CutPrefix(stored, []byte(storedPrefix))
	if !ok {
		t.Fatalf("stored value does not start with %q", storedPrefix)
	}
	var obj kmstypes.EncryptedObject
	if err := proto.Unmarshal(raw, &obj); err != nil {
		t.Fatalf("stored value's EncryptedObject: %v", err)
	}
	return &obj
}

// secretOf is a Secret name holding one value, a random string it
// returns too, as the API server stores it (protobuf) before its
// transformer runs.
func secretOf(t testing.TB, name string) (body, secret []byte) {
	t.Helper()
	secret = []byte("s3cret-" + rand.Text())
	s := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{"password": secret},
	}
	body, err := s.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(body, secret) {
		t.Fatal("the Secret's encoding does not hold its value as is: the plain-text checks would prove nothing")
	}
	return body, secret
}

// etcdKey is where the API server stores the Secret name.
func etcdKey(name string) string { return "/registry/secrets/default/" + name }
