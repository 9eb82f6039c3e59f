package journal

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"

	"github.com/ringkms/kms/internal/base"
	"github.com/ringkms/kms/internal/hmackey"
)

// Head is a record's place at the end of the chain, as the store keeps the
// last indexed one (JSON, under Config.HeadKey).
type Head struct {
	Seq    uint64 `json:"seq"`
	Digest string `json:"digest"`
	Time   int64  `json:"time"`
}

// Link is a record's place in the chain: its seq (from 1), its time (epoch
// milliseconds; it never decreases along the chain), the digest of the
// record before it (hex; empty for the first) and its own.
type Link struct {
	Seq    uint64
	Time   int64
	Prev   string
	Digest string
}

// Digest is the digest of a record: HMAC-SHA256, under a key derived from
// the master key, of the previous record's digest (hex) followed by the
// record's encoding, which itself names prev. Keyed, so that whoever can
// write the store but holds no master key cannot forge a consistent chain.
func Digest(key *hmackey.Key, prev string, body []byte) [32]byte {
	var out [32]byte
	key.Sum(out[:0], []byte(prev), body)
	return out
}

// LoadHead returns the last indexed record, as stored under key; the zero
// Head when none is.
func LoadHead(tx base.Txn, key []byte) (Head, error) {
	var head Head
	v, err := tx.Get(key)
	if errors.Is(err, base.ErrNotFound) {
		return head, nil
	}
	if err != nil {
		return head, err
	}
	return head, json.Unmarshal(v, &head)
}

// storeHead records in tx that the records up to head are indexed.
func (j *Journal[R]) storeHead(tx base.Txn, head Head) error {
	v, err := json.Marshal(head)
	if err != nil {
		return err
	}
	return tx.Set(j.cfg.HeadKey, v)
}

// appendRecord stamps jb's record with its place in the chain after head
// and the outcome of its operation, opErr (nil for success), encodes it
// into j.recs and moves head on. A job with no record adds none.
func (j *Journal[R]) appendRecord(head *Head, jb *Job[R], opErr error) error {
	var none R
	if jb.Rec == none {
		return nil
	}
	// The chain's clock never runs backwards.
	at := Link{Seq: head.Seq + 1, Time: max(j.cfg.Now().UnixMilli(), head.Time), Prev: head.Digest}
	rec, err := j.cfg.Codec.Encode(make([]byte, 32, 768), jb.Rec, at, opErr) // stored: digest (32 bytes) | encoding
	if err != nil {
		return err
	}
	sum := Digest(j.cfg.ChainKey, at.Prev, rec[32:])
	copy(rec, sum[:])
	j.recs = append(j.recs, rec)
	at.Digest = digestHex(sum)
	j.cfg.Codec.Sealed(jb.Rec, at.Digest)
	jb.at = at
	*head = Head{Seq: at.Seq, Digest: at.Digest, Time: at.Time}
	return nil
}

// digestHex is hex.EncodeToString of a digest, with one allocation.
func digestHex(sum [32]byte) string {
	var buf [64]byte
	hex.Encode(buf[:], sum[:])
	return string(buf[:])
}

// encodePending encodes the records first, first+1...: first (uint64),
// then each record as its length (uvarint) and bytes.
func encodePending(first uint64, recs [][]byte) []byte {
	n := 8
	for _, r := range recs {
		n += binary.MaxVarintLen64 + len(r)
	}
	b := binary.BigEndian.AppendUint64(make([]byte, 0, n), first)
	for _, r := range recs {
		b = append(binary.AppendUvarint(b, uint64(len(r))), r...)
	}
	return b
}

func decodePending(b []byte) (first uint64, recs [][]byte, err error) {
	if len(b) < 8 {
		return 0, nil, base.Errorf(base.KindInternal, "pending activity is truncated")
	}
	first, b = binary.BigEndian.Uint64(b), b[8:]
	for len(b) > 0 {
		l, n := binary.Uvarint(b)
		if n <= 0 || uint64(len(b)-n) < l {
			return 0, nil, base.Errorf(base.KindInternal, "pending activity is truncated")
		}
		recs, b = append(recs, b[n:n+int(l)]), b[n+int(l):]
	}
	if first == 0 || len(recs) == 0 {
		return 0, nil, base.Errorf(base.KindInternal, "pending activity is empty")
	}
	return first, recs, nil
}

// cloneAll returns a deep copy of recs.
func cloneAll(recs [][]byte) [][]byte {
	out := make([][]byte, len(recs))
	for i, r := range recs {
		out[i] = bytes.Clone(r)
	}
	return out
}
