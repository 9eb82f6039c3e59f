package pgstore

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgtype"
)

func encodeBytea(t testing.TB, m *pgtype.Map, v any) []byte {
	t.Helper()
	buf, err := m.Encode(pgtype.ByteaArrayOID, pgtype.BinaryFormatCode, v, nil)
	if err != nil {
		t.Fatalf("encode %T: %v", v, err)
	}
	return buf
}

// TestByteaArrayEncodesAsSlice: pgx sends a byteaArray exactly as it
// sends the [][]byte it holds (nil elements as NULL, a nil array as
// NULL), without an allocation per element.
func TestByteaArrayEncodesAsSlice(t *testing.T) {
	m := pgtype.NewMap()
	for _, elems := range [][][]byte{
		nil,
		{},
		{[]byte("k")},
		{[]byte("a"), nil, {}, bytes.Repeat([]byte{0xff}, 300)},
	} {
		want, got := encodeBytea(t, m, elems), encodeBytea(t, m, byteaArray(elems))
		if !bytes.Equal(got, want) {
			t.Errorf("%q: byteaArray encodes as %x, [][]byte as %x", elems, got, want)
		}
	}
	big := make(byteaArray, 200)
	for i := range big {
		big[i] = fmt.Appendf(nil, "key %d", i)
	}
	buf := make([]byte, 0, 8192)
	allocs := testing.AllocsPerRun(20, func() {
		if _, err := m.Encode(pgtype.ByteaArrayOID, pgtype.BinaryFormatCode, big, buf[:0]); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 4 {
		t.Errorf("encoding 200 elements took %.0f allocations, want at most 4", allocs)
	}
}

func BenchmarkEncodeByteaArray(b *testing.B) {
	elems := make([][]byte, 200)
	for i := range elems {
		elems[i] = fmt.Appendf(nil, "key %d", i)
	}
	m := pgtype.NewMap()
	buf := make([]byte, 0, 8192)
	for _, c := range []struct {
		name string
		v    any
	}{{"slice", elems}, {"byteaArray", byteaArray(elems)}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := m.Encode(pgtype.ByteaArrayOID, pgtype.BinaryFormatCode, c.v, buf[:0]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
