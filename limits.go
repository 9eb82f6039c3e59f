package kms

import "encoding/binary"

// Resource kinds that plan limits count.
const (
	countKeyRings = "keyrings"
	countUsers    = "users"
	countAccounts = "accounts"
	countAPIKeys  = "apikeys/" // + account ID
)

// adjustCount adds delta to the count of a resource kind inside a journal
// job. When delta is positive and max is above zero, it refuses (Limit) to
// take the count past max; what names the resource in the message.
func adjustCount(tx Txn, kind string, delta, max int, what string) error {
	key := join(pfxCount, []byte(kind))
	var n uint64
	v, err := tx.Get(key)
	switch {
	case err == nil && len(v) == 8:
		n = binary.BigEndian.Uint64(v)
	case err == nil:
		return Errorf(KindInternal, "count of %s is corrupt", kind)
	case !isNotFound(err):
		return err
	}
	switch {
	case delta > 0 && max > 0 && n+uint64(delta) > uint64(max):
		return Errorf(KindLimit, "plan limit reached: at most %d %s", max, what)
	case delta < 0 && uint64(-delta) > n:
		n = 0
	default:
		n = uint64(int64(n) + int64(delta))
	}
	return tx.Set(key, binary.BigEndian.AppendUint64(nil, n))
}

// DefaultMaxHeldKeyEncryptions is the bound on the encryptions of one
// version of a held key (Options.MaxHeldKeyEncryptions): 2^32, the
// bound of NIST SP 800-38D (section 8.3) for AES-GCM with random 96-bit
// nonces, which keeps the chance of a repeated nonce under 2^-32.
const DefaultMaxHeldKeyEncryptions = 1 << 32
