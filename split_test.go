package kms_test

import (
	"bytes"
	"context"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/docblock"
	"github.com/ringkms/kms/kmstest"
)

// splitRing creates a ring with split data keys and an X25519 key pair,
// and returns it with its private key.
func (e *env) splitRing(tb testing.TB, name string) (*kms.CreateKeyRingResult, *kms.PrivateKey) {
	tb.Helper()
	r, err := e.svc.CreateKeyRing(e.root, kms.CreateKeyRingInput{Name: name, KEM: "x25519", DataKeys: kms.DataKeysSplit})
	if err != nil {
		tb.Fatalf("CreateKeyRing(%q, split) = %v", name, err)
	}
	pk, err := kms.ParsePrivateKey([]byte(r.PrivateKey))
	if err != nil {
		tb.Fatal(err)
	}
	return r, pk
}

// shareBytes decodes a keyShare, which must be standard base64 of 32
// bytes.
func shareBytes(tb testing.TB, share string) []byte {
	tb.Helper()
	b, err := base64.StdEncoding.DecodeString(share)
	if err != nil || len(b) != 32 {
		tb.Fatalf("keyShare %q is not standard base64 of 32 bytes", share)
	}
	return b
}

// dataKeyOf returns the data key of an answer: its key unwrapped with pk,
// and derived with its share when it has one.
func dataKeyOf(tb testing.TB, pk *kms.PrivateKey, ringID string, k *kms.Key, share string) (ringKey, dataKey []byte) {
	tb.Helper()
	ringKey, err := pk.Unwrap(ringID, k)
	if err != nil {
		tb.Fatal(err)
	}
	if dataKey, err = kms.DataKey(ringKey, share); err != nil {
		tb.Fatalf("DataKey = %v", err)
	}
	return ringKey, dataKey
}

// TestSplitRing: every encrypt on a split ring answers a share of its
// own, each decrypt answers the share of its encrypt, and the data key is
// neither the ring's key nor another call's; a ring made with dataKeys
// "ring" answers no share. The ring says which kind it is in every answer.
func TestSplitRing(t *testing.T) {
	e := newEnv(t)
	ring, pk := e.splitRing(t, "docs")
	plain := e.ringOfRingKeys(t, "plain")
	if ring.Ring.DataKeys != kms.DataKeysSplit || plain.Ring.DataKeys != kms.DataKeysRing {
		t.Fatalf("CreateKeyRing answered dataKeys %q and %q, want split and ring", ring.Ring.DataKeys, plain.Ring.DataKeys)
	}
	if r, err := e.svc.GetKeyRing(e.root, kms.RingRef{Name: "docs"}); err != nil || r.DataKeys != kms.DataKeysSplit {
		t.Fatalf("GetKeyRing(docs) = %+v, %v; want dataKeys split", r, err)
	}
	list, err := e.svc.ListKeyRings(e.root, kms.PageRequest{})
	if err != nil || len(list.Data) != 2 || list.Data[0].DataKeys != kms.DataKeysSplit || list.Data[1].DataKeys != kms.DataKeysRing {
		t.Fatalf("ListKeyRings = %+v, %v; want docs split, plain ring", list, err)
	}

	var encs []*kms.EncryptResult
	seen := map[string]bool{}
	for range 3 {
		res := e.encrypt(t, "docs")
		shareBytes(t, res.KeyShare)
		if seen[res.KeyShare] {
			t.Fatalf("two encrypt calls answered the share %s", res.KeyShare)
		}
		seen[res.KeyShare] = true
		encs = append(encs, res)
	}
	ringKey, dk0 := dataKeyOf(t, pk, encs[0].RingID, encs[0].Key, encs[0].KeyShare)
	_, dk1 := dataKeyOf(t, pk, encs[1].RingID, encs[1].Key, encs[1].KeyShare)
	if bytes.Equal(dk0, dk1) || bytes.Equal(dk0, ringKey) {
		t.Fatal("a split ring's data key is the ring's key or another call's")
	}
	for i, enc := range encs {
		dec, err := e.svc.Decrypt(e.root, kms.DecryptInput{Hash: enc.Hash, Header: enc.Header})
		if err != nil {
			t.Fatal(err)
		}
		if dec.KeyShare != enc.KeyShare {
			t.Fatalf("Decrypt(hash %d) answered share %s, want its encrypt's %s", i, dec.KeyShare, enc.KeyShare)
		}
	}

	res, err := e.svc.Encrypt(e.root, kms.EncryptInput{RingName: "plain"})
	if err != nil || res.KeyShare != "" {
		t.Fatalf("Encrypt(a ring of ring keys) = share %q, %v; want none", res.KeyShare, err)
	}
	dec, err := e.svc.Decrypt(e.root, kms.DecryptInput{Hash: res.Hash, Header: res.Header})
	if err != nil || dec.KeyShare != "" {
		t.Fatalf("Decrypt(a ring of ring keys) = share %q, %v; want none", dec.KeyShare, err)
	}
}

// TestSplitDataKeysInvalid: dataKeys other than ring and split is
// refused, naming both, and makes no ring.
func TestSplitDataKeysInvalid(t *testing.T) {
	e := newEnv(t)
	for _, v := range []string{"Split", "both", " ring", "none"} {
		_, err := e.svc.CreateKeyRing(e.root, kms.CreateKeyRingInput{Name: "r", DataKeys: v})
		wantKind(t, "CreateKeyRing(dataKeys "+v+")", err, kms.KindInvalid)
		if msg := kms.ErrorMessage(err); !strings.Contains(msg, `"ring"`) || !strings.Contains(msg, `"split"`) {
			t.Errorf("CreateKeyRing(dataKeys %q) = %q, want a message naming ring and split", v, msg)
		}
	}
	_, err := e.svc.GetKeyRing(e.root, kms.RingRef{Name: "r"})
	wantKind(t, "GetKeyRing(r)", err, kms.KindNotFound)
}

// TestSplitEncryptOnly: a principal that may only encrypt, and holds the
// ring's private key, opens its own calls' data but cannot obtain
// another call's share: its decrypt is refused, and the refusal is
// recorded; neither the ring's key nor its own share is the other call's
// data key.
func TestSplitEncryptOnly(t *testing.T) {
	e := newEnv(t)
	_, pk := e.splitRing(t, "docs")
	writer := e.as(t, kms.Flags{"keyring.docs.encrypt": true})
	reader := e.as(t, kms.Flags{"keyring.docs.encrypt": true, "keyring.docs.decrypt": true})
	theirs, err := e.svc.Encrypt(reader, kms.EncryptInput{RingName: "docs"})
	if err != nil {
		t.Fatal(err)
	}
	mine, err := e.svc.Encrypt(writer, kms.EncryptInput{RingName: "docs"})
	if err != nil {
		t.Fatal(err)
	}
	if mine.Key.ID != theirs.Key.ID {
		t.Fatal("the two calls got different keys")
	}
	ringKey, myKey := dataKeyOf(t, pk, mine.RingID, mine.Key, mine.KeyShare)
	_, theirKey := dataKeyOf(t, pk, theirs.RingID, theirs.Key, theirs.KeyShare)
	if bytes.Equal(ringKey, theirKey) || bytes.Equal(myKey, theirKey) {
		t.Fatal("the ring's key or the writer's own share gives another call's data key")
	}

	_, err = e.svc.Decrypt(writer, kms.DecryptInput{Hash: theirs.Hash, Header: theirs.Header})
	wantKind(t, "Decrypt(another's hash) without the decrypt flag", err, kms.KindPermissionDenied)
	_, err = e.svc.DecryptBatch(writer, kms.DecryptBatchInput{Items: []kms.DecryptInput{{Hash: theirs.Hash, Header: theirs.Header}}})
	wantKind(t, "DecryptBatch(another's hash) without the decrypt flag", err, kms.KindPermissionDenied)

	writerID := kms.PrincipalFrom(writer).ID
	recs, err := e.svc.SearchActivity(e.root, kms.ActivityFilter{Action: "decrypt", KeyID: writerID}, kms.PageRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs.Data) != 2 {
		t.Fatalf("the writer's decrypt records = %d, want its 2 refusals", len(recs.Data))
	}
	for _, a := range recs.Data {
		if a.Valid || a.Props["result"] != "permission_denied" || a.Ring != "docs" {
			t.Errorf("record of a refused decrypt = %+v, want valid false, result permission_denied, ring docs", a)
		}
	}

	// A principal that may decrypt gets the share, and its decrypt is
	// recorded as granted.
	dec, err := e.svc.Decrypt(reader, kms.DecryptInput{Hash: mine.Hash, Header: mine.Header})
	if err != nil || dec.KeyShare != mine.KeyShare {
		t.Fatalf("Decrypt with the decrypt flag = %v; want the share of the call", err)
	}
}

// TestSplitByDefault: a ring made with CreateKeyRingInput's zero
// dataKeys has split data keys, and one of ring keys is made by naming
// "ring". On a ring of ring keys, a principal that may only encrypt and
// holds the ring's private key reads another caller's data with no
// decrypt call and so no record (its own encrypt hands out the key that
// sealed it); on a ring made by default, it derives neither that data
// key nor anything that gives it, and its decrypt is refused and
// recorded.
func TestSplitByDefault(t *testing.T) {
	for _, c := range []struct {
		name     string
		dataKeys string // as given
		want     string // as made
		reads    bool   // whether the encrypt-only principal reads the other's data
	}{
		{"ring by name", kms.DataKeysRing, kms.DataKeysRing, true},
		{"default", "", kms.DataKeysSplit, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			ring, err := e.svc.CreateKeyRing(e.root, kms.CreateKeyRingInput{Name: "docs", DataKeys: c.dataKeys})
			if err != nil {
				t.Fatal(err)
			}
			if ring.Ring.DataKeys != c.want {
				t.Fatalf("CreateKeyRing(dataKeys %q) made dataKeys %q, want %q", c.dataKeys, ring.Ring.DataKeys, c.want)
			}
			if r, err := e.svc.GetKeyRing(e.root, kms.RingRef{Name: "docs"}); err != nil || r.DataKeys != c.want {
				t.Fatalf("GetKeyRing(docs) = %+v, %v; want dataKeys %q", r, err, c.want)
			}
			pk, err := kms.ParsePrivateKey([]byte(ring.PrivateKey))
			if err != nil {
				t.Fatal(err)
			}
			owner := e.as(t, kms.Flags{"keyring.docs.encrypt": true, "keyring.docs.decrypt": true})
			writer := e.as(t, kms.Flags{"keyring.docs.encrypt": true})
			theirs, err := e.svc.Encrypt(owner, kms.EncryptInput{RingName: "docs"})
			if err != nil {
				t.Fatal(err)
			}
			_, theirKey := dataKeyOf(t, pk, theirs.RingID, theirs.Key, theirs.KeyShare) // what the owner seals with

			mine, err := e.svc.Encrypt(writer, kms.EncryptInput{RingName: "docs"})
			if err != nil {
				t.Fatal(err)
			}
			ringKey, myKey := dataKeyOf(t, pk, mine.RingID, mine.Key, mine.KeyShare)
			if reads := bytes.Equal(ringKey, theirKey) || bytes.Equal(myKey, theirKey); reads != c.reads {
				t.Fatalf("the encrypt-only principal derives the owner's data key: %v, want %v", reads, c.reads)
			}
			if c.reads {
				return
			}
			_, err = e.svc.Decrypt(writer, kms.DecryptInput{Hash: theirs.Hash, Header: theirs.Header})
			wantKind(t, "Decrypt(the owner's hash) without the decrypt flag", err, kms.KindPermissionDenied)
			recs, err := e.svc.SearchActivity(e.root, kms.ActivityFilter{Action: "decrypt", KeyID: kms.PrincipalFrom(writer).ID}, kms.PageRequest{})
			if err != nil || len(recs.Data) != 1 || recs.Data[0].Valid {
				t.Fatalf("the writer's decrypt records = %+v, %v; want its refusal", recs, err)
			}
		})
	}
}

// TestSplitShareFollowsFormat: the service derives a share from the
// ring's share secret, which the store holds sealed under the master key
// only, as docs/FORMAT.md section 2.1 says.
func TestSplitShareFollowsFormat(t *testing.T) {
	ctx := context.Background()
	st := kmstest.MemoryStore(t)
	mk := kms.GenerateMasterKey()
	e := newEnvOn(t, st, kms.Options{MasterKey: mk})
	ring, pk := e.splitRing(t, "docs")
	res := e.encrypt(t, "docs")
	secret, err := kms.ShareSecret(ctx, st, mk, ring.Ring.ID)
	if err != nil || len(secret) != 32 {
		t.Fatalf("the ring's share secret = %d bytes, %v", len(secret), err)
	}
	hash, _ := base64.RawURLEncoding.DecodeString(res.Hash)
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("ringkms split share v1\x00"))
	m.Write(hash)
	if want := base64.StdEncoding.EncodeToString(m.Sum(nil)); res.KeyShare != want {
		t.Fatalf("keyShare = %s, want HMAC-SHA256(secret, label || 0x00 || hash) = %s", res.KeyShare, want)
	}
	ringKey, dataKey := dataKeyOf(t, pk, res.RingID, res.Key, res.KeyShare)
	want, _ := hkdf.Key(sha256.New, ringKey, shareBytes(t, res.KeyShare), "ringkms split data key v1", 32)
	if !bytes.Equal(dataKey, want) {
		t.Fatalf("DataKey = %x, want %x", dataKey, want)
	}
}

// TestSplitBatch: a batch on a split ring gives every item a share of
// its own, and a batch decrypt gives every item its encrypt's share (and
// none for a hash of a ring of ring keys).
func TestSplitBatch(t *testing.T) {
	e := newEnv(t)
	e.splitRing(t, "docs")
	e.ringOfRingKeys(t, "plain")
	enc := e.encryptBatch(t, "docs", 20)
	plain := e.encrypt(t, "plain")
	seen := map[string]bool{}
	items := make([]kms.DecryptInput, 0, len(enc.Items)+1)
	for i, it := range enc.Items {
		if it.Error != nil {
			t.Fatalf("item %d: %+v", i, it.Error)
		}
		shareBytes(t, it.KeyShare)
		if seen[it.KeyShare] {
			t.Fatalf("item %d has the share of another item", i)
		}
		seen[it.KeyShare] = true
		items = append(items, kms.DecryptInput{Hash: it.Hash, Header: it.Header})
	}
	items = append(items, kms.DecryptInput{Hash: plain.Hash, Header: plain.Header})
	dec, err := e.svc.DecryptBatch(e.root, kms.DecryptBatchInput{Items: items})
	if err != nil {
		t.Fatal(err)
	}
	for i, it := range dec.Items[:len(enc.Items)] {
		if it.Error != nil || it.KeyShare != enc.Items[i].KeyShare {
			t.Fatalf("decrypt item %d = %+v, want the share of encrypt item %d", i, it, i)
		}
	}
	if last := dec.Items[len(enc.Items)]; last.Error != nil || last.KeyShare != "" {
		t.Fatalf("decrypt item of a ring of ring keys = %+v, want no share", last)
	}
}

// TestSplitRingLifecycle: Assets, maxEncryptCount, usage counts and key
// states work on a split ring as on any other; a refused decrypt answers
// no share.
func TestSplitRingLifecycle(t *testing.T) {
	e := newEnv(t)
	e.splitRing(t, "docs")
	ref := kms.RingRef{Name: "docs"}
	if _, err := e.svc.SetConfig(e.root, ref, &kms.KeyRingConfig{Algos: kms.ConfigAlgos{AES256: kms.AlgoConfig{MaxEncryptCount: 2}}}); err != nil {
		t.Fatal(err)
	}
	var encs []*kms.EncryptResult
	for i := range 3 {
		in := kms.EncryptInput{RingName: "docs"}
		if i == 0 {
			in.Asset = &kms.AssetInput{Data: map[string]any{"title": "q3"}}
		}
		res, err := e.svc.Encrypt(e.root, in)
		if err != nil {
			t.Fatal(err)
		}
		encs = append(encs, res)
	}
	first := encs[0].Key.ID
	if encs[1].Key.ID != first || encs[2].Key.ID == first {
		t.Fatal("maxEncryptCount 2 did not rotate the split ring at the third call")
	}
	for _, enc := range encs {
		dec, err := e.svc.Decrypt(e.root, kms.DecryptInput{Hash: enc.Hash, Header: enc.Header})
		if err != nil || dec.KeyShare != enc.KeyShare || !dec.Asset.Valid {
			t.Fatalf("Decrypt = %+v, %v; want the share of its encrypt", dec, err)
		}
	}
	if u, err := e.svc.KeyUsage(e.root, ref, first); err != nil || u.EncryptCount != 2 || u.DecryptCount != 2 {
		t.Fatalf("KeyUsage(first key) = %+v, %v; want 2 encrypts and 2 decrypts", u, err)
	}
	if _, err := e.svc.SetKeyState(e.root, ref, first, kms.KeyStateInput{State: kms.KeyDisabled}); err != nil {
		t.Fatal(err)
	}
	dec, err := e.svc.Decrypt(e.root, kms.DecryptInput{Hash: encs[0].Hash, Header: encs[0].Header})
	wantKind(t, "Decrypt under a disabled key", err, kms.KindDisabled)
	if dec != nil {
		t.Fatalf("Decrypt under a disabled key answered %+v", dec)
	}
}

// TestFormatExampleSplit derives the worked example of docs/FORMAT.md
// section 2.1 by the document's steps with the standard library alone,
// checks that it starts from the ring key and hash of section 5's
// example, and that kms.DataKey gives the same data key.
func TestFormatExampleSplit(t *testing.T) {
	var ex struct {
		ShareSecret, Hash, RingKey, KeyShare, KeyShareHex, PRK, DataKey string
	}
	if err := json.Unmarshal([]byte(docblock.Fenced(t, "docs/FORMAT.md", "json format-example-split")), &ex); err != nil {
		t.Fatal(err)
	}
	var base struct{ Key, Hash string }
	if err := json.Unmarshal([]byte(docblock.Fenced(t, "docs/FORMAT.md", "json format-example")), &base); err != nil {
		t.Fatal(err)
	}
	if ex.RingKey != base.Key || ex.Hash != base.Hash {
		t.Error("the example's ring key and hash are not those of section 5")
	}
	unhex := func(name, s string) []byte {
		b, err := hex.DecodeString(s)
		if err != nil || len(b) != 32 {
			t.Fatalf("%s: not 32 bytes of hex", name)
		}
		return b
	}
	secret, ringKey := unhex("shareSecret", ex.ShareSecret), unhex("ringKey", ex.RingKey)
	hash, err := base64.RawURLEncoding.DecodeString(ex.Hash)
	if err != nil || len(hash) != 65 {
		t.Fatalf("hash: %d bytes, %v", len(hash), err)
	}
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("ringkms split share v1"))
	m.Write([]byte{0x00})
	m.Write(hash)
	share := m.Sum(nil)
	if hex.EncodeToString(share) != ex.KeyShareHex || base64.StdEncoding.EncodeToString(share) != ex.KeyShare {
		t.Fatalf("keyShare = %x, want %s (%s)", share, ex.KeyShareHex, ex.KeyShare)
	}
	m = hmac.New(sha256.New, share)
	m.Write(ringKey)
	prk := m.Sum(nil)
	if hex.EncodeToString(prk) != ex.PRK {
		t.Fatalf("PRK = %x, want %s", prk, ex.PRK)
	}
	m = hmac.New(sha256.New, prk)
	m.Write([]byte("ringkms split data key v1"))
	m.Write([]byte{0x01})
	if got := hex.EncodeToString(m.Sum(nil)); got != ex.DataKey {
		t.Fatalf("dataKey = %s, want %s", got, ex.DataKey)
	}
	dk, err := kms.DataKey(ringKey, ex.KeyShare)
	if err != nil || hex.EncodeToString(dk) != ex.DataKey {
		t.Fatalf("kms.DataKey = %x, %v; want %s", dk, err, ex.DataKey)
	}
}

// TestDataKey: without a share the data key is the ring's key; a share or
// ring key of the wrong form is refused.
func TestDataKey(t *testing.T) {
	ringKey := bytes.Repeat([]byte{9}, 32)
	if dk, err := kms.DataKey(ringKey, ""); err != nil || !bytes.Equal(dk, ringKey) || &dk[0] == &ringKey[0] {
		t.Fatalf("DataKey(no share) = %x, %v; want a copy of the ring's key", dk, err)
	}
	share := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, 32))
	for _, c := range []struct {
		name  string
		key   []byte
		share string
	}{
		{"short key", ringKey[:31], share},
		{"share of 31 bytes", ringKey, base64.StdEncoding.EncodeToString(make([]byte, 31))},
		{"share in base64url", ringKey, base64.RawURLEncoding.EncodeToString(bytes.Repeat([]byte{0xfb}, 32))},
		{"share not base64", ringKey, "not base64!"},
	} {
		_, err := kms.DataKey(c.key, c.share)
		wantKind(t, "DataKey("+c.name+")", err, kms.KindInvalid)
	}
}

// TestSplitAcrossNodes: the nodes of a cluster read the ring's share
// secret from the store they share, so a decrypt on any node answers the
// share that an encrypt on any other answered.
func TestSplitAcrossNodes(t *testing.T) {
	nodes := pgNodes(t, 2, kms.Options{MasterKey: kms.GenerateMasterKey()}, nil)
	root := bootstrapRoot(t, nodes[0])
	if _, err := nodes[0].CreateKeyRing(root, kms.CreateKeyRingInput{Name: "docs", KEM: "x25519", DataKeys: kms.DataKeysSplit}); err != nil {
		t.Fatal(err)
	}
	for i, from := range nodes {
		enc, err := from.Encrypt(root, kms.EncryptInput{RingName: "docs"})
		if err != nil {
			t.Fatal(err)
		}
		dec, err := nodes[1-i].Decrypt(root, kms.DecryptInput{Hash: enc.Hash, Header: enc.Header})
		if err != nil || enc.KeyShare == "" || dec.KeyShare != enc.KeyShare {
			t.Fatalf("Decrypt on node %d of node %d's encrypt = %v; want its share", 1-i, i, err)
		}
	}
}

// TestSplitRingStoredBefore: a ring stored as the releases before split
// data keys became the default wrote one made with no dataKeys (with
// "dataKeys": "ring" and no share secret), or before rings had dataKeys
// (with neither), is a ring of ring keys and answers no share: the
// default of new rings does not reach a stored ring.
func TestSplitRingStoredBefore(t *testing.T) {
	for _, c := range []struct {
		name    string
		rewrite func(rec map[string]json.RawMessage)
	}{
		{"dataKeys ring", func(rec map[string]json.RawMessage) { rec["dataKeys"] = json.RawMessage(`"ring"`) }},
		{"no dataKeys", func(rec map[string]json.RawMessage) { delete(rec, "dataKeys") }},
	} {
		t.Run(c.name, func(t *testing.T) {
			testRingStoredBefore(t, c.rewrite)
		})
	}
}

func testRingStoredBefore(t *testing.T, rewrite func(rec map[string]json.RawMessage)) {
	svc, app := storedRing(t, func(_ kms.Txn, _ string, rec map[string]json.RawMessage) error {
		if _, ok := rec["dataKeys"]; !ok {
			t.Fatalf("the ring's record %v has no dataKeys: has the layout changed?", rec)
		}
		delete(rec, "sealedShareSecret")
		rewrite(rec)
		return nil
	})
	if r, err := svc.GetKeyRing(app, kms.RingRef{Name: "old"}); err != nil || r.DataKeys != kms.DataKeysRing {
		t.Fatalf("GetKeyRing(a ring stored before) = %+v, %v; want dataKeys ring", r, err)
	}
	if list, err := svc.ListKeyRings(app, kms.PageRequest{}); err != nil || len(list.Data) != 1 || list.Data[0].DataKeys != kms.DataKeysRing {
		t.Fatalf("ListKeyRings = %+v, %v; want the ring stored before, dataKeys ring", list, err)
	}
	enc, err := svc.Encrypt(app, kms.EncryptInput{RingName: "old"})
	if err != nil || enc.KeyShare != "" {
		t.Fatalf("Encrypt(a ring stored before) = share %q, %v; want none", enc.KeyShare, err)
	}
	dec, err := svc.Decrypt(app, kms.DecryptInput{Hash: enc.Hash, Header: enc.Header})
	if err != nil || dec.KeyShare != "" {
		t.Fatalf("Decrypt(a ring stored before) = share %q, %v; want none", dec.KeyShare, err)
	}
}
