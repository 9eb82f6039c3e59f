package barrier

import (
	"context"
	"encoding/json"

	"github.com/ringkms/kms/internal/base"
	"github.com/ringkms/kms/internal/seal"
)

// The keys a Service works with come from the store's root secret, which
// the master key seals (root.go; docs/FORMAT.md section 8): for a store
// of a plain master key that was never rekeyed, the master key's own
// bytes. The seal key, which seals every secret the store holds, always
// does. The others are MAC and cursor keys: the hashes, headers, cursors
// and activity chain made with them must stay valid for as long as the
// service runs, so a new master key (a rekey) does not replace them: the
// store keeps them, sealed under the new seal key, under KeyMACKeys. A
// store that was never rekeyed has no such record and derives them from
// the master key.
//
// The backup key, which authenticates backups, is like the seal key:
// always derived from the master key the store is under, never kept. A
// backup holds the store's secrets sealed under that master key, so it
// can only ever restore into a service run with that key; binding its
// authentication to the same key costs nothing, lets a restore check a
// backup before it reads the store it holds, and makes a rekey retire the
// old key's power to forge backups as it retires its power to open
// secrets (a key kept under sys/keys would outlive the rekey).
var KeyMACKeys = []byte("sys/keys")

// Keys are the raw keys of a store, one a purpose.
type Keys struct {
	Seal       [32]byte `json:"-"`
	Backup     [32]byte `json:"-"`
	RootValue  []byte   `json:"-"` // the value under KeyRoot it comes from; nil for a master key's own bytes
	SealedRoot []byte   `json:"-"` // the root secret sealed, as RootValue holds it

	HashMAC    [32]byte `json:"hashMac"`
	HeaderMAC  [32]byte `json:"headerMac"`
	Cursor     [32]byte `json:"cursor"`
	AuditChain [32]byte `json:"auditChain"`
	Throttle   [32]byte `json:"throttle"`
}

// Load returns the keys of the store under the root key rk. It proves
// nothing of a master key's own bytes on a store without a root secret
// (KeysUnder does).
func (b *Barrier) Load(ctx context.Context, rk RootKey) (*Keys, error) {
	m, value, err := b.RootSecret(ctx, rk)
	if err != nil {
		return nil, err
	}
	defer clear(m)
	k, err := deriveKeys(m, value)
	if err != nil {
		return nil, err
	}
	sealed, err := readValue(ctx, b.cfg.Store, KeyMACKeys)
	if err != nil {
		return nil, base.InternalError("read the service keys", err)
	}
	if sealed == nil {
		k.HashMAC, k.HeaderMAC = seal.Derive(m, "hash-mac"), seal.Derive(m, "header-mac")
		k.Cursor, k.AuditChain, k.Throttle = seal.Derive(m, "cursor"), seal.Derive(m, "audit-chain"), seal.Derive(m, "throttle")
		return k, nil
	}
	raw, err := seal.New(k.Seal).Open(sealed, KeyMACKeys)
	if err != nil {
		return nil, base.Errorf(base.KindUnauthenticated, "the master key is not the one this store was last rekeyed to: its keys do not open under it")
	}
	defer clear(raw)
	var zero [32]byte
	if err := json.Unmarshal(raw, k); err != nil || k.HashMAC == zero || k.HeaderMAC == zero || k.Cursor == zero || k.AuditChain == zero || k.Throttle == zero {
		return nil, base.Errorf(base.KindInternal, "the store's service keys are malformed")
	}
	return k, nil
}

// KeysUnder returns the keys of the store under rk, or an error of kind
// Unauthenticated when the store is not under rk. A master key's own
// bytes, on a store without a root secret, are held to the domain's proof
// (Config.Proof).
func (b *Barrier) KeysUnder(ctx context.Context, rk RootKey) (*Keys, error) {
	keys, err := b.Load(ctx, rk)
	if err == nil && keys.RootValue == nil && b.cfg.Proof != nil {
		err = b.cfg.Proof(ctx, b.cfg.Store, seal.New(keys.Seal))
	}
	if err != nil {
		return nil, err
	}
	return keys, nil
}

// deriveKeys returns the seal and backup keys of the root secret root,
// which comes from the value under KeyRoot (nil for a master key's own
// bytes).
func deriveKeys(root, value []byte) (*Keys, error) {
	k := &Keys{Seal: seal.Derive(root, "seal"), Backup: BackupKey(root), RootValue: value}
	if value != nil {
		var rec rootRecord
		if err := unmarshalRoot(value, &rec); err != nil {
			return nil, err
		}
		k.SealedRoot = rec.Sealed
	}
	return k, nil
}

// BackupKey is the key that authenticates the backups of a store whose
// root secret is root.
func BackupKey(root []byte) [32]byte { return seal.Derive(root, "backup-mac") }

// ErrPlainStore answers BackupKeyFor for a backup of a store under a
// master key's own bytes, given a key that is no MasterKey.
var ErrPlainStore = base.Errorf(base.KindUnauthenticated, "the store is under a plain master key, not under the key given")

// BackupKeyFor returns the backup key of a store whose root secret, as
// its backup holds it, is sealedRoot (nil: a master key's own bytes),
// under rk: ErrPlainStore, or an error of kind Unauthenticated when the
// root secret does not open under rk.
func BackupKeyFor(rk RootKey, sealedRoot []byte) ([32]byte, error) {
	if sealedRoot == nil {
		k, ok := plainKey(rk)
		if !ok {
			return [32]byte{}, ErrPlainStore
		}
		return BackupKey(k), nil
	}
	secret, err := openRoot(rk, sealedRoot)
	if err != nil {
		return [32]byte{}, err
	}
	defer clear(secret)
	return BackupKey(secret), nil
}
