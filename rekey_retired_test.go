package kms_test

import (
	"context"
	"crypto/sha256"
	"strings"
	"testing"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/kmstest"
)

// storeDigest is a digest of every key and value of st: equal digests
// before and after a call mean that the call wrote nothing.
func storeDigest(t *testing.T, st kms.Store) [32]byte {
	t.Helper()
	h := sha256.New()
	err := st.View(context.Background(), func(tx kms.Txn) error {
		return tx.Scan(kms.ScanOptions{}, func(k, v []byte) (bool, error) {
			h.Write(k)
			h.Write([]byte{0})
			h.Write(v)
			h.Write([]byte{0})
			return true, nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return [32]byte(h.Sum(nil))
}

// refused checks that call fails with an error of kind Invalid whose
// message holds want, and leaves st as it was.
func refused(t *testing.T, st kms.Store, what, want string, call func() error) {
	t.Helper()
	before := storeDigest(t, st)
	err := call()
	if kms.ErrorKind(err) != kms.KindInvalid || !strings.Contains(kms.ErrorMessage(err), want) {
		t.Errorf("%s = %v, want an error of kind invalid saying %q", what, err, want)
	}
	if storeDigest(t, st) != before {
		t.Errorf("%s changed the store", what)
	}
}

// opensUnder checks that a Service starts on st under rk alone.
func opensUnder(t *testing.T, st kms.Store, rk kms.RootKey, what string) {
	t.Helper()
	svc, err := kms.New(st, kms.Options{MasterKey: rk})
	if err != nil {
		t.Fatalf("New(%s) = %v, want the store to be under it", what, err)
	}
	svc.Close()
}

// TestRekeyNeverGoesBack: a rekey to the key the store is under, a second
// run of the same rekey, and a rekey back to any key the store has left
// (a plain master key or a key of its own, one or two rekeys ago) are
// refused, saying why, and change nothing in the store.
func TestRekeyNeverGoesBack(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		a, b, c kms.RootKey
	}{
		{"master keys", kms.GenerateMasterKey(), kms.GenerateMasterKey(), kms.GenerateMasterKey()},
		{"a key of its own between", kms.GenerateMasterKey(), newTestRootKey(t), kms.GenerateMasterKey()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b, c := tc.a, tc.b, tc.c
			st := kmstest.MemoryStore(t)
			svc, err := kms.New(st, kms.Options{MasterKey: a})
			if err != nil {
				t.Fatal(err)
			}
			svc.Close()
			refused(t, st, "Rekey(a, a)", "is the one the store is under", func() error { _, err := kms.Rekey(ctx, st, a, a); return err })
			if _, err := kms.Rekey(ctx, st, a, b); err != nil {
				t.Fatalf("Rekey(a, b) = %v", err)
			}
			refused(t, st, "Rekey(a, b) again", "already under the new master key", func() error { _, err := kms.Rekey(ctx, st, a, b); return err })
			refused(t, st, "Rekey(b, a)", "rekeyed away from", func() error { _, err := kms.Rekey(ctx, st, b, a); return err })
			refused(t, st, "Rekey(b, b)", "is the one the store is under", func() error { _, err := kms.Rekey(ctx, st, b, b); return err })
			opensUnder(t, st, b, "b")
			if _, err := kms.Rekey(ctx, st, b, c); err != nil {
				t.Fatalf("Rekey(b, c) = %v", err)
			}
			refused(t, st, "Rekey(c, a)", "rekeyed away from", func() error { _, err := kms.Rekey(ctx, st, c, a); return err })
			refused(t, st, "Rekey(c, b)", "rekeyed away from", func() error { _, err := kms.Rekey(ctx, st, c, b); return err })
			opensUnder(t, st, c, "c")
			if _, err := kms.New(st, kms.Options{MasterKey: a}); kms.ErrorKind(err) != kms.KindUnauthenticated {
				t.Errorf("New(a) after the rekeys = %v, want unauthenticated", err)
			}
		})
	}
}

// TestServiceRekeyOnce: a Service's own rekey (kmsd rekey through the
// admin socket) goes from its master key to its next one, once: run
// again, it is refused and changes nothing, and the store stays under the
// next key; a Service whose next key is one the store has left refuses
// to rekey to it.
func TestServiceRekeyOnce(t *testing.T) {
	ctx := context.Background()
	svc, st, old, next := newRekeying(t)
	if _, err := svc.Rekey(ctx); err != nil {
		t.Fatalf("Rekey = %v", err)
	}
	refused(t, st, "Rekey again", "already under the new master key", func() error { _, err := svc.Rekey(ctx); return err })
	svc.Close()
	opensUnder(t, st, next, "the next key")

	// Restarted with the keys swapped, or the old key as the next one.
	for _, keys := range []kms.Options{{MasterKey: next, NextMasterKey: old}, {MasterKey: old, NextMasterKey: next}} {
		svc, err := kms.New(st, keys)
		if err != nil {
			t.Fatal(err)
		}
		refused(t, st, "Rekey of a Service restarted with the old key beside the new", "", func() error { _, err := svc.Rekey(ctx); return err })
		svc.Close()
	}
	opensUnder(t, st, next, "the next key")

	// The check the store keeps of the old key gives it nothing to open
	// the store with.
	if _, err := kms.VerifyAudit(ctx, st, old); kms.ErrorKind(err) != kms.KindUnauthenticated {
		t.Errorf("VerifyAudit(the old key) = %v, want unauthenticated", err)
	}
}
