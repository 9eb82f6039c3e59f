package httpapi

import "github.com/ringkms/kms"

// The bodies of encrypt and decrypt, the calls made most, are flat objects
// of short strings: {"ringname":"payments"}, {"hash":"...","header":"..."}.
// decodeFlat decodes such a body without reflection, and gives up (false)
// on anything else, which json.Unmarshal then decodes: a member whose name
// is not exactly one of the fields, a value that is not a string, a string
// with an escape or a byte outside printable ASCII, malformed JSON. When it
// succeeds, the fields hold what json.Unmarshal would have put there (a
// fuzz test holds it to that).

// flatField is a member that decodeFlat may fill.
type flatField struct {
	name string
	dst  *string
}

// decodeFlat decodes data into fields, as json.Unmarshal would, or reports
// false having changed nothing.
func decodeFlat(data []byte, fields ...flatField) bool {
	var vals [4]string // room for len(fields), set only on success
	if len(fields) > len(vals) {
		return false
	}
	var set [4]bool
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return false
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		i++
	} else {
		for {
			name, next, ok := flatString(data, i)
			if !ok {
				return false
			}
			f := -1
			for k := range fields {
				if fields[k].name == name {
					f = k
					break
				}
			}
			if f < 0 {
				return false
			}
			i = skipSpace(data, next)
			if i >= len(data) || data[i] != ':' {
				return false
			}
			value, next, ok := flatString(data, skipSpace(data, i+1))
			if !ok {
				return false
			}
			vals[f], set[f] = value, true // a repeated member: the last wins, as in json.Unmarshal
			i = skipSpace(data, next)
			if i >= len(data) {
				return false
			}
			if data[i] == '}' {
				i++
				break
			}
			if data[i] != ',' {
				return false
			}
			i = skipSpace(data, i+1)
		}
	}
	if skipSpace(data, i) != len(data) {
		return false
	}
	for k, f := range fields {
		if set[k] {
			*f.dst = vals[k]
		}
	}
	return true
}

// flatString reads the string that starts at data[i], one of printable
// ASCII without escapes, and returns it and the index after its closing
// quote.
func flatString(data []byte, i int) (string, int, bool) {
	if i >= len(data) || data[i] != '"' {
		return "", 0, false
	}
	for j := i + 1; j < len(data); j++ {
		switch c := data[j]; {
		case c == '"':
			return string(data[i+1 : j]), j + 1, true
		case c < 0x20 || c > 0x7e || c == '\\':
			return "", 0, false
		}
	}
	return "", 0, false
}

// skipSpace returns the index of the first byte at or after i that is not
// JSON whitespace.
func skipSpace(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// decodeFast decodes the inputs that decodeFlat serves, and reports false
// for any other v, or a body it gives up on.
func decodeFast(data []byte, v any) bool {
	switch v := v.(type) {
	case *kms.EncryptInput:
		return decodeFlat(data, flatField{"ringname", &v.RingName})
	case *kms.DecryptInput:
		return decodeFlat(data, flatField{"hash", &v.Hash}, flatField{"header", &v.Header})
	}
	return false
}
