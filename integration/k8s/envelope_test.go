package k8s_test

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	kmsapi "k8s.io/kms/apis/v2"

	"github.com/ringkms/kms/integration/internal/harness"
	"github.com/ringkms/kms/internal/kmsdtest"
)

// TestSecretRoundTrip: the API server stores a Secret through kmsd's
// plugin socket (mode 0600) as an EncryptedObject under the provider's
// prefix, naming the key_id of the plugin's Status and holding nothing
// of the Secret in plain text; it reads it back, and so does another API
// server, which has no DEK cached and asks the plugin to decrypt it. A
// DEK whose ciphertext was altered is refused.
func TestSecretRoundTrip(t *testing.T) {
	t.Parallel()
	n := startNode(t, harness.New(t), socketPath(t))
	fi, err := os.Stat(n.socket)
	if err != nil || fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the plugin's socket: %v, %v; want a socket of mode 0600", fi, err)
	}
	st := pluginStatus(t, n.socket)
	if !strings.Contains(st.KeyId, ":v1:") {
		t.Errorf("Status key_id = %q, want one naming version 1 of the new key", st.KeyId)
	}

	api := loadAPIServer(t, n.socket)
	if err := api.check(); err != nil {
		t.Fatalf("the API server's KMS health check = %v", err)
	}
	body, secret := secretOf(t, "db")
	stored := api.mustWrite(t, etcdKey("db"), body, secret)
	if obj := encryptedObject(t, stored); obj.KeyID != st.KeyId {
		t.Errorf("the stored value's key_id = %q, want Status's %q", obj.KeyID, st.KeyId)
	}
	if stale := api.mustRead(t, etcdKey("db"), stored, body); stale {
		t.Error("the value just written reads as stale")
	}
	var s corev1.Secret
	got, _, _ := api.read(etcdKey("db"), stored)
	if err := s.Unmarshal(got); err != nil || !bytes.Equal(s.Data["password"], secret) {
		t.Errorf("the Secret read back = %v, %v; want its value", s.Data, err)
	}

	// Another API server has only the stored value: the plugin decrypts
	// its DEK.
	other := loadAPIServer(t, n.socket)
	other.mustRead(t, etcdKey("db"), stored, body)

	obj := encryptedObject(t, stored)
	c, ctx := plugin(t, n.socket), callCtx(t)
	for i := range obj.EncryptedDEKSource {
		altered := bytes.Clone(obj.EncryptedDEKSource)
		altered[i] ^= 0x01
		if out, err := c.Decrypt(ctx, &kmsapi.DecryptRequest{Uid: "altered", Ciphertext: altered, KeyId: obj.KeyID}); err == nil {
			t.Fatalf("Decrypt of the DEK with byte %d altered = %d bytes, want an error", i, len(out.Plaintext))
		}
	}
}

// TestKeyRotation: once the key rotates in kmsd, Status names another
// key_id, the API server's probe sees it and makes a new DEK, and new
// Secrets are stored under the new key_id; what was stored under the old
// one still reads back (as stale, for a storage migration to rewrite),
// also through an API server without either DEK, and the plugin decrypts
// an old DEK whatever key_id the request names. Once the old version is
// disabled, what it sealed no longer reads, until it is enabled again.
func TestKeyRotation(t *testing.T) {
	t.Parallel()
	n := startNode(t, harness.New(t), socketPath(t), "-transit")
	api := loadAPIServer(t, n.socket)
	body1, secret1 := secretOf(t, "before")
	stored1 := api.mustWrite(t, etcdKey("before"), body1, secret1)
	old := encryptedObject(t, stored1).KeyID
	if st := pluginStatus(t, n.socket); st.KeyId != old {
		t.Fatalf("stored key_id %q, Status key_id %q: want the same", old, st.KeyId)
	}

	n.rotate(t)
	now := pluginStatus(t, n.socket).KeyId
	if now == old || !strings.Contains(now, ":v2:") {
		t.Fatalf("Status key_id after the rotation = %q (before: %q), want a new one naming version 2", now, old)
	}

	// The probe asks for Status again when its last answer expires; the
	// health check runs it, as /healthz does.
	body2, secret2 := secretOf(t, "after")
	var stored2 []byte
	kmsdtest.WaitFor(t, probeBound, "the API server to write with the rotated key's key_id", func() bool {
		if err := api.check(); err != nil {
			t.Fatalf("the API server's KMS health check after the rotation = %v", err)
		}
		stored2 = api.mustWrite(t, etcdKey("after"), body2, secret2)
		return encryptedObject(t, stored2).KeyID == now
	})
	if stale := api.mustRead(t, etcdKey("before"), stored1, body1); !stale {
		t.Error("the Secret stored under the old key_id does not read as stale")
	}
	if stale := api.mustRead(t, etcdKey("after"), stored2, body2); stale {
		t.Error("the Secret stored under the new key_id reads as stale")
	}
	fresh := loadAPIServer(t, n.socket)
	fresh.mustRead(t, etcdKey("before"), stored1, body1)
	fresh.mustRead(t, etcdKey("after"), stored2, body2)

	obj := encryptedObject(t, stored1)
	out, err := plugin(t, n.socket).Decrypt(callCtx(t), &kmsapi.DecryptRequest{Uid: "old", Ciphertext: obj.EncryptedDEKSource, KeyId: now})
	if err != nil || !bytes.Equal(out.GetPlaintext(), dek(t, n.socket, stored1)) {
		t.Errorf("Decrypt of the old DEK naming the new key_id = %v, want the DEK", err)
	}

	// The old version retired (disabled): what it sealed does not read,
	// what the new one sealed does; enabled again, it opens again.
	v1 := n.versionKeyID(t, 1)
	n.setKeyState(t, v1, "disabled")
	_, err = plugin(t, n.socket).Decrypt(callCtx(t), &kmsapi.DecryptRequest{Uid: "retired", Ciphertext: obj.EncryptedDEKSource, KeyId: old})
	if status.Code(err) != codes.FailedPrecondition {
		t.Errorf("Decrypt of a DEK of a disabled version = %v, want FailedPrecondition", err)
	}
	if out, _, err := loadAPIServer(t, n.socket).read(etcdKey("before"), stored1); err == nil {
		t.Errorf("an API server read a Secret whose version is disabled: %d bytes", len(out))
	}
	loadAPIServer(t, n.socket).mustRead(t, etcdKey("after"), stored2, body2)
	n.setKeyState(t, v1, "enabled")
	loadAPIServer(t, n.socket).mustRead(t, etcdKey("before"), stored1, body1)
}
