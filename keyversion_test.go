package kms_test

import (
	"context"
	"strings"
	"testing"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/kmstest"
)

// keyVersions returns the versions of the keys of a /ks ring, in the
// listing's (creation) order.
func keyVersions(tb testing.TB, svc *kms.Service, root context.Context, ring string) (versions []int, ids []string) {
	tb.Helper()
	list, err := svc.ListKeys(root, kms.RingRef{Name: ring}, kms.PageRequest{})
	if err != nil {
		tb.Fatalf("ListKeys(%s) = %v", ring, err)
	}
	for _, k := range list.Data {
		versions, ids = append(versions, k.Version), append(ids, k.ID)
	}
	return versions, ids
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestKeyVersions(t *testing.T) {
	e := newEnv(t)
	created := e.ring(t, "v")
	if created.Key.Version != 1 {
		t.Errorf("the first key has version %d, want 1", created.Key.Version)
	}
	for want := 2; want <= 3; want++ {
		k, err := e.svc.Rotate(e.root, kms.RotateInput{RingName: "v"})
		if err != nil || k.Version != want {
			t.Fatalf("Rotate = %+v, %v; want version %d", k, err, want)
		}
	}
	if got, _ := keyVersions(t, e.svc, e.root, "v"); !equalInts(got, []int{1, 2, 3}) {
		t.Errorf("versions = %v, want [1 2 3]", got)
	}
	asym, err := e.svc.CreateAsymKeyRing(e.root, kms.CreateAsymKeyRingInput{Name: "av"})
	if err != nil || asym.Key.Version != 1 {
		t.Fatalf("CreateAsymKeyRing = %+v, %v", asym, err)
	}
	k, err := e.svc.RotateAsym(e.root, kms.RotateInput{RingName: "av"})
	if err != nil || k.Version != 2 {
		t.Errorf("RotateAsym = %+v, %v; want version 2", k, err)
	}
	// A key taken out of use with "rotate": true leaves the next version
	// active.
	_, ids := keyVersions(t, e.svc, e.root, "v")
	if _, err := e.svc.SetKeyState(e.root, kms.RingRef{Name: "v"}, ids[2], kms.KeyStateInput{State: kms.KeyDisabled, Rotate: true}); err != nil {
		t.Fatal(err)
	}
	if got, _ := keyVersions(t, e.svc, e.root, "v"); !equalInts(got, []int{1, 2, 3, 4}) {
		t.Errorf("versions = %v, want [1 2 3 4]", got)
	}
}

// TestKeyVersionsUpgrade: the keys of rings made before versions get them
// in creation order, at the rotation sweep's first pass after a start, at
// a rotation, or at the first transit call; the versions given are the
// same whichever comes first.
func TestKeyVersionsUpgrade(t *testing.T) {
	st := kmstest.MemoryStore(t)
	t.Cleanup(func() { st.Close() })
	opts := kms.Options{MasterKey: kms.GenerateMasterKey()}
	svc, err := kms.New(st, opts)
	if err != nil {
		t.Fatal(err)
	}
	root := bootstrapRoot(t, svc)
	for _, name := range []string{"old", "rotated"} {
		if _, err := svc.CreateKeyRing(root, kms.CreateKeyRingInput{Name: name, KEM: "x25519"}); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if _, err := svc.Rotate(root, kms.RotateInput{RingName: name}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := svc.EncryptWithHeldKey(root, kms.HeldEncryptInput{Name: "tk", Create: true, Items: []kms.HeldPlaintext{{Plaintext: []byte("x")}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.RotateHeldKey(root, "tk"); err != nil {
		t.Fatal(err)
	}
	_, oldIDs := keyVersions(t, svc, root, "old")
	_, rotatedIDs := keyVersions(t, svc, root, "rotated")
	ringIDs := map[string]string{}
	for _, name := range []string{"old", "rotated"} {
		r, err := svc.GetKeyRing(root, kms.RingRef{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		ringIDs[name] = r.ID
	}
	tk, err := svc.GetHeldKey(root, "tk")
	if err != nil {
		t.Fatal(err)
	}
	svc.Close()

	// The rings as an earlier version of the service left them.
	ctx := context.Background()
	for _, id := range ringIDs {
		if err := kms.StripKeyVersions(ctx, st, id); err != nil {
			t.Fatal(err)
		}
	}
	asymID := asymRingID(t, st, "tk")
	if err := kms.StripKeyVersions(ctx, st, asymID); err != nil {
		t.Fatal(err)
	}

	// Started again: the rotation of a ring numbers it in its own
	// transaction, if the sweep did not first.
	svc, err = kms.New(st, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	k, err := svc.Rotate(root, kms.RotateInput{RingName: "rotated"})
	if err != nil || k.Version != 4 {
		t.Fatalf("Rotate of a ring without versions = %+v, %v; want version 4", k, err)
	}
	if got, ids := keyVersions(t, svc, root, "rotated"); !equalInts(got, []int{1, 2, 3, 4}) || strings.Join(ids[:3], ",") != strings.Join(rotatedIDs, ",") {
		t.Errorf("versions after rotation = %v of %v, want [1 2 3 4] in creation order", got, ids)
	}
	// The first transit call numbers the transit key's ring.
	out, err := svc.EncryptWithHeldKey(root, kms.HeldEncryptInput{Name: "tk", Items: []kms.HeldPlaintext{{Plaintext: []byte("y"), KeyVersion: 1}}})
	if err != nil || out[0].Err != nil || out[0].KeyVersion != 1 {
		t.Fatalf("EncryptTransit(version 1) = %+v, %v", out, err)
	}
	again, err := svc.GetHeldKey(root, "tk")
	if err != nil || again.KeyIDs[1] != tk.KeyIDs[1] || again.KeyIDs[2] != tk.KeyIDs[2] || again.LatestVersion != 2 {
		t.Errorf("transit key after numbering = %+v, %v; want the versions it had, %v", again, err, tk.KeyIDs)
	}
	// The sweep's first pass numbers the others.
	if _, err := kms.RotateDue(svc); err != nil {
		t.Fatal(err)
	}
	if got, ids := keyVersions(t, svc, root, "old"); !equalInts(got, []int{1, 2, 3}) || strings.Join(ids, ",") != strings.Join(oldIDs, ",") {
		t.Errorf("versions after the sweep = %v of %v, want [1 2 3] of %v", got, ids, oldIDs)
	}
}

// asymRingID returns the ID of the /asym ring name, read from st.
func asymRingID(tb testing.TB, st kms.Store, name string) string {
	tb.Helper()
	var id string
	err := st.View(context.Background(), func(tx kms.Txn) error {
		v, err := tx.Get([]byte("ring/name/" + name))
		id = string(v)
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	return id
}
