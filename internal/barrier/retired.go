package barrier

import (
	"context"
	"crypto/rand"
	"encoding/json"

	"github.com/ringkms/kms/internal/base"
)

// A store remembers the root keys it has left, so that a rekey never
// takes it back to one (Rekey): a key the store left still opens the
// backups and copies of the store from its time, and leaving it may have
// been the point (a key that leaked). Nor can a rekey back to the key a
// store was just rekeyed from be told from a second run of the same
// command, which would undo the first.
//
// For each key it left, the store keeps a check under KeyRetired: 32
// random bytes sealed under that key (RootKey.Seal), bound to KeyRetired.
// Only that key opens a check, and what it opens to is random and used
// for nothing else: the checks tell whoever holds a key whether the store
// left it, and nothing more, to anyone. Nothing is derived from the key
// itself, which a token's key would not allow (its bytes never leave the
// token); sealing is what every RootKey does.
var KeyRetired = []byte("sys/retired")

// retiredRecord is the value under KeyRetired.
type retiredRecord struct {
	V      int      `json:"v"`
	Checks [][]byte `json:"checks"`
}

// retiredCheck returns a new check of rk (random bytes sealed under rk).
func retiredCheck(rk RootKey) ([]byte, error) {
	b := make([]byte, 32)
	rand.Read(b)
	check, err := rk.Seal(b, KeyRetired)
	clear(b)
	if err != nil {
		return nil, &base.Error{Kind: base.KindUnavailable, Err: err, Message: "rekey: the old master key could not seal the record of its retirement; nothing was changed"}
	}
	return check, nil
}

// unmarshalRetired parses the value under KeyRetired (nil: no record).
func unmarshalRetired(v []byte) ([][]byte, error) {
	if v == nil {
		return nil, nil
	}
	var rec retiredRecord
	if err := json.Unmarshal(v, &rec); err != nil || rec.V != 1 {
		return nil, base.Errorf(base.KindInternal, "the store's record of retired master keys is malformed")
	}
	return rec.Checks, nil
}

// readRetired returns the checks of the keys st has left.
func readRetired(ctx context.Context, st base.Store) ([][]byte, error) {
	v, err := readValue(ctx, st, KeyRetired)
	if err != nil {
		return nil, base.InternalError("read the retired master keys", err)
	}
	return unmarshalRetired(v)
}

// isRetired reports whether rk opens one of checks: whether it is a key
// the store has left.
func isRetired(rk RootKey, checks [][]byte) bool {
	for _, c := range checks {
		if b, err := rk.Open(c, KeyRetired); err == nil {
			clear(b)
			return true
		}
	}
	return false
}

// addRetired adds check to the checks that tx holds under KeyRetired.
func addRetired(tx base.Txn, check []byte) error {
	v, err := getIfAny(tx, KeyRetired)
	if err != nil {
		return err
	}
	checks, err := unmarshalRetired(v)
	if err != nil {
		return err
	}
	nv, err := json.Marshal(retiredRecord{V: 1, Checks: append(checks, check)})
	if err != nil {
		return err
	}
	return tx.Set(KeyRetired, nv)
}
