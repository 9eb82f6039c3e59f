package kms_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/dgraph-io/badger/v4/options"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/store/badgerstore"
)

// openUncompressed opens a Badger store in dir whose tables are not
// compressed, so that a record shows in the files as it is stored.
func openUncompressed(t *testing.T, dir string) *badgerstore.Store {
	t.Helper()
	st, err := badgerstore.Open(badgerstore.DefaultOptions(dir).WithCompression(options.None))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// longestString is the longest string in the JSON value v: the sealed
// material of a key's record.
func longestString(v any) string {
	var out string
	switch v := v.(type) {
	case string:
		out = v
	case map[string]any:
		for _, e := range v {
			if s := longestString(e); len(s) > len(out) {
				out = s
			}
		}
	case []any:
		for _, e := range v {
			if s := longestString(e); len(s) > len(out) {
				out = s
			}
		}
	}
	return out
}

// TestDeletedRingsErased: a /ks ring deleted at once, and a held key
// whose deletion is allowed deleted at once, leave nothing of their
// keys' material in Badger's files once the destroyer has passed, as a
// destroyed key leaves nothing.
func TestDeletedRingsErased(t *testing.T) {
	dir := t.TempDir()
	st := openUncompressed(t, dir)
	svc, err := kms.New(st, kms.Options{MasterKey: kms.GenerateMasterKey()})
	if err != nil {
		t.Fatal(err)
	}
	root := bootstrapRoot(t, svc)
	created, err := svc.CreateKeyRing(root, kms.CreateKeyRingInput{Name: "r", KEM: "x25519"})
	if err != nil {
		t.Fatal(err)
	}
	allowed := true
	if _, err := svc.CreateHeldKey(root, kms.CreateHeldKeyInput{Name: "app"}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.ConfigureHeldKey(root, "app", kms.HeldKeyConfig{DeletionAllowed: &allowed}); err != nil {
		t.Fatal(err)
	}
	held, err := svc.GetHeldKey(root, "app")
	if err != nil {
		t.Fatal(err)
	}
	var sealed string
	err = st.View(context.Background(), func(tx kms.Txn) error {
		rec, err := tx.Get(kms.KeyRecordKey(held.ID, held.KeyIDs[1]))
		if err != nil {
			return err
		}
		var v map[string]any
		if err := json.Unmarshal(rec, &v); err != nil {
			return err
		}
		sealed = longestString(v["keyData"])
		return nil
	})
	if err != nil || len(sealed) < 32 {
		t.Fatalf("the held key's record: %q, %v", sealed, err)
	}
	material := map[string][]byte{"the ring's wrapped key": []byte(created.Key.KeyData.Encrypted.Key.Value), "the held key's sealed key": []byte(sealed)}
	for what, b := range material {
		if files := filesHolding(t, dir, b); len(files) == 0 {
			t.Fatalf("the store's files do not hold %s before the deletion: the test cannot see it", what)
		}
	}

	if _, err := svc.DeleteKeyRing(root, kms.RingRef{Name: "r"}); err != nil {
		t.Fatal(err)
	}
	if err := svc.DeleteHeldKey(root, "app"); err != nil {
		t.Fatal(err)
	}
	if err := kms.DestroyDue(context.Background(), svc); err != nil {
		t.Fatal(err)
	}
	if err := svc.Close(); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	for what, b := range material {
		if files := filesHolding(t, dir, b); len(files) > 0 {
			t.Errorf("after the deletion, %s is still in %v", what, files)
		}
	}
}
