package pgstore

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/pgtest"
)

// TestAppendInDoubt: an Append whose answer is lost after it reached the
// database is Unavailable and counts as not appended, whether or not the
// database committed it; the next Append writes in its place, unless the
// table holds records that this Append did not send.
func TestAppendInDoubt(t *testing.T) {
	direct := pgtest.URL(t)
	p, dbURL := pgtest.Proxy(t, direct)
	s := openStore(t, dbURL, Options{MaxConns: 2})
	tr := s.Trail()
	c := sqlConn(t, direct)
	count := func() int {
		var n int
		if err := c.QueryRow(t.Context(), "SELECT count(*) FROM kms_trail").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// lose appends recs; the database commits them, their answer never
	// comes back, and then the connection breaks.
	lose := func(recs ...string) {
		t.Helper()
		want := count() + len(recs)
		var batch [][]byte
		for _, r := range recs {
			batch = append(batch, []byte(r))
		}
		n := tr.Len()
		p.HoldOn(pgtest.BoundStatement(sqlTrailAppend))
		done := make(chan error)
		go func() { done <- tr.Append(batch) }()
		for deadline := time.Now().Add(10 * time.Second); count() != want; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the Append whose answer is lost never committed")
			}
		}
		p.Break() // the held answer goes with the connection
		wantKind(t, "Append whose answer was lost", <-done, kms.KindUnavailable)
		if got := tr.Len(); got != n {
			t.Fatalf("Len() after an Append in doubt = %d, want %d", got, n)
		}
	}
	records := func() []string {
		t.Helper()
		var got []string
		err := tr.Scan(1, func(seq uint64, rec []byte) (bool, error) {
			got = append(got, string(rec))
			return true, nil
		})
		if err != nil {
			t.Fatalf("Scan(1) = %v, want nil", err)
		}
		return got
	}

	if err := tr.Append([][]byte{[]byte("1")}); err != nil {
		t.Fatalf("Append = %v, want nil", err)
	}
	// Committed: the next Append removes the records and takes their seqs.
	lose("lost 2", "lost 3")
	if err := tr.Append([][]byte{[]byte("2"), []byte("3"), []byte("4")}); err != nil {
		t.Fatalf("Append after an Append in doubt = %v, want nil", err)
	}
	if got, want := records(), []string{"1", "2", "3", "4"}; !slices.Equal(got, want) {
		t.Errorf("trail = %q, want %q", got, want)
	}

	// Not committed after all (here, removed behind its back): nothing
	// to remove.
	lose("lost 5")
	exec(t, c, "DELETE FROM kms_trail WHERE seq > 4")
	if err := tr.Append([][]byte{[]byte("5")}); err != nil {
		t.Fatalf("Append after an Append in doubt = %v, want nil", err)
	}
	if got, want := records(), []string{"1", "2", "3", "4", "5"}; !slices.Equal(got, want) {
		t.Errorf("trail = %q, want %q", got, want)
	}

	// Records other than those sent: another process wrote them, and
	// they stay.
	lose("lost 6")
	exec(t, c, "UPDATE kms_trail SET rec = 'not mine' WHERE seq = 6")
	wantKind(t, "Append after records another process appended", tr.Append([][]byte{[]byte("6")}), kms.KindConflict)
	if n := tr.Len(); n != 5 {
		t.Errorf("Len() = %d, want 5", n)
	}
	if n := count(); n != 6 {
		t.Errorf("%d rows in kms_trail, want 6", n)
	}
}

// TestAppendAfterOthers: records that another process appended are never
// overwritten nor removed: Append refuses with Conflict.
func TestAppendAfterOthers(t *testing.T) {
	dbURL := pgtest.URL(t)
	a := openStore(t, dbURL, Options{})
	b := openStore(t, dbURL, Options{})
	if err := a.Trail().Append([][]byte{[]byte("a1"), []byte("a2")}); err != nil {
		t.Fatalf("Append by the first = %v, want nil", err)
	}
	err := b.Trail().Append([][]byte{[]byte("b1")})
	wantKind(t, "Append by a second appender", err, kms.KindConflict)
	if n := b.Trail().Len(); n != 0 {
		t.Errorf("second Len() after its refused Append = %d, want 0", n)
	}
	var got []string
	a.Trail().Scan(1, func(_ uint64, rec []byte) (bool, error) { got = append(got, string(rec)); return true, nil })
	if want := []string{"a1", "a2"}; !slices.Equal(got, want) {
		t.Errorf("trail = %q, want %q", got, want)
	}
}

// TestAppendLargeBatch: a batch over 32 MiB is sent as several statements
// in one transaction: all its records are appended, or none.
func TestAppendLargeBatch(t *testing.T) {
	dbURL := pgtest.URL(t)
	s := openStore(t, dbURL, Options{})
	tr := s.Trail()
	var batch [][]byte
	for i := range 3 {
		rec := bytes.Repeat([]byte{byte('a' + i)}, 12<<20)
		rand.Read(rec[:1024])
		batch = append(batch, rec)
	}
	if err := tr.Append(batch); err != nil {
		t.Fatalf("Append(3 records of 12 MiB) = %v, want nil", err)
	}
	i := 0
	err := tr.Scan(1, func(seq uint64, rec []byte) (bool, error) {
		if !bytes.Equal(rec, batch[i]) {
			return false, fmt.Errorf("record %d differs from the one appended", seq)
		}
		i++
		return true, nil
	})
	if err != nil || i != 3 {
		t.Fatalf("Scan(1) = %v after %d records, want nil after 3", err, i)
	}

	failTrigger(t, dbURL)
	err = tr.Append(append(batch, []byte("ok"), []byte("disk full")))
	wantKind(t, "Append(36 MiB of records, the last refused)", err, kms.KindNoSpace)
	var n int
	if err := sqlConn(t, dbURL).QueryRow(t.Context(), "SELECT count(*) FROM kms_trail").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 3 || tr.Len() != 3 {
		t.Errorf("after a refused batch: %d rows, Len() %d; want 3 and 3", n, tr.Len())
	}
}

// TestTrailMissingRecords: records missing from the table are damage that
// Check and Scan report, naming the first.
func TestTrailMissingRecords(t *testing.T) {
	dbURL := pgtest.URL(t)
	s := openStore(t, dbURL, Options{})
	var recs [][]byte
	for i := 1; i <= 600; i++ {
		recs = append(recs, fmt.Appendf(nil, "record %d", i))
	}
	if err := s.Trail().Append(recs); err != nil {
		t.Fatalf("Append = %v, want nil", err)
	}
	c := sqlConn(t, dbURL)
	exec(t, c, "DELETE FROM kms_trail WHERE seq IN (300, 301) OR seq > 590")
	s2 := openStore(t, dbURL, Options{})
	tr := s2.Trail()

	tests := []struct {
		want    uint64
		message string // "" for nil
	}{
		{0, ""},
		{1, ""},
		{299, ""}, // before the gap
		{590, ""}, // the gap lies between 1 and 590: Scan finds it
		{595, "trail record 300 is missing"},
		{1000, "trail record 300 is missing"},
	}
	for _, tc := range tests {
		err := tr.Check(tc.want)
		switch {
		case tc.message == "" && err != nil:
			t.Errorf("Check(%d) = %v, want nil", tc.want, err)
		case tc.message != "":
			wantKind(t, fmt.Sprintf("Check(%d)", tc.want), err, kms.KindUnprocessable)
			if err != nil && !strings.Contains(err.Error(), tc.message) {
				t.Errorf("Check(%d) = %q, want a message containing %q", tc.want, err, tc.message)
			}
		}
	}

	var seen []uint64
	err := tr.Scan(1, func(seq uint64, rec []byte) (bool, error) {
		if want := fmt.Sprintf("record %d", seq); string(rec) != want {
			return false, fmt.Errorf("record %d = %q, want %q", seq, rec, want)
		}
		seen = append(seen, seq)
		return true, nil
	})
	wantKind(t, "Scan(1) over a gap", err, kms.KindUnprocessable)
	if err != nil && !strings.Contains(err.Error(), "trail record 300 is missing") {
		t.Errorf("Scan(1) over a gap = %q, want a message naming record 300", err)
	}
	if len(seen) != 299 || seen[298] != 299 {
		t.Errorf("Scan(1) over a gap saw %d records, want the 299 before it", len(seen))
	}

	// Records cut from the start, and from the end.
	exec(t, c, "INSERT INTO kms_trail (seq, rec) VALUES (300, 'record 300'), (301, 'record 301')")
	tr = openStore(t, dbURL, Options{}).Trail()
	if err := tr.Check(590); err != nil {
		t.Errorf("Check(590) with the gap filled = %v, want nil", err)
	}
	err = tr.Check(600)
	wantKind(t, "Check(600) of a trail that ends at 590", err, kms.KindUnprocessable)
	if err != nil && !strings.Contains(err.Error(), "trail ends after record 590") {
		t.Errorf("Check(600) = %q, want a message saying the trail ends after record 590", err)
	}
	exec(t, c, "DELETE FROM kms_trail WHERE seq = 1")
	err = tr.Check(10)
	wantKind(t, "Check(10) without record 1", err, kms.KindUnprocessable)
	if err != nil && !strings.Contains(err.Error(), "trail record 1 is missing") {
		t.Errorf("Check(10) = %q, want a message naming record 1", err)
	}
	err = tr.Scan(1, func(uint64, []byte) (bool, error) { return true, nil })
	wantKind(t, "Scan(1) without record 1", err, kms.KindUnprocessable)
}
