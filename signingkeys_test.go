package kms_test

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/kmstest"
)

// headerKeyID is the signing key ID a header names (bytes 2..9).
func headerKeyID(t testing.TB, header string) string {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(header)
	if err != nil || len(raw) < 10 {
		t.Fatalf("header %q: %v", header, err)
	}
	return hex.EncodeToString(raw[2:10])
}

func signingKeys(t testing.TB, svc *kms.Service) *kms.SigningKeySet {
	t.Helper()
	set, err := svc.SigningKeys(context.Background())
	if err != nil {
		t.Fatalf("SigningKeys() = %v", err)
	}
	return set
}

// activeKey returns the one active key of set, failing unless there is
// exactly one.
func activeKey(t testing.TB, set *kms.SigningKeySet) kms.SigningKey {
	t.Helper()
	var active []kms.SigningKey
	for _, k := range set.Keys {
		if k.Active {
			active = append(active, k)
		}
	}
	if len(active) != 1 {
		t.Fatalf("signing keys %+v: %d active, want 1", set.Keys, len(active))
	}
	return active[0]
}

func TestSigningKeys(t *testing.T) {
	e, clock := newEnvAt(t, time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC))
	set := signingKeys(t, e.svc)
	if len(set.Keys) != 1 {
		t.Fatalf("SigningKeys() = %+v, want one key", set.Keys)
	}
	k := set.Keys[0]
	pub, err := base64.StdEncoding.DecodeString(k.PublicKey)
	if err != nil || len(pub) != ed25519.PublicKeySize {
		t.Fatalf("publicKey %q is not base64 of an Ed25519 key", k.PublicKey)
	}
	sum := sha256.Sum256(pub)
	if k.ID != hex.EncodeToString(sum[:8]) || !k.Active || k.Algorithm != "Ed25519" || !k.CreatedAt.Equal(clock.Now()) {
		t.Fatalf("signing key %+v: want ID %x, Ed25519, active, created %v", k, sum[:8], clock.Now())
	}
	e.ring(t, "r")
	enc := e.encrypt(t, "r")
	if got := headerKeyID(t, enc.Header); got != k.ID {
		t.Fatalf("header names signing key %s, want the published %s", got, k.ID)
	}
	// JSON shape: createdAt is RFC 3339.
	b, _ := json.Marshal(set)
	if !strings.Contains(string(b), `"createdAt":"2031-05-06T07:08:09Z"`) || !strings.Contains(string(b), `"active":true`) {
		t.Errorf("SigningKeys JSON = %s", b)
	}
}

// TestRotateSigningKey rotates the signing key: new headers name the new
// key, old ones keep verifying (in the service and offline), both keys
// stay published, the rotation needs "*" and is recorded, and a restart
// signs with the new key.
func TestRotateSigningKey(t *testing.T) {
	mk := kms.GenerateMasterKey()
	clock := kmstest.ClockAt(time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC))
	st := kmstest.DiskStore(t)
	e := newEnvOn(t, st, kms.Options{MasterKey: mk, Now: clock.Now})
	e.ring(t, "r")
	before, err := e.svc.Encrypt(e.root, kms.EncryptInput{RingName: "r", Asset: &kms.AssetInput{Data: map[string]any{"a": 1}}})
	if err != nil {
		t.Fatal(err)
	}
	old := activeKey(t, signingKeys(t, e.svc))

	_, err = e.svc.RotateSigningKey(e.as(t, kms.Flags{"keyring.*.rotate": true, "activity.read": true}))
	wantKind(t, "RotateSigningKey without *", err, kms.KindPermissionDenied)
	_, err = e.svc.RotateSigningKey(context.Background())
	wantKind(t, "RotateSigningKey without a principal", err, kms.KindUnauthenticated)

	clock.Advance(time.Hour)
	k, err := e.svc.RotateSigningKey(e.root)
	if err != nil {
		t.Fatalf("RotateSigningKey() = %v", err)
	}
	set := signingKeys(t, e.svc)
	if len(set.Keys) != 2 || set.Keys[0].ID != old.ID || set.Keys[0].Active || set.Keys[1] != *k || !k.Active || k.ID == old.ID || !k.CreatedAt.Equal(clock.Now()) {
		t.Fatalf("after rotation SigningKeys() = %+v, rotation answered %+v; want the old key inactive, then the new one active", set.Keys, k)
	}
	after := e.encrypt(t, "r")
	if got := headerKeyID(t, after.Header); got != k.ID {
		t.Fatalf("header after rotation names key %s, want the new %s", got, k.ID)
	}
	for name, enc := range map[string]*kms.EncryptResult{"before": before, "after": after} {
		info, err := e.svc.LookupHeader(e.root, enc.Header)
		if err != nil || !info.Valid {
			t.Errorf("LookupHeader(header %s rotation) = %+v, %v; want valid", name, info, err)
		}
		if _, err := e.svc.Decrypt(e.root, kms.DecryptInput{Hash: enc.Hash, Header: enc.Header}); err != nil {
			t.Errorf("Decrypt(header %s rotation) = %v", name, err)
		}
		if v, err := set.VerifyHeader(enc.Header, enc.Asset); err != nil || !v.Valid {
			t.Errorf("VerifyHeader(header %s rotation) = %+v, %v; want valid", name, v, err)
		}
	}
	// The old keys alone do not verify the new header.
	oldSet := &kms.SigningKeySet{Keys: []kms.SigningKey{old}}
	if v, err := oldSet.VerifyHeader(after.Header, nil); err != nil || v.Valid || v.KnownKey {
		t.Errorf("VerifyHeader(new header, old keys) = %+v, %v; want an unknown key", v, err)
	}

	acts, err := e.svc.SearchActivity(e.root, kms.ActivityFilter{Action: "signingkey.rotate"}, kms.PageRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var granted, denied int
	for _, a := range acts.Data {
		switch {
		case a.Valid && a.Props["signingKeyId"] == k.ID && a.Props["previousSigningKeyId"] == old.ID:
			granted++
		case !a.Valid && a.Props["result"] == "permission_denied":
			denied++
		}
	}
	if granted != 1 || denied != 1 {
		t.Errorf("signingkey.rotate records: %d granted, %d denied, want 1 and 1: %+v", granted, denied, acts.Data)
	}

	// A restart signs with the new key and verifies the old headers.
	e.svc.Close()
	again, err := kms.New(st, kms.Options{MasterKey: mk})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if got := activeKey(t, signingKeys(t, again)); got.ID != k.ID {
		t.Fatalf("after a restart the active key is %s, want %s", got.ID, k.ID)
	}
	if info, err := again.LookupHeader(e.root, before.Header); err != nil || !info.Valid {
		t.Errorf("LookupHeader(old header) after a restart = %+v, %v", info, err)
	}
	res, err := again.Encrypt(e.root, kms.EncryptInput{RingName: "r"})
	if err != nil {
		t.Fatal(err)
	}
	if got := headerKeyID(t, res.Header); got != k.ID {
		t.Fatalf("header after a restart names key %s, want %s", got, k.ID)
	}
}

// TestRotateStoreSigningKey rotates as kmsd rotate-signing-key does, on a
// store no Service has open, and records it under "operator".
func TestRotateStoreSigningKey(t *testing.T) {
	mk := kms.GenerateMasterKey()
	st := kmstest.DiskStore(t)
	e := newEnvOn(t, st, kms.Options{MasterKey: mk})
	e.ring(t, "r")
	before := e.encrypt(t, "r")
	e.svc.Close()
	if _, err := kms.RotateStoreSigningKey(context.Background(), st, kms.GenerateMasterKey()); kms.ErrorKind(err) != kms.KindUnauthenticated {
		t.Fatalf("RotateStoreSigningKey with another master key = %v, want Unauthenticated", err)
	}
	k, err := kms.RotateStoreSigningKey(context.Background(), st, mk)
	if err != nil {
		t.Fatalf("RotateStoreSigningKey() = %v", err)
	}
	svc, err := kms.New(st, kms.Options{MasterKey: mk})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	set := signingKeys(t, svc)
	if got := activeKey(t, set); got.ID != k.ID || len(set.Keys) != 2 {
		t.Fatalf("SigningKeys() = %+v, want 2 with %s active", set.Keys, k.ID)
	}
	if v, err := set.VerifyHeader(before.Header, nil); err != nil || !v.Valid {
		t.Errorf("VerifyHeader(header before the rotation) = %+v, %v", v, err)
	}
	acts, err := svc.SearchActivity(e.root, kms.ActivityFilter{Action: "signingkey.rotate"}, kms.PageRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(acts.Data) != 1 || acts.Data[0].KeyID != "operator" || acts.Data[0].Props["signingKeyId"] != k.ID {
		t.Errorf("signingkey.rotate records = %+v, want one by operator", acts.Data)
	}
}

// TestSigningKeysOldStore reads a store whose signing key has no creation
// time, as stores made before it was kept: the key is published without
// one, and a rotation works.
func TestSigningKeysOldStore(t *testing.T) {
	mk := kms.GenerateMasterKey()
	st := kmstest.MemoryStore(t)
	e := newEnvOn(t, st, kms.Options{MasterKey: mk})
	old := activeKey(t, signingKeys(t, e.svc))
	e.svc.Close()
	err := st.Update(context.Background(), func(tx kms.Txn) error {
		return tx.Delete([]byte("sys/signmeta/" + old.ID))
	})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := kms.New(st, kms.Options{MasterKey: mk})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	set := signingKeys(t, svc)
	if len(set.Keys) != 1 || !set.Keys[0].CreatedAt.IsZero() || set.Keys[0].ID != old.ID || !set.Keys[0].Active {
		t.Fatalf("SigningKeys() of an old store = %+v, want %s without createdAt", set.Keys, old.ID)
	}
	if b, _ := json.Marshal(set.Keys[0]); strings.Contains(string(b), "createdAt") {
		t.Errorf("a key without a creation time has JSON %s", b)
	}
	k, err := svc.RotateSigningKey(e.root)
	if err != nil {
		t.Fatal(err)
	}
	set = signingKeys(t, svc)
	if len(set.Keys) != 2 || set.Keys[0].ID != old.ID || set.Keys[1].ID != k.ID || !set.Keys[1].Active {
		t.Fatalf("SigningKeys() after rotating an old store = %+v", set.Keys)
	}
}

// TestVerifyHeaderOffline checks headers with the published keys alone:
// an Asset with the data and parents it signs verifies, any change to the
// header or the Asset does not, and the message says which check failed.
func TestVerifyHeaderOffline(t *testing.T) {
	e := newEnv(t)
	e.ring(t, "r")
	p1, err := e.svc.Encrypt(e.root, kms.EncryptInput{RingName: "r", Asset: &kms.AssetInput{Data: map[string]any{}}})
	if err != nil {
		t.Fatal(err)
	}
	p2, err := e.svc.Encrypt(e.root, kms.EncryptInput{RingName: "r", Asset: &kms.AssetInput{Data: map[string]any{}}})
	if err != nil {
		t.Fatal(err)
	}
	data := map[string]any{"n": 1.5, "big": 1e21, "tiny": 1e-7, "html": "<a & b>", "nested": map[string]any{"z": []any{true, nil, "é"}, "a": 0}}
	enc, err := e.svc.Encrypt(e.root, kms.EncryptInput{RingName: "r", Asset: &kms.AssetInput{Data: data, Parents: []string{p2.Asset.ID, p1.Asset.ID, p2.Asset.ID}}})
	if err != nil {
		t.Fatal(err)
	}
	plain := e.encrypt(t, "r")
	keys := viaJSON[*kms.SigningKeySet](t, signingKeys(t, e.svc))
	// The Asset as a client reads it: from JSON, numbers as float64.
	asset := viaJSON[*kms.Asset](t, enc.Asset)
	stored, err := e.svc.GetAsset(e.root, enc.Asset.ID)
	if err != nil {
		t.Fatal(err)
	}
	valid := func(what, header string, a *kms.Asset) {
		t.Helper()
		v, err := keys.VerifyHeader(header, a)
		if err != nil || !v.Valid || !v.KnownKey || v.Message != "" || v.AssetChecked != (a != nil) {
			t.Errorf("VerifyHeader(%s) = %+v, %v; want valid", what, v, err)
		}
	}
	valid("header, encrypt's Asset", enc.Header, asset)
	valid("header, stored Asset", enc.Header, stored)
	valid("header, no Asset", enc.Header, nil)
	valid("header without an Asset", plain.Header, nil)
	v, _ := keys.VerifyHeader(enc.Header, nil)
	raw, _ := base64.RawURLEncoding.DecodeString(enc.Header)
	if v.AssetID != enc.Asset.ID || v.Hash != enc.Hash || v.Version != 1 || v.KeyID != hex.EncodeToString(raw[2:10]) {
		t.Errorf("VerifyHeader() = %+v: want asset %s, hash %s", v, enc.Asset.ID, enc.Hash)
	}

	invalid := func(what, header string, a *kms.Asset, msg string) {
		t.Helper()
		v, err := keys.VerifyHeader(header, a)
		if err != nil {
			if kms.ErrorKind(err) != kms.KindInvalid {
				t.Errorf("VerifyHeader(%s) = %v, want Valid false or an Invalid error", what, err)
			}
			return
		}
		if v.Valid || !strings.Contains(v.Message, msg) {
			t.Errorf("VerifyHeader(%s) = %+v; want invalid, message with %q", what, v, msg)
		}
	}
	// Every bit of the header but the MAC (which only the service
	// checks) is covered.
	for i := 0; i < len(raw)-16; i++ {
		for bit := range 8 {
			bad := slices.Clone(raw)
			bad[i] ^= 1 << bit
			invalid("header with a flipped bit", base64.RawURLEncoding.EncodeToString(bad), asset, "")
		}
	}
	invalid("truncated header", enc.Header[:len(enc.Header)-4], nil, "")
	changed := *asset
	changed.Data = map[string]any{"n": 1.5}
	invalid("other data", enc.Header, &changed, "data or parents")
	changed = *asset
	changed.Parents = []string{p1.Asset.ID}
	invalid("other parents", enc.Header, &changed, "data or parents")
	changed = *asset
	changed.ID = p1.Asset.ID
	invalid("another Asset", enc.Header, &changed, "header signs asset")
	invalid("an Asset for a header without one", plain.Header, asset, "signs no asset")
	other := viaJSON[*kms.SigningKeySet](t, signingKeys(t, newEnv(t).svc))
	if v, err := other.VerifyHeader(enc.Header, nil); err != nil || v.Valid || v.KnownKey {
		t.Errorf("VerifyHeader with another service's keys = %+v, %v; want an unknown key", v, err)
	}
	// Another service's key under this key's ID does not verify.
	forged := &kms.SigningKeySet{Keys: []kms.SigningKey{{ID: v.KeyID, Algorithm: "Ed25519", PublicKey: other.Keys[0].PublicKey}}}
	if v, err := forged.VerifyHeader(enc.Header, nil); err != nil || v.Valid || !v.KnownKey {
		t.Errorf("VerifyHeader with a forged key = %+v, %v; want the signature refused", v, err)
	}
	_, err = keys.VerifyHeader("not a header", nil)
	wantKind(t, "VerifyHeader(garbage)", err, kms.KindInvalid)
	_, err = keys.VerifyHeader(enc.Header, &kms.Asset{ID: asset.ID, Parents: []string{"nope"}})
	wantKind(t, "VerifyHeader(parents that are not IDs)", err, kms.KindInvalid)
}
