package kms

import (
	"context"
	"encoding/hex"
	"encoding/json"
)

// Activity is one record of the audit trail: an operation that a credential
// asked for, granted or denied. Records are append-only and hash-chained:
// each carries the digest of the one before it (Prev) and its own (Digest),
// so a removed or altered record is detectable.
type Activity struct {
	ID        string `json:"id"`
	KeyID     string `json:"keyid"`               // the API key (or User) that acted
	AccountID string `json:"accountId,omitempty"` // the Account it acted for
	CreatedAt int64  `json:"createdAt"`           // epoch milliseconds, UTC; never decreases along the chain
	Action    string `json:"action"`              // e.g. encrypt, decrypt, keyring.rotate
	Ring      string `json:"ring,omitempty"`      // lower-case name of the key ring, when the action is on one
	Valid     bool   `json:"valid"`               // granted (true) or denied (false)
	// Props holds action and ring again, the result ("ok", or the kind of
	// the error that ended the operation), and details of the action.
	Props  map[string]any `json:"props"`
	Seq    uint64         `json:"seq"`              // position in the chain, from 1
	Prev   string         `json:"prev"`             // digest of the previous record, hex; empty for the first
	Digest string         `json:"digest,omitempty"` // SHA-256 of Prev and the record without Digest, hex
}

// newActivity starts a record of action by p. The journal fills in the
// time, the place in the chain and the result.
func (s *Service) newActivity(p *Principal, action, ring string, valid bool, props map[string]any) *Activity {
	if props == nil {
		props = make(map[string]any, 4)
	}
	return &Activity{
		ID:        newID(s.now()),
		KeyID:     p.ID,
		AccountID: p.AccountID,
		Action:    action,
		Ring:      ring,
		Valid:     valid,
		Props:     props,
	}
}

// record writes a record of a granted operation that changes nothing and
// waits until it is durable: the answer must not go out before its trail.
func (s *Service) record(p *Principal, action, ring string, props map[string]any, opErr error) error {
	act := s.newActivity(p, action, ring, true, props)
	if opErr != nil {
		act.Props["error"] = ErrorKind(opErr).String()
	}
	return s.journal.submit(act, nil, nil)
}

// decodeActivity parses a stored record: digest (32 bytes) | JSON.
func decodeActivity(v []byte) (*Activity, error) {
	if len(v) < 33 {
		return nil, Errorf(KindInternal, "activity record is truncated")
	}
	var a Activity
	if err := json.Unmarshal(v[32:], &a); err != nil {
		return nil, err
	}
	a.Digest = hex.EncodeToString(v[:32])
	return &a, nil
}

// GetActivity returns an activity record by ID. It needs the flag
// activity.read.
func (s *Service) GetActivity(ctx context.Context, id string) (*Activity, error) {
	if _, err := s.authorize(ctx, "activity.read", "", FlagActivityRead); err != nil {
		return nil, err
	}
	var a *Activity
	err := s.store.View(ctx, func(tx Txn) error {
		seq, err := tx.Get(join(pfxActID, []byte(id)))
		if isNotFound(err) {
			return Errorf(KindNotFound, "activity not found")
		} else if err != nil {
			return err
		}
		v, err := tx.Get(join(pfxActSeq, seq))
		if err != nil {
			return err
		}
		a, err = decodeActivity(v)
		return err
	})
	if err != nil {
		return nil, internalError("read activity", err)
	}
	return a, nil
}

// FlagActivityRead grants reading and searching the activity trail.
const FlagActivityRead = "activity.read"

// VerifyChainResult is the outcome of VerifyActivityChain.
type VerifyChainResult struct {
	Records uint64 `json:"records"` // records checked
	Head    string `json:"head"`    // digest of the last record
}

// VerifyActivityChain walks the whole activity trail in order and checks
// that every record's digest matches its contents and names the record
// before it, that sequence numbers have no gap, and that the chain ends at
// the recorded head. It returns an Unprocessable error naming the first
// record that fails. It reads the store directly and needs no principal,
// for use by operators (kmsd verify-audit).
func (s *Service) VerifyActivityChain(ctx context.Context) (VerifyChainResult, error) {
	var res VerifyChainResult
	err := s.store.View(ctx, func(tx Txn) error {
		var head chainHead
		if v, err := tx.Get(keyActHead); err == nil {
			if err := json.Unmarshal(v, &head); err != nil {
				return err
			}
		} else if !isNotFound(err) {
			return err
		}
		prev := ""
		err := tx.Scan(ScanOptions{Prefix: pfxActSeq}, func(k, v []byte) (bool, error) {
			if err := ctx.Err(); err != nil {
				return false, err
			}
			a, err := decodeActivity(v)
			if err != nil {
				return false, Errorf(KindUnprocessable, "activity record %d does not parse", res.Records+1)
			}
			if a.Seq != res.Records+1 {
				return false, Errorf(KindUnprocessable, "activity chain has a gap before record %d", a.Seq)
			}
			if a.Prev != prev {
				return false, Errorf(KindUnprocessable, "activity record %d (%s) does not follow the record before it", a.Seq, a.ID)
			}
			sum := chainDigest(a.Prev, v[32:])
			if hex.EncodeToString(sum[:]) != a.Digest {
				return false, Errorf(KindUnprocessable, "activity record %d (%s) was altered", a.Seq, a.ID)
			}
			prev = a.Digest
			res.Records++
			return true, nil
		})
		if err != nil {
			return err
		}
		if res.Records != head.Seq || prev != head.Digest {
			return Errorf(KindUnprocessable, "activity chain ends at record %d but the head names record %d", res.Records, head.Seq)
		}
		res.Head = prev
		return nil
	})
	return res, err
}
