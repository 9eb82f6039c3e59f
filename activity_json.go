package kms

import (
	"encoding/binary"
	"encoding/hex"
	"strconv"

	"github.com/ringkms/kms/internal/journal"
	"github.com/ringkms/kms/internal/jsonenc"
)

// appendJSON appends the JSON of a, byte for byte what json.Marshal
// writes, without reflection: the journal encodes every record on its one
// goroutine, so the encoding is on the path of every call.
func (a *Activity) appendJSON(b []byte) ([]byte, error) {
	b = appendString(b, `{"id":`, a.ID)
	b = appendString(b, `,"keyid":`, a.KeyID)
	b = appendNonEmpty(b, `,"accountId":`, a.AccountID)
	b = append(b, `,"createdAt":`...)
	b = strconv.AppendInt(b, a.CreatedAt, 10)
	b = appendString(b, `,"action":`, a.Action)
	b = appendNonEmpty(b, `,"ring":`, a.Ring)
	b = append(b, `,"valid":`...)
	b = strconv.AppendBool(b, a.Valid)
	b = append(b, `,"props":`...)
	b, err := jsonenc.AppendObject(b, a.Props)
	if err != nil {
		return nil, err
	}
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, a.Seq, 10)
	b = appendString(b, `,"prev":`, a.Prev)
	b = appendNonEmpty(b, `,"digest":`, a.Digest)
	return append(b, '}'), nil
}

// activityCodec is how the journal stamps, encodes and reads the records
// of the activity trail (journal.Codec).
type activityCodec struct{}

// Encode stamps a with its place in the chain and the outcome of its
// operation, opErr (nil for success), and appends its JSON to dst.
func (activityCodec) Encode(dst []byte, a *Activity, at journal.Link, opErr error) ([]byte, error) {
	a.CreatedAt = at.Time
	a.Seq = at.Seq
	a.ID = activityID(at.Time, at.Seq)
	a.Prev = at.Prev
	if a.Props == nil {
		a.Props = map[string]any{}
	}
	// props action and ring repeat the fields, always: a search by those
	// props is served by the action and ring indexes.
	a.Props["action"] = a.Action
	if a.Ring != "" {
		a.Props["ring"] = a.Ring
	} else {
		delete(a.Props, "ring")
	}
	a.Props["result"] = resultOf(opErr)
	if refused(opErr) {
		a.Valid = false
	}
	a.Digest = ""
	return a.appendJSON(dst)
}

// Sealed gives a its digest, once the chain has it.
func (activityCodec) Sealed(a *Activity, digest string) { a.Digest = digest }

// Decode reads a stored record: digest (32 bytes) | JSON.
func (activityCodec) Decode(stored []byte) (*Activity, journal.Link, error) {
	a, err := decodeActivity(stored)
	if err != nil {
		return nil, journal.Link{}, err
	}
	return a, journal.Link{Seq: a.Seq, Time: a.CreatedAt, Prev: a.Prev, Digest: a.Digest}, nil
}

// activityID is the ID of the record seq, created at ms: 16 bytes, the
// first 6 the time in milliseconds (as every ID of newID), then 2 zero
// bytes and the seq, so that a record is found from its ID alone.
func activityID(ms int64, seq uint64) string {
	var b [16]byte
	var ts [8]byte
	binary.BigEndian.PutUint64(ts[:], uint64(max(ms, 0)))
	copy(b[:6], ts[2:])
	binary.BigEndian.PutUint64(b[8:], seq)
	return hex.EncodeToString(b[:])
}

// resultOf is the activity "result" of an operation's outcome: "ok", or the
// code of the error's kind. It returns the prop's value boxed, since a
// constant is boxed without allocating: "ok" costs nothing.
func resultOf(err error) any {
	if err == nil {
		return "ok"
	}
	return ErrorKind(err).String()
}

// appendString appends a member whose value is the string s; head is
// what comes before the value: the comma or the brace, and the quoted
// name (`,"id":`).
func appendString(b []byte, head, s string) []byte {
	return jsonenc.AppendString(append(b, head...), s)
}

// appendNonEmpty is appendString for a member omitted when s is empty
// (omitempty).
func appendNonEmpty(b []byte, head, s string) []byte {
	if s == "" {
		return b
	}
	return appendString(b, head, s)
}
