package kms_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"sync"
	"testing"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/kmstest"
	"github.com/ringkms/kms/store/badgerstore"
)

// records reads the raw activity trail of the store, in chain order.
func records(t *testing.T, st kms.Store) []kms.Activity {
	t.Helper()
	var out []kms.Activity
	err := st.Trail().Scan(1, func(_ uint64, v []byte) (bool, error) {
		var a kms.Activity
		if err := json.Unmarshal(v[32:], &a); err != nil {
			return false, err
		}
		out = append(out, a)
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestActivityRecordsGrantsAndDenials(t *testing.T) {
	st := kmstest.MemoryStore(t)
	e := newEnvOn(t, st, kms.Options{MasterKey: kms.GenerateMasterKey()})
	e.ring(t, "audited")
	weak := e.as(t, kms.Flags{"keyring.audited.encrypt": true})
	if _, err := e.svc.Encrypt(weak, kms.EncryptInput{RingName: "audited"}); err != nil {
		t.Fatal(err)
	}
	_, err := e.svc.Rotate(weak, kms.RotateInput{RingName: "audited"})
	wantKind(t, "Rotate without flag", err, kms.KindPermissionDenied)

	weakID := kms.PrincipalFrom(weak).ID
	var sawEncrypt, sawDenial bool
	for _, a := range records(t, st) {
		if a.KeyID != weakID {
			continue
		}
		switch {
		case a.Action == "encrypt" && a.Valid && a.Ring == "audited" && a.Props["result"] == "ok":
			sawEncrypt = true
		case a.Action == "keyring.rotate" && !a.Valid && a.Ring == "audited" && a.Props["flag"] == "keyring.audited.rotate":
			sawDenial = true
		}
	}
	if !sawEncrypt || !sawDenial {
		t.Fatalf("trail has encrypt=%v, rotate denial=%v; want both", sawEncrypt, sawDenial)
	}
	res, err := e.svc.VerifyActivityChain(t.Context())
	if err != nil || res.Records < 5 {
		t.Fatalf("VerifyActivityChain = %+v, %v", res, err)
	}
	// GetActivity reads a record by its ID.
	recs := records(t, st)
	got, err := e.svc.GetActivity(e.root, recs[1].ID)
	if err != nil || got.ID != recs[1].ID || got.Digest == "" {
		t.Fatalf("GetActivity = %+v, %v", got, err)
	}
	_, err = e.svc.GetActivity(e.root, "nope")
	wantKind(t, "GetActivity(nope)", err, kms.KindNotFound)
	_, err = e.svc.GetActivity(weak, recs[1].ID)
	wantKind(t, "GetActivity without activity.read", err, kms.KindPermissionDenied)
}

// sliceTrail is an in-memory kms.Trail whose records a test can rewrite,
// as whoever can write the data directory could.
type sliceTrail struct {
	mu   sync.Mutex
	recs [][]byte
}

func (t *sliceTrail) Len() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return uint64(len(t.recs))
}

func (t *sliceTrail) Append(recs [][]byte) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range recs {
		t.recs = append(t.recs, bytes.Clone(r))
	}
	return nil
}

func (t *sliceTrail) Check(want uint64) error {
	if n := t.Len(); want > n {
		return kms.Errorf(kms.KindUnprocessable, "trail ends after record %d", n)
	}
	return nil
}

func (t *sliceTrail) Scan(from uint64, fn func(uint64, []byte) (bool, error)) error {
	t.mu.Lock()
	recs := slices.Clone(t.recs)
	t.mu.Unlock()
	for i := max(from, 1); i <= uint64(len(recs)); i++ {
		if more, err := fn(i, recs[i-1]); err != nil || !more {
			return err
		}
	}
	return nil
}

// tamper lets fn rewrite the records.
func (t *sliceTrail) tamper(fn func(recs [][]byte) [][]byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.recs = fn(t.recs)
}

// sliceTrailStore is a Store whose trail is a sliceTrail.
type sliceTrailStore struct {
	kms.Store
	trail *sliceTrail
}

func (s *sliceTrailStore) Trail() kms.Trail { return s.trail }

func TestActivityChainDetectsTampering(t *testing.T) {
	flipValid := func(v []byte) []byte {
		var a map[string]any
		json.Unmarshal(v[32:], &a)
		a["valid"] = !a["valid"].(bool)
		body, _ := json.Marshal(a)
		return append(bytes.Clone(v[:32]), body...)
	}
	tamper := map[string]func(recs [][]byte, st kms.Store) [][]byte{
		"altered": func(recs [][]byte, _ kms.Store) [][]byte {
			recs[1] = flipValid(recs[1])
			return recs
		},
		"removed": func(recs [][]byte, _ kms.Store) [][]byte { return slices.Delete(recs, 1, 2) },
		// The last records cut off: the chain that remains is sound, but
		// it ends before the record that the index names.
		"truncated": func(recs [][]byte, _ kms.Store) [][]byte { return recs[:len(recs)-2] },
		// Whoever can write the store but holds no master key cannot
		// rewrite the chain consistently: here every digest from the
		// altered record on is recomputed with plain SHA-256, and the
		// index's head with them.
		"rechained without the key": func(recs [][]byte, st kms.Store) [][]byte {
			prev := ""
			var head map[string]any
			for i := range recs {
				var a map[string]any
				json.Unmarshal(recs[i][32:], &a)
				if i == 1 {
					a["valid"] = !a["valid"].(bool)
				}
				a["prev"] = prev
				body, _ := json.Marshal(a)
				sum := sha256.Sum256(append([]byte(prev), body...))
				prev = hex.EncodeToString(sum[:])
				recs[i] = append(sum[:], body...)
				head = map[string]any{"seq": a["seq"], "digest": prev, "time": a["createdAt"]}
			}
			hb, _ := json.Marshal(head)
			if err := st.Update(context.Background(), func(tx kms.Txn) error { return tx.Set([]byte("act/head"), hb) }); err != nil {
				panic(err)
			}
			return recs
		},
		"digest": func(recs [][]byte, _ kms.Store) [][]byte {
			recs[1] = bytes.Clone(recs[1])
			recs[1][0] ^= 1
			return recs
		},
	}
	for name, fn := range tamper {
		t.Run(name, func(t *testing.T) {
			inner, err := badgerstore.OpenInMemory()
			if err != nil {
				t.Fatal(err)
			}
			st := &sliceTrailStore{Store: inner, trail: &sliceTrail{}}
			e := newEnvOn(t, st, kms.Options{MasterKey: kms.GenerateMasterKey()})
			for _, n := range []string{"a", "b", "c"} {
				e.ring(t, n)
			}
			if _, err := e.svc.VerifyActivityChain(t.Context()); err != nil {
				t.Fatal(err)
			}
			st.trail.tamper(func(recs [][]byte) [][]byte { return fn(recs, inner) })
			_, err = e.svc.VerifyActivityChain(t.Context())
			wantKind(t, "VerifyActivityChain(tampered)", err, kms.KindUnprocessable)
		})
	}
}
