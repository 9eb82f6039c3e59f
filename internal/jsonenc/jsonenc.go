// Package jsonenc appends JSON without reflection, byte for byte what
// encoding/json's Marshal writes for the same values, for the encodings on
// the path of every call (the answers of encrypt and decrypt, the activity
// records the journal writes).
package jsonenc

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
)

// AppendString appends s as json.Marshal writes it.
func AppendString(b []byte, s string) []byte {
	if Plain(s) {
		b = append(b, '"')
		b = append(b, s...)
		return append(b, '"')
	}
	q, _ := json.Marshal(s) // a string always encodes
	return append(b, q...)
}

// AppendValue appends v as json.Marshal writes it: the common scalar
// types take a short path, the others go through json.Marshal, whose
// error it returns.
func AppendValue(b []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case string:
		return AppendString(b, v), nil
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

// AppendObject appends m as json.Marshal writes a map[string]any: null
// for nil, else its members sorted by name.
func AppendObject(b []byte, m map[string]any) ([]byte, error) {
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
		b = AppendString(b, k)
		b = append(b, ':')
		var err error
		if b, err = AppendValue(b, m[k]); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

// Plain reports whether json.Marshal writes s as it is, between quotes.
func Plain(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c > 0x7e, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

// Scalar reports whether b is a JSON string, number or boolean.
func Scalar(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	c := b[0]
	return c == '"' || c == 't' || c == 'f' || c == '-' || c >= '0' && c <= '9'
}

// Canonical re-encodes a JSON value with object members sorted and
// numbers as written, so equal values compare equal as bytes. A value
// that does not decode is returned as it is.
func Canonical(b []byte) []byte {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return b
	}
	out, err := json.Marshal(v)
	if err != nil {
		return b
	}
	return out
}
