package k8skms_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	kmsapi "k8s.io/kms/apis/v2"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/k8skms"
	"github.com/ringkms/kms/kmstest"
)

// The API server's round trip: Status names the version that encrypts,
// Encrypt's key_id is that one, the ciphertext is small and opens again,
// whatever key_id the Decrypt request carries.
func TestRoundTrip(t *testing.T) {
	p := newPlugin(t, k8skms.Options{}, true)
	st := p.status(t)
	if st.Healthz != "ok" || !strings.HasPrefix(st.KeyId, "kubernetes:v1:") {
		t.Fatalf("Status() = %+v, want healthz ok and key_id kubernetes:v1:...", st)
	}
	dek := dataKey()
	res := p.encrypt(t, dek)
	if res.KeyId != st.KeyId {
		t.Fatalf("Encrypt().KeyId = %q, want Status's %q", res.KeyId, st.KeyId)
	}
	if n := len(res.Ciphertext); n >= k8skms.MaxCiphertext || n != 62 {
		t.Fatalf("ciphertext of a 32-byte data key has %d bytes, want 62 (under %d)", n, k8skms.MaxCiphertext)
	}
	if bytes.Contains(res.Ciphertext, dek) || len(res.Annotations) != 0 {
		t.Fatalf("Encrypt() = %x with annotations %v: holds the plaintext, or annotations", res.Ciphertext, res.Annotations)
	}
	for _, keyID := range []string{res.KeyId, "", "kubernetes:v9:other"} {
		got, err := p.decrypt(res.Ciphertext, keyID)
		if err != nil || !bytes.Equal(got, dek) {
			t.Fatalf("Decrypt(key_id %q) = %x, %v; want the data key", keyID, got, err)
		}
	}
	again := p.encrypt(t, dek)
	if bytes.Equal(again.Ciphertext, res.Ciphertext) {
		t.Fatal("two Encrypts of one plaintext gave one ciphertext: the nonce is not random")
	}
}

// After a rotation, Status and Encrypt name the new version, and the
// ciphertexts of the old one still open while the key's policy allows
// them; once min_decryption_version passes them, they are refused.
func TestRotation(t *testing.T) {
	p := newPlugin(t, k8skms.Options{Key: "cluster-a"}, true)
	old := p.encrypt(t, dataKey())
	before := p.status(t).KeyId
	if _, err := p.Service.RotateHeldKey(p.RootCtx, "cluster-a"); err != nil {
		t.Fatal(err)
	}
	after := p.status(t).KeyId
	if after == before || !strings.HasPrefix(after, "cluster-a:v2:") {
		t.Fatalf("key_id after a rotation = %q (before %q), want cluster-a:v2:...", after, before)
	}
	if res := p.encrypt(t, dataKey()); res.KeyId != after {
		t.Fatalf("Encrypt after a rotation: key_id %q, want %q", res.KeyId, after)
	}
	if _, err := p.decrypt(old.Ciphertext, after); err != nil {
		t.Fatalf("Decrypt of a version 1 ciphertext after a rotation = %v", err)
	}
	two := 2
	if _, err := p.Service.ConfigureHeldKey(p.RootCtx, "cluster-a", kms.HeldKeyConfig{MinDecryptionVersion: &two}); err != nil {
		t.Fatal(err)
	}
	_, err := p.decrypt(old.Ciphertext, before)
	wantCode(t, "Decrypt of version 1 under min_decryption_version 2", err, codes.InvalidArgument)
}

// A ciphertext altered anywhere, cut short, or of another format is
// refused, and never opens to something else.
func TestAlteredCiphertext(t *testing.T) {
	p := newPlugin(t, k8skms.Options{}, true)
	ct := p.encrypt(t, dataKey()).Ciphertext
	for i := range ct {
		bad := bytes.Clone(ct)
		bad[i] ^= 0x40
		got, err := p.decrypt(bad, "")
		if err == nil {
			t.Fatalf("Decrypt of a ciphertext altered at byte %d = %x, want an error", i, got)
		}
		if c := status.Code(err); c != codes.InvalidArgument && c != codes.FailedPrecondition {
			t.Fatalf("Decrypt of a ciphertext altered at byte %d = %v, want InvalidArgument (or FailedPrecondition for another version)", i, err)
		}
	}
	for _, bad := range [][]byte{nil, {}, ct[:1], ct[:2], ct[:20], ct[:len(ct)-1], []byte("k8s:enc:kms:v2:x"), {0x01, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}} {
		_, err := p.decrypt(bad, "")
		wantCode(t, "Decrypt of "+base64.StdEncoding.EncodeToString(bad), err, codes.InvalidArgument)
	}
}

// Plaintexts are 1 byte to MaxPlaintext: every ciphertext stays under the
// API server's limit of 1 KiB.
func TestPlaintextSize(t *testing.T) {
	p := newPlugin(t, k8skms.Options{}, true)
	res := p.encrypt(t, bytes.Repeat([]byte{7}, k8skms.MaxPlaintext))
	if len(res.Ciphertext) >= k8skms.MaxCiphertext {
		t.Fatalf("ciphertext of the largest plaintext has %d bytes, want under %d", len(res.Ciphertext), k8skms.MaxCiphertext)
	}
	for _, n := range []int{0, k8skms.MaxPlaintext + 1, 1 << 20} {
		_, err := p.client.Encrypt(context.Background(), &kmsapi.EncryptRequest{Plaintext: make([]byte, n)})
		if n > 64<<10 {
			if err == nil {
				t.Fatalf("Encrypt of %d bytes succeeded", n)
			}
			continue
		}
		wantCode(t, "Encrypt of "+strconv.Itoa(n)+" bytes", err, codes.InvalidArgument)
	}
}

// A version disabled (the active one with a rotation first, as the
// service allows) refuses the Decrypts of its ciphertexts while Status and
// Encrypt go on with the new version; enabled again, it opens them.
func TestDisabledVersion(t *testing.T) {
	p := newPlugin(t, k8skms.Options{}, true)
	ct := p.encrypt(t, dataKey()).Ciphertext
	keyID := p.status(t).KeyId
	key, err := p.Service.GetHeldKey(p.RootCtx, "kubernetes")
	if err != nil {
		t.Fatal(err)
	}
	ref := kms.RingRef{Name: "kubernetes"}
	if _, err := p.Service.SetAsymKeyState(p.RootCtx, ref, key.KeyIDs[1], kms.KeyStateInput{State: kms.KeyDisabled, Rotate: true}); err != nil {
		t.Fatal(err)
	}
	st := p.status(t)
	if st.Healthz != "ok" || st.KeyId == keyID || !strings.HasPrefix(st.KeyId, "kubernetes:v2:") {
		t.Fatalf("Status() with version 1 disabled = %+v, want ok with version 2", st)
	}
	if res := p.encrypt(t, dataKey()); res.KeyId != st.KeyId {
		t.Fatalf("Encrypt() with version 1 disabled: key_id %q, want %q", res.KeyId, st.KeyId)
	}
	_, err = p.decrypt(ct, keyID)
	wantCode(t, "Decrypt of a disabled version", err, codes.FailedPrecondition)
	if _, err := p.Service.SetAsymKeyState(p.RootCtx, ref, key.KeyIDs[1], kms.KeyStateInput{State: kms.KeyEnabled}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.decrypt(ct, keyID); err != nil {
		t.Fatalf("Decrypt enabled again = %v", err)
	}
}

// With its key gone, Status says why and keeps the last key_id (the API
// server must not take an outage for a rotation), and the calls are
// refused.
func TestKeyGone(t *testing.T) {
	p := newPlugin(t, k8skms.Options{}, true)
	ct := p.encrypt(t, dataKey()).Ciphertext
	keyID := p.status(t).KeyId
	yes := true
	if _, err := p.Service.ConfigureHeldKey(p.RootCtx, "kubernetes", kms.HeldKeyConfig{DeletionAllowed: &yes}); err != nil {
		t.Fatal(err)
	}
	if err := p.Service.DeleteHeldKey(p.RootCtx, "kubernetes"); err != nil {
		t.Fatal(err)
	}
	st := p.status(t)
	if st.Healthz == "ok" || !strings.Contains(st.Healthz, "not found") || st.KeyId != keyID {
		t.Fatalf("Status() with the key deleted = %+v, want a reason and key_id %q", st, keyID)
	}
	_, err := p.client.Encrypt(context.Background(), &kmsapi.EncryptRequest{Plaintext: dataKey()})
	wantCode(t, "Encrypt with the key deleted", err, codes.FailedPrecondition)
	_, err = p.decrypt(ct, keyID)
	wantCode(t, "Decrypt with the key deleted", err, codes.FailedPrecondition)
}

// Before Attach (kmsd waiting for its store), Status says the service
// has not started and the calls are Unavailable, which the API server
// retries.
func TestNotAttached(t *testing.T) {
	p := newPlugin(t, k8skms.Options{}, false)
	st := p.status(t)
	if st.Healthz == "ok" || !strings.Contains(st.Healthz, "not started") {
		t.Fatalf("Status() before Attach = %+v, want a reason", st)
	}
	_, err := p.client.Encrypt(context.Background(), &kmsapi.EncryptRequest{Plaintext: dataKey()})
	wantCode(t, "Encrypt before Attach", err, codes.Unavailable)
	_, err = p.decrypt([]byte{1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, "")
	wantCode(t, "Decrypt before Attach", err, codes.Unavailable)
}

// The plugin's calls are recorded under its own name with the key and
// version, never with a plaintext or a data key; the key it made is
// recorded as made by the service.
func TestRecords(t *testing.T) {
	p := newPlugin(t, k8skms.Options{}, true)
	dek := dataKey()
	res := p.encrypt(t, dek)
	if _, err := p.decrypt(res.Ciphertext, res.KeyId); err != nil {
		t.Fatal(err)
	}
	p.status(t)
	recs, err := p.Service.SearchActivity(p.RootCtx, kms.ActivityFilter{Ring: "kubernetes"}, kms.PageRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range recs.Data {
		b, _ := json.Marshal(a)
		for _, secret := range [][]byte{dek, res.Ciphertext} {
			enc := base64.StdEncoding.EncodeToString(secret)
			if bytes.Contains(b, []byte(enc)) || bytes.Contains(b, []byte(fmt.Sprintf("%x", secret))) {
				t.Fatalf("record %s holds a data key or its ciphertext", b)
			}
		}
		got = append(got, a.KeyID+" "+a.Action)
		if a.KeyID == k8skms.Principal && a.Action != "transit.key.read" && a.Props["version"] == nil {
			t.Errorf("record %s names no version", b)
		}
	}
	want := "system transit.key.create|k8s-kms transit.encrypt|k8s-kms transit.decrypt|k8s-kms transit.key.read"
	if strings.Join(got, "|") != want {
		t.Fatalf("records of the key = %q, want %q", strings.Join(got, "|"), want)
	}
}

// A key of the plugin's name that is not fit for it (exportable, of
// another type) is refused at Attach, and left as it is.
func TestUnfitKey(t *testing.T) {
	for _, in := range []kms.CreateHeldKeyInput{
		{Name: "kubernetes", Exportable: true},
		{Name: "kubernetes", Type: "ed25519"},
		{Name: "kubernetes", Type: "chacha20-poly1305"},
	} {
		env := kmstest.New(t, kmstest.MemoryStore(t), kms.Options{})
		if _, err := env.Service.CreateHeldKey(env.RootCtx, in); err != nil {
			t.Fatal(err)
		}
		srv := k8skms.New(k8skms.Options{})
		err := srv.Attach(context.Background(), env.Service)
		if kms.ErrorKind(err) != kms.KindInvalid {
			t.Fatalf("Attach() with a key %+v = %v, want Invalid", in, err)
		}
		key, err := env.Service.GetHeldKey(env.RootCtx, "kubernetes")
		if err != nil || key.LatestVersion != 1 || key.Exportable != in.Exportable {
			t.Fatalf("the unfit key after Attach = %+v, %v; want it as it was", key, err)
		}
	}
}
