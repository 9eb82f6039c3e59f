package k8s_test

import (
	"bytes"
	"path/filepath"
	"testing"

	kmsapi "k8s.io/kms/apis/v2"

	"github.com/ringkms/kms/integration/internal/harness"
	"github.com/ringkms/kms/internal/pgtest"
)

// TestTwoNodes: two kmsd nodes on one PostgreSQL database, each with its
// own socket (an API server per control-plane host, each with its local
// plugin), started together on an empty database, share the key: what the API server of node A stores, the API
// server of node B reads; after a rotation on A, B's Status names the
// new key_id at once, B encrypts under it, and A decrypts that.
func TestTwoNodes(t *testing.T) {
	t.Parallel()
	store := pgtest.URL(t)
	inA := harness.New(t)
	inB := &harness.Instance{Data: filepath.Join(t.TempDir(), "data"), MasterKey: inA.MasterKey, Bootstrap: inA.Bootstrap}
	a := newNode(inA, socketPath(t), "-store", store, "-transit")
	b := newNode(inB, socketPath(t), "-store", store)
	// Started together on the empty database, both make the key: one
	// does, the other takes it.
	a.p, b.p = inA.Launch(t, a.flags...), inB.Launch(t, b.flags...)
	a.p.Listen(t, harness.StartTimeout)
	b.p.Listen(t, harness.StartTimeout)
	old := pluginStatus(t, a.socket).KeyId
	if got := pluginStatus(t, b.socket).KeyId; got != old {
		t.Fatalf("Status key_id: node A %q, node B %q; want the same key", old, got)
	}

	apiA, apiB := loadAPIServer(t, a.socket), loadAPIServer(t, b.socket)
	body, secret := secretOf(t, "shared")
	stored := apiA.mustWrite(t, etcdKey("shared"), body, secret)
	apiB.mustRead(t, etcdKey("shared"), stored, body)

	a.rotate(t)
	now := pluginStatus(t, a.socket).KeyId
	if now == old {
		t.Fatalf("node A's Status key_id after a rotation = %q, the same as before", now)
	}
	if got := pluginStatus(t, b.socket).KeyId; got != now {
		t.Fatalf("node B's Status key_id after a rotation on node A = %q, want %q", got, now)
	}
	dek := []byte("a DEK of 32 bytes, for the test.")
	enc, err := plugin(t, b.socket).Encrypt(callCtx(t), &kmsapi.EncryptRequest{Uid: "b", Plaintext: dek})
	if err != nil || enc.KeyId != now {
		t.Fatalf("Encrypt on node B after the rotation on node A = %v, %v; want key_id %q", enc, err, now)
	}
	out, err := plugin(t, a.socket).Decrypt(callCtx(t), &kmsapi.DecryptRequest{Uid: "a", Ciphertext: enc.Ciphertext, KeyId: enc.KeyId})
	if err != nil || !bytes.Equal(out.GetPlaintext(), dek) {
		t.Fatalf("Decrypt on node A of node B's Encrypt = %v, want the DEK", err)
	}
	apiB.mustRead(t, etcdKey("shared"), stored, body)
}
