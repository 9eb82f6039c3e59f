package kms

import (
	"strconv"

	"github.com/ringkms/kms/internal/jsonenc"
)

// The answers of Encrypt and Decrypt are encoded on the path of every
// call; AppendJSON writes them without reflection. Each writes byte for
// byte what json.Marshal writes for the same value (a test holds them to
// it), so a caller may use either.

// AppendJSON appends the JSON encoding of r to b, as json.Marshal writes
// it, and returns the extended buffer. The error is json.Marshal's for an
// Asset or a prop that does not encode.
func (r *EncryptResult) AppendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"key":`...)
	b, err := r.Key.appendJSON(b)
	if err != nil {
		return nil, err
	}
	b = appendNonEmpty(b, `,"keyShare":`, r.KeyShare)
	b = appendString(b, `,"ringId":`, r.RingID)
	b = appendString(b, `,"hash":`, r.Hash)
	b = appendString(b, `,"header":`, r.Header)
	if r.Asset != nil {
		b = append(b, `,"asset":`...)
		if b, err = jsonenc.AppendValue(b, r.Asset); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

// AppendJSON appends the JSON encoding of r to b, as json.Marshal writes
// it, and returns the extended buffer. The error is json.Marshal's for
// Asset data or a prop that does not encode.
func (r *DecryptResult) AppendJSON(b []byte) ([]byte, error) {
	b = appendString(b, `{"ringId":`, r.RingID)
	b = appendString(b, `,"ringname":`, r.RingName)
	b = append(b, `,"key":`...)
	b, err := r.Key.appendJSON(b)
	if err != nil {
		return nil, err
	}
	b = appendNonEmpty(b, `,"keyShare":`, r.KeyShare)
	b = append(b, `,"asset":{"valid":`...)
	b = strconv.AppendBool(b, r.Asset.Valid)
	b = appendString(b, `,"id":`, r.Asset.ID)
	b = appendString(b, `,"message":`, r.Asset.Message)
	b = append(b, `,"data":`...)
	if b, err = jsonenc.AppendObject(b, r.Asset.Data); err != nil {
		return nil, err
	}
	b = append(b, `,"parents":`...)
	b = appendStrings(b, r.Asset.Parents)
	return append(b, "}}"...), nil
}

// appendStrings appends ss as json.Marshal writes a []string: null for
// nil.
func appendStrings(b []byte, ss []string) []byte {
	if ss == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsonenc.AppendString(b, s)
	}
	return append(b, ']')
}

// appendJSON appends k as json.Marshal writes a *Key: null for nil.
func (k *Key) appendJSON(b []byte) ([]byte, error) {
	if k == nil {
		return append(b, "null"...), nil
	}
	b = appendString(b, `{"type":`, k.Type)
	b = appendString(b, `,"id":`, k.ID)
	b = append(b, `,"props":`...)
	b, err := jsonenc.AppendObject(b, k.Props)
	if err != nil {
		return nil, err
	}
	if d := k.KeyData; d != nil {
		b = append(b, `,"keyData":{"version":`...)
		b = strconv.AppendInt(b, int64(d.Version), 10)
		b = appendString(b, `,"encrypted":{"key":{"value":`, d.Encrypted.Key.Value)
		b = appendString(b, `,"encoding":`, d.Encrypted.Key.Encoding)
		b = appendString(b, `}},"iv":`, d.IV)
		b = append(b, '}')
	}
	b = appendString(b, `,"state":`, k.State)
	if k.DestroyAt != nil {
		b = append(b, `,"destroyAt":`...)
		if b, err = jsonenc.AppendValue(b, *k.DestroyAt); err != nil {
			return nil, err
		}
	}
	if k.EncryptCount != nil {
		b = append(b, `,"encryptCount":`...)
		b = strconv.AppendUint(b, *k.EncryptCount, 10)
	}
	if k.Version != 0 {
		b = append(b, `,"version":`...)
		b = strconv.AppendInt(b, int64(k.Version), 10)
	}
	return append(b, '}'), nil
}
