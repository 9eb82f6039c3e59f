package kms

import (
	"encoding/json"
	"slices"
	"strconv"
)

// appendJSON appends the JSON of a, byte for byte what json.Marshal
// writes, without reflection: the journal encodes every record on its one
// goroutine, so the encoding is on the path of every call.
func (a *Activity) appendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"id":`...)
	b = appendJSONString(b, a.ID)
	b = append(b, `,"keyid":`...)
	b = appendJSONString(b, a.KeyID)
	if a.AccountID != "" {
		b = append(b, `,"accountId":`...)
		b = appendJSONString(b, a.AccountID)
	}
	b = append(b, `,"createdAt":`...)
	b = strconv.AppendInt(b, a.CreatedAt, 10)
	b = append(b, `,"action":`...)
	b = appendJSONString(b, a.Action)
	if a.Ring != "" {
		b = append(b, `,"ring":`...)
		b = appendJSONString(b, a.Ring)
	}
	b = append(b, `,"valid":`...)
	b = strconv.AppendBool(b, a.Valid)
	b = append(b, `,"props":`...)
	b, err := appendJSONObject(b, a.Props)
	if err != nil {
		return nil, err
	}
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, a.Seq, 10)
	b = append(b, `,"prev":`...)
	b = appendJSONString(b, a.Prev)
	if a.Digest != "" {
		b = append(b, `,"digest":`...)
		b = appendJSONString(b, a.Digest)
	}
	return append(b, '}'), nil
}

// appendJSONString appends s as json.Marshal writes it.
func appendJSONString(b []byte, s string) []byte {
	if plainJSONString(s) {
		b = append(b, '"')
		b = append(b, s...)
		return append(b, '"')
	}
	q, _ := json.Marshal(s) // a string always encodes
	return append(b, q...)
}

// appendJSONValue appends v as json.Marshal writes it: the common scalar
// types directly, anything else through json.Marshal.
func appendJSONValue(b []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case string:
		return appendJSONString(b, v), nil
	case bool:
		return strconv.AppendBool(b, v), nil
	case int:
		return strconv.AppendInt(b, int64(v), 10), nil
	case int64:
		return strconv.AppendInt(b, v, 10), nil
	case uint64:
		return strconv.AppendUint(b, v, 10), nil
	}
	m, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, m...), nil
}

// appendJSONObject appends m as json.Marshal writes a map[string]any:
// null for nil, else its members sorted by name.
func appendJSONObject(b []byte, m map[string]any) ([]byte, error) {
	if m == nil {
		return append(b, "null"...), nil
	}
	var names [16]string
	keys := names[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, k)
		b = append(b, ':')
		var err error
		if b, err = appendJSONValue(b, m[k]); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}
