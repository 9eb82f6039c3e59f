package kms

import (
	"strconv"

	"github.com/ringkms/kms/internal/jsonenc"
)

// appendJSON appends the JSON of a, byte for byte what json.Marshal
// writes, without reflection: the journal encodes every record on its one
// goroutine, so the encoding is on the path of every call.
func (a *Activity) appendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"id":`...)
	b = jsonenc.AppendString(b, a.ID)
	b = append(b, `,"keyid":`...)
	b = jsonenc.AppendString(b, a.KeyID)
	if a.AccountID != "" {
		b = append(b, `,"accountId":`...)
		b = jsonenc.AppendString(b, a.AccountID)
	}
	b = append(b, `,"createdAt":`...)
	b = strconv.AppendInt(b, a.CreatedAt, 10)
	b = append(b, `,"action":`...)
	b = jsonenc.AppendString(b, a.Action)
	if a.Ring != "" {
		b = append(b, `,"ring":`...)
		b = jsonenc.AppendString(b, a.Ring)
	}
	b = append(b, `,"valid":`...)
	b = strconv.AppendBool(b, a.Valid)
	b = append(b, `,"props":`...)
	b, err := jsonenc.AppendObject(b, a.Props)
	if err != nil {
		return nil, err
	}
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, a.Seq, 10)
	b = append(b, `,"prev":`...)
	b = jsonenc.AppendString(b, a.Prev)
	if a.Digest != "" {
		b = append(b, `,"digest":`...)
		b = jsonenc.AppendString(b, a.Digest)
	}
	return append(b, '}'), nil
}
