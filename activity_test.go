package kms_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/store/badgerstore"
)

// records reads the raw activity trail from the store, in chain order.
func records(t *testing.T, st kms.Store) []kms.Activity {
	t.Helper()
	var out []kms.Activity
	err := st.View(t.Context(), func(tx kms.Txn) error {
		return tx.Scan(kms.ScanOptions{Prefix: []byte("act/seq/")}, func(_, v []byte) (bool, error) {
			var a kms.Activity
			if err := json.Unmarshal(v[32:], &a); err != nil {
				return false, err
			}
			out = append(out, a)
			return true, nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestActivityRecordsGrantsAndDenials(t *testing.T) {
	st, err := badgerstore.OpenInMemory()
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvOn(t, st, kms.Options{MasterKey: kms.GenerateMasterKey()})
	e.ring(t, "audited")
	weak := e.as(t, kms.Flags{"keyring.audited.encrypt": true})
	if _, err := e.svc.Encrypt(weak, kms.EncryptInput{RingName: "audited"}); err != nil {
		t.Fatal(err)
	}
	_, err = e.svc.Rotate(weak, kms.RotateInput{RingName: "audited"})
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

func TestActivityChainDetectsTampering(t *testing.T) {
	tamper := map[string]func(k, v []byte, tx kms.Txn) error{
		"altered": func(k, v []byte, tx kms.Txn) error {
			var a map[string]any
			json.Unmarshal(v[32:], &a)
			a["valid"] = !a["valid"].(bool)
			body, _ := json.Marshal(a)
			return tx.Set(k, append(append([]byte{}, v[:32]...), body...))
		},
		"removed": func(k, _ []byte, tx kms.Txn) error { return tx.Delete(k) },
		// Whoever can write the store but holds no master key cannot
		// rewrite the chain consistently: here every digest from the
		// altered record on is recomputed with plain SHA-256.
		"rechained without the key": func(k, v []byte, tx kms.Txn) error {
			var recs [][]byte
			var keys [][]byte
			err := tx.Scan(kms.ScanOptions{Prefix: []byte("act/seq/")}, func(k, v []byte) (bool, error) {
				keys = append(keys, append([]byte{}, k...))
				recs = append(recs, append([]byte{}, v...))
				return true, nil
			})
			if err != nil {
				return err
			}
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
				if err := tx.Set(keys[i], append(sum[:], body...)); err != nil {
					return err
				}
				head = map[string]any{"seq": a["seq"], "digest": prev, "time": a["createdAt"]}
			}
			hb, _ := json.Marshal(head)
			return tx.Set([]byte("act/head"), hb)
		},
		"digest": func(k, v []byte, tx kms.Txn) error {
			c := append([]byte{}, v...)
			c[0] ^= 1
			return tx.Set(k, c)
		},
	}
	for name, fn := range tamper {
		t.Run(name, func(t *testing.T) {
			st, err := badgerstore.OpenInMemory()
			if err != nil {
				t.Fatal(err)
			}
			e := newEnvOn(t, st, kms.Options{MasterKey: kms.GenerateMasterKey()})
			for _, n := range []string{"a", "b", "c"} {
				e.ring(t, n)
			}
			if _, err := e.svc.VerifyActivityChain(t.Context()); err != nil {
				t.Fatal(err)
			}
			err = st.Update(t.Context(), func(tx kms.Txn) error {
				n := 0
				var key, val []byte
				err := tx.Scan(kms.ScanOptions{Prefix: []byte("act/seq/")}, func(k, v []byte) (bool, error) {
					n++
					if n == 2 {
						key, val = append([]byte{}, k...), append([]byte{}, v...)
						return false, nil
					}
					return true, nil
				})
				if err != nil {
					return err
				}
				return fn(key, val, tx)
			})
			if err != nil {
				t.Fatal(err)
			}
			_, err = e.svc.VerifyActivityChain(t.Context())
			wantKind(t, "VerifyActivityChain(tampered)", err, kms.KindUnprocessable)
		})
	}
}
