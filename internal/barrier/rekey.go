package barrier

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"

	"github.com/ringkms/kms/internal/base"
	"github.com/ringkms/kms/internal/seal"
)

// Sealed is a row of the table of the records that hold sealed secrets
// (Config.Sealed), which a rekey reseals: the records under Prefix, each
// named by what follows Prefix in its key (its ID).
type Sealed struct {
	Prefix []byte
	// Field is the JSON member of the record that holds the secret,
	// sealed (base64); a record without it, or with it empty, holds none.
	// Empty: the whole value is the sealed secret, bound to its key.
	Field string
	// AAD is what the secret of record id is bound to, for a Field.
	AAD func(id string) []byte
	// What names the secret of record id, in an error.
	What func(id string) string
}

// errRekeyToSameKey refuses a rekey to the key the store is under.
var errRekeyToSameKey = base.Errorf(base.KindInvalid, "rekey: the new master key is the one the store is under already; nothing was changed")

// CheckRekey checks that a rekey from old to new may start: it returns
// the error of KeysUnder(old), except that a store that old does not
// open but new does is one that a rekey to new moved already (the same
// rekey run again): that is said, as an error of kind Invalid.
func (b *Barrier) CheckRekey(ctx context.Context, old, new RootKey) error {
	_, err := b.keysToRekey(ctx, old, new)
	return err
}

// keysToRekey returns the keys of the store under old, the key a rekey to
// new moves it from (CheckRekey).
func (b *Barrier) keysToRekey(ctx context.Context, old, new RootKey) (*Keys, error) {
	if NoKey(old) || NoKey(new) {
		return nil, base.Errorf(base.KindInvalid, "rekey: the old and the new master key are required")
	}
	keys, err := b.KeysUnder(ctx, old)
	if base.ErrorKind(err) == base.KindUnauthenticated {
		if _, nerr := b.KeysUnder(ctx, new); nerr == nil {
			return nil, base.Errorf(base.KindInvalid, "rekey: the store is already under the new master key (a rekey moved it there before); nothing was changed: the new key is the master key from now on")
		}
	}
	return keys, err
}

// CanRekey reports whether the barrier was started with a next key to
// rekey to.
func (b *Barrier) CanRekey() bool { return len(b.keys) >= 2 }

// Rekey moves the store from the barrier's first root key to its next
// one (Start), and goes on under the new root secret at once. It draws a
// new root secret, reseals under it every secret of the records of
// Config.Sealed with the MAC and cursor keys that the store has under the
// old key, so that everything made with them stays valid, stores the new
// root secret sealed under the new key, and adds the old key to the keys
// the store has left, in one transaction. It returns, for each row of
// Config.Sealed, how many secrets it resealed. A new key that the store
// is already under, or one that the store has left, is refused with an
// error of kind Invalid, the store unchanged; a store too large for one
// transaction, with an error of kind TooLarge. Earlier versions of the
// values that a store's files may keep are erased when the store is an
// Eraser.
func (b *Barrier) Rekey(ctx context.Context) ([]int, error) {
	if !b.CanRekey() {
		return nil, base.Errorf(base.KindInvalid, "rekey: this process was given no next master key to rekey to")
	}
	counts, err := b.rekey(ctx, b.keys[0], b.keys[1])
	if err != nil {
		return counts, err
	}
	if _, err := b.refresh(ctx); err != nil {
		return counts, err
	}
	return counts, nil
}

// rekey is Rekey from old to new, but for the adoption of the new root
// secret.
func (b *Barrier) rekey(ctx context.Context, old, new RootKey) ([]int, error) {
	st := b.cfg.Store
	keys, err := b.keysToRekey(ctx, old, new)
	if err != nil {
		return nil, err
	}
	if _, sealed, err := readRoot(ctx, st); err == nil && sealed != nil {
		if secret, err := new.Open(sealed, KeyRoot); err == nil {
			clear(secret)
			return nil, errRekeyToSameKey
		}
	} else if a, ok := plainKey(old); ok {
		if b, ok := plainKey(new); ok && subtle.ConstantTimeCompare(a, b) == 1 {
			return nil, errRekeyToSameKey
		}
	}
	retired, err := readRetired(ctx, st)
	if err != nil {
		return nil, err
	}
	if isRetired(new, retired) {
		return nil, base.Errorf(base.KindInvalid, "rekey: the new master key is one this store was rekeyed away from before, and a rekey never goes back to a key the store has left "+
			"(the copies and backups of the store from its time open with it): choose a key the store has never had; nothing was changed")
	}
	check, err := retiredCheck(old)
	if err != nil {
		return nil, err
	}
	secret := newRootSecret()
	defer clear(secret)
	root, err := sealRoot(new, secret)
	if err != nil {
		return nil, err
	}
	r := resealer{from: seal.New(keys.Seal), to: seal.New(seal.Derive(secret, "seal"))}
	counts := make([]int, len(b.cfg.Sealed))
	var written [][]byte
	err = st.Update(ctx, func(tx base.Txn) error {
		clear(counts)
		written = written[:0]
		changes, err := r.scan(tx, b.cfg.Sealed, counts)
		if err != nil {
			return err
		}
		macs, err := json.Marshal(keys)
		if err != nil {
			return err
		}
		defer clear(macs)
		changes = append(changes, change{KeyMACKeys, r.to.Seal(macs, KeyMACKeys)}, change{KeyRoot, root})
		for _, c := range changes {
			if err := tx.Set(c.k, c.v); err != nil {
				return err
			}
			written = append(written, c.k)
		}
		return addRetired(tx, check)
	})
	if err != nil {
		if base.ErrorKind(err) == base.KindTooLarge {
			return nil, base.Errorf(base.KindTooLarge, "rekey: the store's sealed secrets do not fit in one transaction of this store; nothing was changed")
		}
		return nil, err
	}
	if e, ok := st.(base.Eraser); ok {
		if err := e.Erase(ctx, written); err != nil {
			return counts, &base.Error{Kind: base.KindUnavailable, Err: err,
				Message: "rekey: the store IS rekeyed (use the new master key from now on), but erasing the earlier versions of its secrets from the store's files failed; they stay in those files until the store compacts them"}
		}
	}
	return counts, nil
}

// change is a value a rekey writes.
type change struct{ k, v []byte }

// resealer opens what the old seal key sealed and seals it under the new.
type resealer struct{ from, to *seal.Sealer }

// scan reseals, in tx, the secrets of the records of table, a prefix at
// a time (the rows of one prefix in one pass, each record written once),
// adding to counts, by row, the secrets it resealed; it returns the
// records to write.
func (r resealer) scan(tx base.Txn, table []Sealed, counts []int) ([]change, error) {
	var changes []change
	for i, row := range table {
		if seen(table[:i], row.Prefix) {
			continue
		}
		pfx := row.Prefix
		err := tx.Scan(base.ScanOptions{Prefix: pfx}, func(k, v []byte) (bool, error) {
			id := string(k[len(pfx):])
			changed := false
			for j := i; j < len(table); j++ {
				f := table[j]
				if !bytes.Equal(f.Prefix, pfx) {
					continue
				}
				var nv []byte
				ok := true
				var err error
				if f.Field == "" {
					nv, err = r.reseal(v, k, f.What(id))
				} else {
					nv, ok, err = r.resealField(v, f.Field, f.AAD(id), f.What(id))
				}
				if err != nil {
					return false, err
				}
				if ok {
					v, changed = nv, true
					counts[j]++
				}
			}
			if changed {
				changes = append(changes, change{append([]byte(nil), k...), v})
			}
			return true, nil
		})
		if err != nil {
			return nil, err
		}
	}
	return changes, nil
}

// seen reports whether a row of rows has the prefix pfx.
func seen(rows []Sealed, pfx []byte) bool {
	for _, r := range rows {
		if bytes.Equal(r.Prefix, pfx) {
			return true
		}
	}
	return false
}

// reseal reseals v, bound to aad, the secret named what.
func (r resealer) reseal(v, aad []byte, what string) ([]byte, error) {
	plain, err := r.from.Open(v, aad)
	if err != nil {
		return nil, base.Errorf(base.KindUnauthenticated, "rekey: the old master key is not this store's: %s does not open under it", what)
	}
	defer clear(plain)
	return r.to.Seal(plain, aad), nil
}

// resealField reseals the base64 []byte member field of a JSON record; it
// reports false, and changes nothing, when the record has none.
func (r resealer) resealField(v []byte, field string, aad []byte, what string) ([]byte, bool, error) {
	var rec map[string]json.RawMessage
	if err := json.Unmarshal(v, &rec); err != nil {
		return nil, false, base.InternalError("rekey: read "+what, err)
	}
	raw, ok := rec[field]
	if !ok {
		return nil, false, nil
	}
	var sealed []byte
	if err := json.Unmarshal(raw, &sealed); err != nil || len(sealed) == 0 {
		return nil, false, nil
	}
	out, err := r.reseal(sealed, aad, what)
	if err != nil {
		return nil, false, err
	}
	if rec[field], err = json.Marshal(out); err != nil {
		return nil, false, err
	}
	v, err = json.Marshal(rec)
	return v, true, err
}
