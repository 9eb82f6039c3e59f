package kms

import (
	"context"
	"strings"
	"time"
)

// The calls that answer what a key was used for (usagecounts.go keeps
// the counts and the hashes' index).

// KeyUsage returns how often a key of a /ks ring was used: the encrypt
// calls that handed it out and the decrypt calls that returned it, with
// the times of the first and last. The counts are kept as the calls are
// recorded, not counted on demand. It needs keyring.<name>.read.
func (s *Service) KeyUsage(ctx context.Context, ref RingRef, keyID string) (*KeyUsage, error) {
	return s.keyUsage(ctx, groupKS, ref, keyID, "key.usage")
}

// AsymKeyUsage is KeyUsage for a key of an /asym ring: the calls of a
// held key that made something with it (encrypt, rewrap, datakey, sign,
// hmac), counted as encrypts, and that opened or checked something with
// it (decrypt, rewrap, verify), counted as decrypts. It needs
// keyring.<name>.read.
func (s *Service) AsymKeyUsage(ctx context.Context, ref RingRef, keyID string) (*KeyUsage, error) {
	return s.keyUsage(ctx, groupAsym, ref, keyID, "asym.key.usage")
}

func (s *Service) keyUsage(ctx context.Context, group string, ref RingRef, keyID, action string) (*KeyUsage, error) {
	p, r, k, err := s.resolveKey(ctx, group, ref, keyID, action)
	if err != nil {
		return nil, err
	}
	return audited(s, ctx, p, action, strings.ToLower(r.Name), func(tx Txn) (*KeyUsage, map[string]any, error) {
		u, err := loadUsage(tx, k.ID)
		if err != nil {
			return nil, nil, err
		}
		return u.public(k.ID), map[string]any{"ringId": r.ID, "keyId": k.ID}, nil
	})
}

// ListKeyHashes pages through the hashes issued under a key of a /ks ring,
// oldest first: every successful encrypt call that handed the key out,
// with its time, the API key (or User) it was handed to, and its Asset.
// A page costs the same however many hashes the key has: it reads an
// index of the key's encrypt records (term act/h/) from the cursor on.
// As an activity search, a sequence of pages sees the hashes issued up to
// its first page.
//
// It needs keyring.<name>.read and activity.read. Without accounts.all,
// it lists only the hashes handed to the caller's own Account.
func (s *Service) ListKeyHashes(ctx context.Context, ref RingRef, keyID string, req PageRequest) (*List[*KeyHash], error) {
	p, r, k, err := s.resolveKey(ctx, groupKS, ref, keyID, "key.hashes")
	if err != nil {
		return nil, err
	}
	lower := strings.ToLower(r.Name)
	if !p.Can(FlagActivityRead) {
		return nil, s.refuse(p, "key.hashes", lower, map[string]any{"flag": FlagActivityRead},
			Errorf(KindPermissionDenied, "missing permission flag %s", FlagActivityRead))
	}
	term := join(pfxActByKeyHash, []byte(k.ID), sep)
	return audited(s, ctx, p, "key.hashes", lower, func(tx Txn) (*List[*KeyHash], map[string]any, error) {
		out := &List[*KeyHash]{Data: []*KeyHash{}}
		head, err := loadHead(tx)
		if err != nil {
			return nil, nil, err
		}
		var cur *Activity
		ps := s.recordScan(tx, term, 1, head.Seq+1)
		ps.Scope = "hashes/" + k.ID
		ps.Match = func(_, v []byte) (bool, error) {
			if cur, err = decodeActivity(v); err != nil {
				return false, err
			}
			return visibleTo(p, cur.AccountID), nil
		}
		ps.Emit = func(_, _ []byte) error {
			h, _ := cur.Props["hash"].(string)
			asset, _ := cur.Props["assetId"].(string)
			out.Data = append(out.Data, &KeyHash{Hash: h, CreatedAt: time.UnixMilli(cur.CreatedAt).UTC(),
				APIKeyID: cur.KeyID, AccountID: cur.AccountID, AssetID: asset, Seq: cur.Seq})
			return nil
		}
		out.Pagination, err = s.pager.scan(ctx, tx, req, ps)
		return out, map[string]any{"ringId": r.ID, "keyId": k.ID, "count": out.Pagination.Count}, err
	})
}
