package pgstore

import "github.com/jackc/pgx/v5/pgtype"

// byteaArray is a BYTEA[] argument. pgx encodes a [][]byte by reflection,
// boxing each element into a new interface value; a byteaArray hands pgx
// each element as a pointer, which boxes without allocating, and pgx
// encodes it through BytesValue. A nil element is NULL, as in a
// [][]byte, and a nil byteaArray a NULL array.
type byteaArray [][]byte

// Dimensions, Index and IndexType make a byteaArray a pgtype.ArrayGetter.
func (a byteaArray) Dimensions() []pgtype.ArrayDimension {
	if a == nil {
		return nil
	}
	return []pgtype.ArrayDimension{{Length: int32(len(a)), LowerBound: 1}}
}

func (a byteaArray) Index(i int) any { return (*byteaElem)(&a[i]) }

func (a byteaArray) IndexType() any { return (*byteaElem)(nil) }

// byteaElem is an element of a byteaArray.
type byteaElem []byte

// BytesValue makes a *byteaElem a pgtype.BytesValuer.
func (e *byteaElem) BytesValue() ([]byte, error) { return *e, nil }
