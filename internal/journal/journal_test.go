package journal_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ringkms/kms/internal/base"
	"github.com/ringkms/kms/internal/headersign"
	"github.com/ringkms/kms/internal/hmackey"
	"github.com/ringkms/kms/internal/journal"
	"github.com/ringkms/kms/store/badgerstore"
)

// rec is the record of these tests: an action, stamped by the codec.
type rec struct {
	Action string `json:"action"`
	Result string `json:"result"`
	Seq    uint64 `json:"seq"`
	Time   int64  `json:"time"`
	Prev   string `json:"prev"`
	Digest string `json:"-"`
}

type codec struct{}

func (codec) Encode(dst []byte, r *rec, at journal.Link, opErr error) ([]byte, error) {
	r.Seq, r.Time, r.Prev, r.Result = at.Seq, at.Time, at.Prev, "ok"
	if opErr != nil {
		r.Result = base.ErrorKind(opErr).String()
	}
	b, err := json.Marshal(r)
	return append(dst, b...), err
}

func (codec) Sealed(r *rec, digest string) { r.Digest = digest }

func (codec) Decode(stored []byte) (*rec, journal.Link, error) {
	var r rec
	if err := json.Unmarshal(stored[32:], &r); err != nil {
		return nil, journal.Link{}, err
	}
	r.Digest = fmt.Sprintf("%x", stored[:32])
	return &r, journal.Link{Seq: r.Seq, Time: r.Time, Prev: r.Prev, Digest: r.Digest}, nil
}

// index counts the records of each action: a key per record (idx/seq ->
// action) and a running count per action (count/action), which commits
// with the head.
type index struct {
	recs   []*rec
	counts map[string]int
	last   uint64
}

func newIndex() *index { return &index{counts: map[string]int{}} }

func (x *index) Add(r *rec, at journal.Link, _ int64, _ bool) {
	x.recs = append(x.recs, r)
	x.counts[r.Action]++
	x.last = at.Seq
}

func (x *index) Reads(keys [][]byte, r *rec) [][]byte {
	return append(keys, []byte("count/"+r.Action))
}

func (x *index) Write(tx base.Txn) error {
	for _, r := range x.recs {
		if err := tx.Set([]byte("idx/"+strconv.FormatUint(r.Seq, 10)), []byte(r.Action)); err != nil {
			return err
		}
	}
	return nil
}

func (x *index) WriteCounts(tx base.Txn) error {
	for action, n := range x.counts {
		k := []byte("count/" + action)
		v, err := tx.Get(k)
		if err != nil && !errors.Is(err, base.ErrNotFound) {
			return err
		}
		was, _ := strconv.Atoi(string(v))
		if err := tx.Set(k, []byte(strconv.Itoa(was+n))); err != nil {
			return err
		}
	}
	return nil
}

func (x *index) Reset()       { x.recs, x.last = x.recs[:0], 0; clear(x.counts) }
func (x *index) Last() uint64 { return x.last }

var (
	chainKey = hmackey.New([32]byte{7})
	headKey  = []byte("head")
	pendKey  = []byte("pending")
)

func start(tb testing.TB, st base.Store) *journal.Journal[*rec] {
	tb.Helper()
	_, priv, _ := ed25519.GenerateKey(nil)
	var signer atomic.Pointer[headersign.Signer]
	signer.Store(&headersign.Signer{ID: [8]byte{1}, Key: priv})
	j, err := journal.Start(context.Background(), journal.Config[*rec]{
		Store: st, Codec: codec{}, Index: newIndex(), ChainKey: chainKey,
		HeadKey: headKey, PendingKey: pendKey, Now: time.Now,
		Log:    func(err error, msg string) { tb.Logf("journal: %s: %v", msg, err) },
		Signer: &signer,
	})
	if err != nil {
		tb.Fatalf("Start() = %v", err)
	}
	return j
}

func openStore(tb testing.TB) *badgerstore.Store {
	tb.Helper()
	st, err := badgerstore.OpenInMemory()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	return st
}

func get(t *testing.T, st base.Store, key string) string {
	t.Helper()
	var v []byte
	err := st.View(context.Background(), func(tx base.Txn) error {
		var err error
		v, err = tx.Get([]byte(key))
		return err
	})
	if errors.Is(err, base.ErrNotFound) {
		return ""
	}
	if err != nil {
		t.Fatalf("Get(%s) = %v", key, err)
	}
	return string(v)
}

// TestJournal submits jobs from many goroutines: records alone, records
// with writes, writes alone, and a failed mutation, and checks what the
// trail, the index, the head and the store hold; then a restart finds the
// chain whole and goes on from its end.
func TestJournal(t *testing.T) {
	st := openStore(t)
	j := start(t, st)
	var wg sync.WaitGroup
	const n = 200
	headers := make([]*headersign.Req, n)
	for i := range n {
		wg.Go(func() {
			jb := &journal.Job[*rec]{Rec: &rec{Action: "call"}}
			switch i % 4 {
			case 1:
				jb.Mutate = func(w base.Txn) error { return w.Set([]byte(fmt.Sprint("data/", i)), []byte("v")) }
			case 2:
				jb.Rec = nil
				jb.Mutate = func(w base.Txn) error { return w.Set([]byte(fmt.Sprint("data/", i)), []byte("v")) }
			case 3:
				jb.Mutate = func(w base.Txn) error {
					w.Set([]byte(fmt.Sprint("data/", i)), []byte("v"))
					return base.Errorf(base.KindConflict, "no")
				}
			}
			headers[i] = &headersign.Req{Body: make([]byte, 16)}
			jb.Header = headers[i]
			err := j.Submit(jb)
			if want := i%4 == 3; (err != nil) != want {
				t.Errorf("job %d: Submit() = %v, want an error: %v", i, err, want)
			}
		})
	}
	wg.Wait()
	j.Close()
	for i := range n {
		if written := get(t, st, fmt.Sprint("data/", i)) != ""; written != (i%4 == 1 || i%4 == 2) {
			t.Errorf("data/%d written: %v", i, written)
		}
		if signed := headers[i].Proof != nil; signed != (i%4 != 3) {
			t.Errorf("header %d signed: %v, want %v (a failed mutation's header is not)", i, signed, i%4 != 3)
		}
	}
	records := n - n/4
	if got := get(t, st, "count/call"); got != strconv.Itoa(records) {
		t.Errorf("count/call = %q, want %d", got, records)
	}
	head := checkChain(t, st, uint64(records))
	if want := strconv.Itoa(n / 4); countResult(t, st, "conflict") != n/4 {
		t.Errorf("records with result conflict: %d, want %s", countResult(t, st, "conflict"), want)
	}

	// A restart goes on from the end of the chain.
	j = start(t, st)
	if err := j.Submit(&journal.Job[*rec]{Rec: &rec{Action: "call"}}); err != nil {
		t.Fatalf("Submit() after a restart = %v", err)
	}
	j.Close()
	if got := checkChain(t, st, uint64(records+1)); got.Seq != head.Seq+1 {
		t.Errorf("head after a restart: %d, want %d", got.Seq, head.Seq+1)
	}
}

// checkChain checks that the trail holds n records, each chained on from
// the one before under chainKey, and that the stored head names the last.
func checkChain(t *testing.T, st base.Store, n uint64) journal.Head {
	t.Helper()
	var prev journal.Link
	err := st.Trail().Scan(1, func(seq uint64, stored []byte) (bool, error) {
		_, at, err := codec{}.Decode(stored)
		if err != nil {
			return false, err
		}
		sum := journal.Digest(chainKey, prev.Digest, stored[32:])
		if at.Seq != seq || at.Prev != prev.Digest || fmt.Sprintf("%x", sum) != at.Digest || at.Time < prev.Time {
			t.Fatalf("record %d does not chain on from %d", seq, prev.Seq)
		}
		prev = at
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if prev.Seq != n || st.Trail().Len() != n {
		t.Fatalf("trail holds %d records (ends at %d), want %d", st.Trail().Len(), prev.Seq, n)
	}
	var head journal.Head
	st.View(context.Background(), func(tx base.Txn) error {
		head, err = journal.LoadHead(tx, headKey)
		return err
	})
	if head.Seq != n || head.Digest != prev.Digest {
		t.Fatalf("stored head %+v, want seq %d digest %s", head, n, prev.Digest)
	}
	return head
}

func countResult(t *testing.T, st base.Store, result string) int {
	t.Helper()
	n := 0
	st.Trail().Scan(1, func(_ uint64, stored []byte) (bool, error) {
		r, _, _ := codec{}.Decode(stored)
		if r.Result == result {
			n++
		}
		return true, nil
	})
	return n
}

// TestStopAndHealth: a stopped journal answers every job with its error,
// writes nothing, and reports it.
func TestStopAndHealth(t *testing.T) {
	st := openStore(t)
	j := start(t, st)
	defer j.Close()
	if err := j.Health(); err != nil {
		t.Fatalf("Health() = %v", err)
	}
	e := &base.Error{Kind: base.KindUnavailable, Message: "stopped"}
	if !j.Stop(e) || j.Stop(e) || !j.Stopped() {
		t.Fatal("Stop: want true once, then false")
	}
	err := j.Submit(&journal.Job[*rec]{Rec: &rec{Action: "call"}, Mutate: func(w base.Txn) error { return w.Set([]byte("x"), nil) }})
	if !errors.Is(err, base.ErrUnavailable) || !errors.Is(j.Health(), base.ErrUnavailable) {
		t.Fatalf("Submit() = %v, Health() = %v; want Unavailable", err, j.Health())
	}
	if get(t, st, "x") != "" || st.Trail().Len() != 0 {
		t.Fatal("a stopped journal wrote")
	}
}

// TestChecksOnlyWhenShared: one process alone does not read a job's
// checks (its caches are current); a verdict that fails would fail it.
func TestChecksOnlyWhenShared(t *testing.T) {
	st := openStore(t)
	j := start(t, st)
	defer j.Close()
	called := false
	err := j.Submit(&journal.Job[*rec]{Rec: &rec{Action: "call"}, Checks: []journal.Check{{Key: []byte("ring"),
		Verdict: func([]byte, bool) (error, error) { called = true; return base.ErrNotFound, nil }}}})
	if err != nil || called {
		t.Fatalf("Submit() = %v, verdict called: %v; want nil, false on a store of one process", err, called)
	}
}

// BenchmarkSubmit is the journal's cost per job under concurrent callers,
// as encrypt calls use it: a record and a header to sign, no mutation, on
// an in-memory store (the trail's append is a copy): what the group commit,
// the chain and the index cost, without a disk.
func BenchmarkSubmit(b *testing.B) {
	for _, callers := range []int{1, 16, 64} {
		b.Run(fmt.Sprint("callers=", callers), func(b *testing.B) {
			st := openStore(b)
			j := start(b, st)
			defer j.Close()
			b.ReportAllocs()
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			for range callers {
				wg.Go(func() {
					for next.Add(1) <= int64(b.N) {
						hdr := &headersign.Req{Body: make([]byte, 83)}
						if err := j.Submit(&journal.Job[*rec]{Rec: &rec{Action: "encrypt"}, Header: hdr}); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			if got := st.Trail().Len(); got < uint64(b.N) {
				b.Fatalf("trail holds %d records, want %d", got, b.N)
			}
		})
	}
}
