package kms

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"

	"github.com/ringkms/kms/internal/seal"
)

// The keys a Service works with come from the store's root secret, which
// the master key seals (rootkey.go; docs/FORMAT.md section 8): for a
// store of a plain master key that was never rekeyed, the master key's
// own bytes. The seal key, which seals every secret the store holds,
// always does. The others are MAC and cursor keys: the hashes, headers,
// cursors and activity chain made with them must stay valid for as long
// as the service runs, so a new master key (Rekey) does not replace them:
// the store keeps them, sealed under the new seal key, under keyMACKeys.
// A store that was never rekeyed has no such record and derives them from
// the master key.
//
// The backup key, which authenticates backups (backup.go), is like the
// seal key: always derived from the master key the store is under, never
// kept. A backup holds the store's secrets sealed under that master key,
// so it can only ever restore into a service run with that key; binding
// its authentication to the same key costs nothing, lets Restore check a
// backup before it reads the store it holds, and makes a rekey retire the
// old key's power to forge backups as it retires its power to open
// secrets (a key kept under sys/keys would outlive the rekey).
var keyMACKeys = []byte("sys/keys")

// serviceKeys are the raw keys of a Service.
type serviceKeys struct {
	Seal       [32]byte `json:"-"`
	Backup     [32]byte `json:"-"`
	RootValue  []byte   `json:"-"` // the value under keyRoot it comes from; nil for a master key's own bytes
	SealedRoot []byte   `json:"-"` // the root secret sealed, as RootValue holds it

	HashMAC    [32]byte `json:"hashMac"`
	HeaderMAC  [32]byte `json:"headerMac"`
	Cursor     [32]byte `json:"cursor"`
	AuditChain [32]byte `json:"auditChain"`
	Throttle   [32]byte `json:"throttle"`
}

// loadServiceKeys returns the keys of st under the root key rk.
func loadServiceKeys(ctx context.Context, st Store, rk RootKey) (*serviceKeys, error) {
	m, value, err := rootSecret(ctx, st, rk)
	if err != nil {
		return nil, err
	}
	defer clear(m)
	k, err := deriveKeys(m, value)
	if err != nil {
		return nil, err
	}
	sealed, err := readSealedKeys(ctx, st)
	if err != nil {
		return nil, internalError("read the service keys", err)
	}
	if sealed == nil {
		k.HashMAC, k.HeaderMAC = seal.Derive(m, "hash-mac"), seal.Derive(m, "header-mac")
		k.Cursor, k.AuditChain, k.Throttle = seal.Derive(m, "cursor"), seal.Derive(m, "audit-chain"), seal.Derive(m, "throttle")
		return k, nil
	}
	raw, err := seal.New(k.Seal).Open(sealed, keyMACKeys)
	if err != nil {
		return nil, Errorf(KindUnauthenticated, "the master key is not the one this store was last rekeyed to: its keys do not open under it")
	}
	defer clear(raw)
	var zero [32]byte
	if err := json.Unmarshal(raw, k); err != nil || k.HashMAC == zero || k.HeaderMAC == zero || k.Cursor == zero || k.AuditChain == zero || k.Throttle == zero {
		return nil, Errorf(KindInternal, "the store's service keys are malformed")
	}
	return k, nil
}

// deriveKeys returns the seal and backup keys of the root secret root,
// which comes from the value under keyRoot (nil for a master key's own
// bytes).
func deriveKeys(root, value []byte) (*serviceKeys, error) {
	k := &serviceKeys{Seal: seal.Derive(root, "seal"), Backup: backupKey(root), RootValue: value}
	if value != nil {
		var rec rootRecord
		if err := unmarshalRoot(value, &rec); err != nil {
			return nil, err
		}
		k.SealedRoot = rec.Sealed
	}
	return k, nil
}

// backupKey is the key that authenticates the backups of a store whose
// root secret is root.
func backupKey(root []byte) [32]byte { return seal.Derive(root, "backup-mac") }

// readSealedKeys returns the service keys as st holds them, sealed, or
// nil when st was never rekeyed.
func readSealedKeys(ctx context.Context, st Store) ([]byte, error) {
	var sealed []byte
	err := st.View(ctx, func(tx Txn) error {
		var err error
		sealed, err = tx.Get(keyMACKeys)
		if isNotFound(err) {
			sealed, err = nil, nil
		}
		return err
	})
	return sealed, err
}

// errRekeyToSameKey refuses a rekey to the key the store is under.
var errRekeyToSameKey = Errorf(KindInvalid, "rekey: the new master key is the one the store is under already; nothing was changed")

// keysToRekey returns the keys of st under old, the key a rekey to new
// moves it from. A store that old does not open but new does is one
// that a rekey to new moved already (the same rekey run again): that is
// said, as an error of kind Invalid.
func keysToRekey(ctx context.Context, st Store, old, new RootKey) (*serviceKeys, error) {
	keys, err := keysUnder(ctx, st, old)
	if ErrorKind(err) == KindUnauthenticated {
		if _, nerr := keysUnder(ctx, st, new); nerr == nil {
			return nil, Errorf(KindInvalid, "rekey: the store is already under the new master key (a rekey moved it there before); nothing was changed: the new key is the master key from now on")
		}
	}
	return keys, err
}

// RekeyResult says what Rekey moved to the new master key.
type RekeyResult struct {
	SigningKeys int // header signing keys
	AsymRings   int // private keys of /asym rings
	SplitRings  int // share secrets of /ks rings with split data keys
	Users       int // password hashes
}

// Rekey moves st from the root key old to the root key new: it draws a
// new root secret, reseals under it every secret that st holds sealed
// (the header signing keys, the private keys of /asym rings, the share
// secrets of split /ks rings, the Users' password hashes) with the MAC
// and cursor keys that st has under old, so that every hash, header,
// cursor and activity record issued before stays valid, stores the new
// root secret sealed under new, and adds old to the keys st has left
// (retiredkeys.go), in one transaction. Then it records the rotation
// (action masterkey.rotate, by "operator"). Afterwards old opens no
// secret of st: neither the root secret nor any secret sealed under the
// old one. A new key that st is already under, or one that st has left,
// is refused with an error of kind Invalid, st unchanged: so a second
// run of the same rekey changes nothing. The MAC and cursor keys stay
// those of st's first root secret (docs/OPERATIONS.md section 2). Either
// key may be a MasterKey or any other RootKey (a PKCS#11 token's), so
// Rekey also moves a store between the two. Services may run on st
// meanwhile (the nodes of a cluster, beside which kmsd rekey runs): those
// given new as their MasterKey or NextMasterKey follow the rekey without
// a failed call (rootstate.go), the others stop writing. A store too
// large for one transaction is refused with an error of kind TooLarge,
// unchanged.
//
// Earlier versions of the values that a store's files may keep (an LSM
// tree's older tables) are erased when the store is an Eraser.
func Rekey(ctx context.Context, st Store, old, new RootKey) (*RekeyResult, error) {
	if noRootKey(old) || noRootKey(new) {
		return nil, Errorf(KindInvalid, "rekey: the old and the new master key are required")
	}
	if _, err := keysToRekey(ctx, st, old, new); err != nil {
		return nil, err
	}
	// A Service of its own does it, so that the other processes on a
	// shared store hear of it as of any change.
	svc, err := New(st, Options{MasterKey: old, NextMasterKey: new})
	if err != nil {
		return nil, err
	}
	res, err := svc.Rekey(ctx)
	if cerr := svc.Close(); err == nil {
		err = cerr
	}
	return res, err
}

// recordRekey records a rekey (action masterkey.rotate, by "operator").
func (s *Service) recordRekey(res *RekeyResult) error {
	op := &Principal{Kind: PrincipalAPIKey, ID: "operator", flags: Flags{FlagRoot: true}}
	return s.record(op, "masterkey.rotate", "", map[string]any{"signingKeys": res.SigningKeys, "asymRings": res.AsymRings, "splitRings": res.SplitRings, "users": res.Users}, nil)
}

// rekey is Rekey but for its record.
func rekey(ctx context.Context, st Store, old, new RootKey) (*RekeyResult, error) {
	if noRootKey(old) || noRootKey(new) {
		return nil, Errorf(KindInvalid, "rekey: the old and the new master key are required")
	}
	keys, err := keysToRekey(ctx, st, old, new)
	if err != nil {
		return nil, err
	}
	if _, sealed, err := readRoot(ctx, st); err == nil && sealed != nil {
		if secret, err := new.Open(sealed, keyRoot); err == nil {
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
		return nil, Errorf(KindInvalid, "rekey: the new master key is one this store was rekeyed away from before, and a rekey never goes back to a key the store has left "+
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
	from, to := seal.New(keys.Seal), seal.New(seal.Derive(secret, "seal"))
	reseal := func(v, aad []byte, what string) ([]byte, error) {
		plain, err := from.Open(v, aad)
		if err != nil {
			return nil, Errorf(KindUnauthenticated, "rekey: the old master key is not this store's: %s does not open under it", what)
		}
		defer clear(plain)
		return to.Seal(plain, aad), nil
	}
	// resealField reseals the base64 []byte member field of a JSON record.
	resealField := func(v []byte, field string, aad []byte, what string) ([]byte, bool, error) {
		var rec map[string]json.RawMessage
		if err := json.Unmarshal(v, &rec); err != nil {
			return nil, false, internalError("rekey: read "+what, err)
		}
		raw, ok := rec[field]
		if !ok {
			return nil, false, nil
		}
		var sealed []byte
		if err := json.Unmarshal(raw, &sealed); err != nil || len(sealed) == 0 {
			return nil, false, nil
		}
		out, err := reseal(sealed, aad, what)
		if err != nil {
			return nil, false, err
		}
		if rec[field], err = json.Marshal(out); err != nil {
			return nil, false, err
		}
		v, err = json.Marshal(rec)
		return v, true, err
	}
	res := &RekeyResult{}
	var written [][]byte
	err = st.Update(ctx, func(tx Txn) error {
		*res, written = RekeyResult{}, written[:0]
		type change struct{ k, v []byte }
		var changes []change
		err := tx.Scan(ScanOptions{Prefix: pfxSigning}, func(k, v []byte) (bool, error) {
			nv, err := reseal(v, k, fmt.Sprintf("signing key %s", k[len(pfxSigning):]))
			if err != nil {
				return false, err
			}
			changes = append(changes, change{append([]byte(nil), k...), nv})
			res.SigningKeys++
			return true, nil
		})
		if err != nil {
			return err
		}
		err = tx.Scan(ScanOptions{Prefix: pfxRing}, func(k, v []byte) (bool, error) {
			id := string(k[len(pfxRing):])
			changed := false
			for _, f := range []struct {
				field, what string
				aad         []byte
				count       *int
			}{
				{"sealedPrivate", "the private key of ring " + id, ringPrivateAAD(id), &res.AsymRings},
				{"sealedShareSecret", "the share secret of ring " + id, ringShareAAD(id), &res.SplitRings},
			} {
				nv, ok, err := resealField(v, f.field, f.aad, f.what)
				if err != nil {
					return false, err
				}
				if ok {
					v, changed = nv, true
					*f.count++
				}
			}
			if changed {
				changes = append(changes, change{append([]byte(nil), k...), v})
			}
			return true, nil
		})
		if err != nil {
			return err
		}
		err = tx.Scan(ScanOptions{Prefix: pfxUser}, func(k, v []byte) (bool, error) {
			id := string(k[len(pfxUser):])
			nv, ok, err := resealField(v, "password", passwordAAD(id), "the password of user "+id)
			if err != nil || !ok {
				return err == nil, err
			}
			changes = append(changes, change{append([]byte(nil), k...), nv})
			res.Users++
			return true, nil
		})
		if err != nil {
			return err
		}
		macs, err := json.Marshal(keys)
		if err != nil {
			return err
		}
		defer clear(macs)
		changes = append(changes, change{keyMACKeys, to.Seal(macs, keyMACKeys)}, change{keyRoot, root})
		for _, c := range changes {
			if err := tx.Set(c.k, c.v); err != nil {
				return err
			}
			written = append(written, c.k)
		}
		return addRetired(tx, check)
	})
	if err != nil {
		if ErrorKind(err) == KindTooLarge {
			return nil, Errorf(KindTooLarge, "rekey: the store's sealed secrets do not fit in one transaction of this store; nothing was changed")
		}
		return nil, err
	}
	if e, ok := st.(Eraser); ok {
		if err := e.Erase(ctx, written); err != nil {
			return res, &Error{Kind: KindUnavailable, Err: err,
				Message: "rekey: the store IS rekeyed (use the new master key from now on), but erasing the earlier versions of its secrets from the store's files failed; they stay in those files until the store compacts them"}
		}
	}
	return res, nil
}
