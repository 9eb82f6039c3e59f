package backupfile

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"
)

var (
	testKey  = [32]byte{1, 2, 3}
	otherKey = [32]byte{3, 2, 1}
	created  = time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC)
)

// sample writes a backup of entries store entries with values of
// valueSize bytes and records trail records, and returns it with what it
// holds, in order.
func sample(t testing.TB, entries, valueSize, records int) ([]byte, []Item) {
	t.Helper()
	var buf bytes.Buffer
	w := NewWriter(&buf, testKey, Meta{CreatedAt: created, Records: uint64(records)})
	var items []Item
	for i := range entries {
		k := fmt.Appendf(nil, "k/%04d", i)
		v := bytes.Repeat([]byte{byte(i)}, valueSize)
		if err := w.Entry(k, v); err != nil {
			t.Fatal(err)
		}
		items = append(items, Item{Key: k, Value: v})
	}
	for i := range records {
		rec := fmt.Appendf(nil, `{"seq":%d,"action":"encrypt"}`, i+1)
		if err := w.Record(rec); err != nil {
			t.Fatal(err)
		}
		items = append(items, Item{Record: rec})
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), items
}

// read reads a whole backup under key and returns what the Reader handed
// out, and the error that ended it (nil for a clean end).
func read(b []byte, key [32]byte) (Meta, []Item, error) {
	r, meta, err := NewReader(bytes.NewReader(b), key)
	if err != nil {
		return Meta{}, nil, err
	}
	var items []Item
	for {
		it, err := r.Next()
		if err == io.EOF {
			return meta, items, nil
		}
		if err != nil {
			return meta, items, err
		}
		items = append(items, it)
	}
}

func sameItem(a, b Item) bool {
	return bytes.Equal(a.Key, b.Key) && bytes.Equal(a.Value, b.Value) && bytes.Equal(a.Record, b.Record) && (a.Record == nil) == (b.Record == nil)
}

// frameSpan is where a frame lies in a backup: its head from start to
// body, its body from body to end.
type frameSpan struct {
	kind             byte
	start, body, end int
}

// frames parses the frames of a backup that is intact.
func frames(t testing.TB, b []byte) []frameSpan {
	t.Helper()
	var out []frameSpan
	for off := len(magic); off < len(b); {
		size, n := binary.Uvarint(b[off+1:])
		if n <= 0 {
			t.Fatalf("malformed frame at %d", off)
		}
		f := frameSpan{kind: b[off], start: off, body: off + 1 + n, end: off + 1 + n + int(size)}
		out = append(out, f)
		off = f.end
	}
	return out
}

// mustRefuse reads b and requires an error wrapping ErrDamaged before a
// clean end, and that every item handed out before it is the intact
// backup's item at that place: nothing altered is ever handed out.
func mustRefuse(t *testing.T, name string, b []byte, want []Item) {
	t.Helper()
	_, got, err := read(b, testKey)
	if !errors.Is(err, ErrDamaged) {
		t.Errorf("%s: read = %d items, %v; want an error wrapping ErrDamaged", name, len(got), err)
	}
	for i, it := range got {
		if i >= len(want) || !sameItem(it, want[i]) {
			t.Errorf("%s: item %d handed out is not the intact backup's", name, i)
			return
		}
	}
}

func TestRoundTrip(t *testing.T) {
	for _, c := range []struct {
		name                        string
		entries, valueSize, records int
		auths                       int // 'A' frames
	}{
		{"empty", 0, 0, 0, 1},
		{"small", 3, 10, 4, 1},
		{"several MACs", 40, 100 << 10, 30, 4},
		{"one large value", 1, 3 << 20, 1, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, want := sample(t, c.entries, c.valueSize, c.records)
			meta, got, err := read(b, testKey)
			if err != nil {
				t.Fatalf("read = %v", err)
			}
			if meta.Version != Version || !meta.CreatedAt.Equal(created) || meta.Records != uint64(c.records) {
				t.Errorf("Meta = %+v", meta)
			}
			if len(got) != len(want) {
				t.Fatalf("read %d items, want %d", len(got), len(want))
			}
			for i := range want {
				if !sameItem(got[i], want[i]) {
					t.Fatalf("item %d differs", i)
				}
			}
			auths := 0
			for _, f := range frames(t, b) {
				if f.kind == frameAuth {
					auths++
				}
			}
			if auths != c.auths {
				t.Errorf("%d 'A' frames, want %d", auths, c.auths)
			}
		})
	}
}

// TestRefusesAlteration: a bit flipped anywhere in a small backup, and at
// the start, middle and end of the head and body of every frame of one
// with several 'A' frames (header, MACs, entries, records, end), is
// refused, and nothing altered is handed out.
func TestRefusesAlteration(t *testing.T) {
	small, smallItems := sample(t, 3, 20, 3)
	for i := range small {
		for _, bit := range []byte{0x01, 0x80} {
			b := bytes.Clone(small)
			b[i] ^= bit
			mustRefuse(t, fmt.Sprintf("small, byte %d ^ %#x", i, bit), b, smallItems)
		}
	}
	large, largeItems := sample(t, 12, 200<<10, 5)
	regions := map[byte]int{}
	for _, f := range frames(t, large) {
		regions[f.kind]++
		for _, i := range []int{f.start, f.start + 1, f.body - 1, f.body, (f.body + f.end) / 2, f.end - 1} {
			if i < f.start || i >= f.end {
				continue
			}
			b := bytes.Clone(large)
			b[i] ^= 0x04
			mustRefuse(t, fmt.Sprintf("large, %c frame at %d, byte %d", f.kind, f.start, i), b, largeItems)
		}
	}
	for i := range len(magic) {
		b := bytes.Clone(large)
		b[i] ^= 0x04
		mustRefuse(t, fmt.Sprintf("large, magic byte %d", i), b, largeItems)
	}
	if regions[frameAuth] < 3 || regions[frameEntry] == 0 || regions[frameRecord] == 0 || regions[frameMeta] != 1 || regions[frameEnd] != 1 {
		t.Errorf("the large backup has frames %v; want the header, entries, records, an end and 3 MACs or more", regions)
	}
}

// TestRefusesTruncation: a backup cut off anywhere is refused, and what
// was handed out before is the intact backup's.
func TestRefusesTruncation(t *testing.T) {
	small, smallItems := sample(t, 3, 20, 3)
	for i := range small {
		mustRefuse(t, fmt.Sprintf("small, cut at %d", i), small[:i], smallItems)
	}
	large, largeItems := sample(t, 12, 200<<10, 5)
	for _, f := range frames(t, large) {
		for _, i := range []int{f.start, f.start + 1, f.body, f.end - 1} {
			mustRefuse(t, fmt.Sprintf("large, cut at %d (%c frame)", i, f.kind), large[:i], largeItems)
		}
	}
	mustRefuse(t, "a byte appended", append(bytes.Clone(small), 0), smallItems)
	mustRefuse(t, "a frame appended", append(bytes.Clone(small), 'T', 1, 'x'), smallItems)
}

// TestRefusesReordering: entries or records swapped, a frame dropped or
// repeated, a MAC moved: refused.
func TestRefusesReordering(t *testing.T) {
	b, items := sample(t, 12, 200<<10, 5)
	fs := frames(t, b)
	var entries, records, auths []frameSpan
	for _, f := range fs {
		switch f.kind {
		case frameEntry:
			entries = append(entries, f)
		case frameRecord:
			records = append(records, f)
		case frameAuth:
			auths = append(auths, f)
		}
	}
	// rebuild returns b with its frames in the order of spans.
	rebuild := func(spans []frameSpan) []byte {
		out := []byte(magic)
		for _, f := range spans {
			out = append(out, b[f.start:f.end]...)
		}
		return out
	}
	swap := func(x, y frameSpan) []byte {
		spans := make([]frameSpan, len(fs))
		for i, f := range fs {
			switch f.start {
			case x.start:
				f = y
			case y.start:
				f = x
			}
			spans[i] = f
		}
		return rebuild(spans)
	}
	without := func(x frameSpan) []byte {
		var spans []frameSpan
		for _, f := range fs {
			if f.start != x.start {
				spans = append(spans, f)
			}
		}
		return rebuild(spans)
	}
	repeated := func(x frameSpan) []byte {
		var spans []frameSpan
		for _, f := range fs {
			spans = append(spans, f)
			if f.start == x.start {
				spans = append(spans, f)
			}
		}
		return rebuild(spans)
	}
	mustRefuse(t, "two entries swapped", swap(entries[0], entries[1]), items)
	mustRefuse(t, "two entries across a MAC swapped", swap(entries[0], entries[len(entries)-1]), items)
	mustRefuse(t, "two records swapped", swap(records[0], records[1]), items)
	mustRefuse(t, "an entry and a record swapped", swap(entries[len(entries)-1], records[0]), items)
	mustRefuse(t, "two MACs swapped", swap(auths[1], auths[2]), items)
	mustRefuse(t, "an entry dropped", without(entries[3]), items)
	mustRefuse(t, "a record dropped", without(records[4]), items)
	mustRefuse(t, "a MAC dropped", without(auths[1]), items)
	mustRefuse(t, "an entry repeated", repeated(entries[2]), items)
	mustRefuse(t, "a record repeated", repeated(records[0]), items)
	mustRefuse(t, "a MAC repeated", repeated(auths[1]), items)
}

// TestRefusesAnotherKey: under another key, the backup is refused at its
// start, with ErrKey.
func TestRefusesAnotherKey(t *testing.T) {
	b, _ := sample(t, 3, 20, 3)
	_, _, err := NewReader(bytes.NewReader(b), otherKey)
	if !errors.Is(err, ErrKey) || !errors.Is(err, ErrDamaged) {
		t.Errorf("NewReader(another key) = %v, want ErrKey and ErrDamaged", err)
	}
}

// TestRefusesVersion1: a version 1 backup, intact as version 1 goes (its
// plain SHA-256 recomputed), is ErrUnauthenticated.
func TestRefusesVersion1(t *testing.T) {
	b := []byte(magicV1)
	frame := func(kind byte, body []byte) {
		b = append(b, kind)
		b = binary.AppendUvarint(b, uint64(len(body)))
		b = append(b, body...)
	}
	frame(frameMeta, []byte(`{"version":1,"createdAt":"2026-03-14T15:09:26Z","records":0}`))
	frame(frameEntry, append([]byte{1}, "kv"...))
	sum := sha256.Sum256(b)
	frame(frameEnd, append([]byte{1, 0}, sum[:]...))
	for name, open := range map[string]func(io.Reader) (*Reader, Meta, error){
		"NewReader":          func(r io.Reader) (*Reader, Meta, error) { return NewReader(r, testKey) },
		"NewUncheckedReader": NewUncheckedReader,
	} {
		if _, _, err := open(bytes.NewReader(b)); !errors.Is(err, ErrUnauthenticated) {
			t.Errorf("%s(version 1) = %v, want ErrUnauthenticated", name, err)
		}
	}
	for name, b := range map[string][]byte{"not a backup": []byte("PK\x03\x04 a zip file"), "version 3": []byte("rkmsbak\x03"), "empty": nil} {
		if _, _, err := NewReader(bytes.NewReader(b), testKey); !errors.Is(err, ErrDamaged) {
			t.Errorf("NewReader(%s) = %v, want ErrDamaged", name, err)
		}
	}
}

// forge writes a backup of the frames given, with their MACs computed
// under testKey as a Writer would: an 'A' frame's body, and the MAC at the
// end of an 'E' frame's body, are filled in. It makes backups that
// authenticate but break the format's other rules.
func forge(frames ...[]byte) []byte {
	mac := hmac.New(sha256.New, testKey[:])
	out := []byte(magic)
	mac.Write(out)
	for _, f := range frames {
		kind, body := f[0], f[1:]
		size := len(body)
		if kind == frameAuth || kind == frameEnd {
			size += sha256.Size
		}
		head := binary.AppendUvarint([]byte{kind}, uint64(size))
		mac.Write(head)
		mac.Write(body)
		out = append(append(out, head...), body...)
		if kind == frameAuth || kind == frameEnd {
			sum := mac.Sum(nil)
			mac.Write(sum)
			out = append(out, sum...)
		}
	}
	return out
}

// TestRefusesMalformed: backups that authenticate under the key but break
// the format's rules are refused.
func TestRefusesMalformed(t *testing.T) {
	meta := func(records int) []byte {
		return fmt.Appendf(nil, `M{"version":2,"createdAt":"2026-03-14T15:09:26Z","records":%d}`, records)
	}
	entry := func(k, v string) []byte { return append([]byte{frameEntry, byte(len(k))}, k+v...) }
	record := func(r string) []byte { return append([]byte{frameRecord}, r...) }
	end := func(entries, records byte) []byte { return []byte{frameEnd, entries, records} }
	auth := []byte{frameAuth}
	big := string(bytes.Repeat([]byte("v"), AuthEvery))

	ok := forge(meta(1), auth, entry("k", "v"), record("r"), end(1, 1))
	if _, items, err := read(ok, testKey); err != nil || len(items) != 2 {
		t.Fatalf("forge makes a backup that does not read: %d items, %v", len(items), err)
	}
	for name, b := range map[string][]byte{
		"no MAC after the header":        forge(meta(0), entry("k", "v"), end(1, 0)),
		"no header":                      forge(auth, entry("k", "v"), end(1, 0)),
		"two headers":                    forge(meta(0), auth, meta(0), end(0, 0)),
		"an entry after a record":        forge(meta(1), auth, record("r"), entry("k", "v"), end(1, 1)),
		"an entry with an empty key":     forge(meta(0), auth, entry("", "v"), end(1, 0)),
		"an entry with a key too long":   forge(meta(0), auth, []byte{frameEntry, 9, 'k'}, end(1, 0)),
		"end counts too few entries":     forge(meta(1), auth, entry("k", "v"), record("r"), end(0, 1)),
		"end counts too many records":    forge(meta(1), auth, entry("k", "v"), record("r"), end(1, 2)),
		"header counts other records":    forge(meta(2), auth, entry("k", "v"), record("r"), end(1, 1)),
		"a frame of unknown kind":        forge(meta(0), auth, []byte{'X', 1}, end(0, 0)),
		"no MAC after AuthEvery bytes":   forge(meta(0), auth, entry("k", big), entry("l", "v"), end(2, 0)),
		"no MAC before the end":          forge(meta(0), auth, entry("k", big), end(1, 0)),
		"a MAC frame of the wrong size":  forge(meta(0), auth, []byte{frameAuth, 1, 2, 3}, end(0, 0)),
		"an end without its MAC":         append(forge(meta(0), auth), frameEnd, 2, 0, 0),
		"bytes after the end":            append(bytes.Clone(ok), 0),
		"no end, cut after a MAC":        forge(meta(1), auth, entry("k", "v"), record("r"), auth),
		"a frame longer than any frame":  append(forge(meta(0), auth), frameRecord, 0xff, 0xff, 0xff, 0xff, 0x0f),
		"a frame length that overflows":  append(forge(meta(0), auth), frameRecord, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01),
		"a header that is not version 2": forge([]byte(`M{"version":1}`), auth, end(0, 0)),
	} {
		if _, _, err := read(b, testKey); !errors.Is(err, ErrDamaged) {
			t.Errorf("%s: read = %v, want ErrDamaged", name, err)
		}
	}
	// With AuthEvery bytes and then a MAC, the same reads.
	b := forge(meta(0), auth, entry("k", big), auth, entry("l", "v"), end(2, 0))
	if _, items, err := read(b, testKey); err != nil || len(items) != 2 {
		t.Errorf("a MAC after AuthEvery bytes: read = %d items, %v; want 2 items", len(items), err)
	}
}

// TestReaderHoldsBack: a Reader hands out an item only once a MAC after
// it checks out: with the last MAC altered, nothing after the one before
// is handed out.
func TestReaderHoldsBack(t *testing.T) {
	b, items := sample(t, 12, 200<<10, 5)
	var auths []frameSpan
	for _, f := range frames(t, b) {
		if f.kind == frameAuth {
			auths = append(auths, f)
		}
	}
	last := auths[len(auths)-1]
	b[last.body] ^= 1
	_, got, err := read(b, testKey)
	if err == nil {
		t.Fatal("read = nil error for an altered MAC")
	}
	// The items before the second-to-last MAC, and no more.
	var n int
	for _, f := range frames(t, b) {
		if f.start >= auths[len(auths)-2].start {
			break
		}
		if f.kind == frameEntry || f.kind == frameRecord {
			n++
		}
	}
	if len(got) != n {
		t.Errorf("read handed out %d items before the altered MAC, want %d (those before the MAC before it)", len(got), n)
	}
	mustRefuse(t, "last MAC altered", b, items)
}

// TestUncheckedReader: it reads a backup under any key and refuses one
// cut off or with wrong counts, but does not tell an altered one.
func TestUncheckedReader(t *testing.T) {
	b, items := sample(t, 12, 200<<10, 5)
	readAll := func(b []byte) (int, error) {
		r, _, err := NewUncheckedReader(bytes.NewReader(b))
		if err != nil {
			return 0, err
		}
		n := 0
		for {
			if _, err := r.Next(); err == io.EOF {
				return n, nil
			} else if err != nil {
				return n, err
			}
			n++
		}
	}
	if n, err := readAll(b); err != nil || n != len(items) {
		t.Errorf("NewUncheckedReader(intact) read %d items, %v; want %d", n, err, len(items))
	}
	if _, err := readAll(b[:len(b)-1]); !errors.Is(err, ErrDamaged) {
		t.Errorf("NewUncheckedReader(cut off) = %v, want ErrDamaged", err)
	}
	fs := frames(t, b)
	altered := bytes.Clone(b)
	altered[fs[len(fs)/2].end-1] ^= 1
	if _, err := readAll(altered); err != nil {
		t.Errorf("NewUncheckedReader(a value altered) = %v; it does not check MACs", err)
	}
}

func FuzzReader(f *testing.F) {
	small, _ := sample(f, 2, 5, 2)
	f.Add(small)
	f.Add(small[:len(small)/2])
	f.Add([]byte(magicV1))
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, _, err := read(b, testKey); err == nil && !bytes.Equal(b, small) {
			t.Fatalf("read accepted %q, which testKey did not authenticate", b)
		}
	})
}
