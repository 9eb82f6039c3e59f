package barrier_test

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"slices"
	"testing"

	"github.com/ringkms/kms/internal/barrier"
	"github.com/ringkms/kms/internal/base"
	"github.com/ringkms/kms/internal/base/basetest"
	"github.com/ringkms/kms/internal/seal"
)

// tokenKey is a RootKey that is no MasterKey, as a token's key is: the
// barrier never sees its bytes.
type tokenKey struct{ s *seal.Sealer }

func newTokenKey() tokenKey {
	k := barrier.GenerateMasterKey()
	return tokenKey{seal.New(seal.Derive([]byte(k.Base64()), "token"))}
}
func (k tokenKey) Seal(p, aad []byte) ([]byte, error) { return k.s.Seal(p, aad), nil }
func (k tokenKey) Open(c, aad []byte) ([]byte, error) { return k.s.Open(c, aad) }

var ctx = context.Background()

// table is a table of sealed records such as a domain hands in: whole
// sealed values under "s/", bound to their keys, and records under "r/"
// with two sealed fields, either of which a record may lack.
var table = []barrier.Sealed{
	{Prefix: []byte("s/"), What: func(id string) string { return "secret " + id }},
	{Prefix: []byte("r/"), Field: "a", AAD: func(id string) []byte { return []byte("a/" + id) }, What: func(id string) string { return "a of " + id }},
	{Prefix: []byte("r/"), Field: "b", AAD: func(id string) []byte { return []byte("b/" + id) }, What: func(id string) string { return "b of " + id }},
}

func config(st base.Store) barrier.Config {
	return barrier.Config{Store: st, Marks: [][]byte{[]byte("mark")}, Sealed: table}
}

// seed writes, through b, the records of table with their secrets.
func seed(t *testing.T, st base.Store, b *barrier.Barrier) map[string]string {
	t.Helper()
	plain := map[string]string{"s/1": "one", "s/2": "two", "r/x.a": "xa", "r/x.b": "xb", "r/y.a": "ya"}
	err := st.Update(ctx, func(tx base.Txn) error {
		for _, k := range []string{"s/1", "s/2"} {
			v, err := b.SealIn(tx, []byte(plain[k]), []byte(k))
			if err != nil {
				return err
			}
			tx.Set([]byte(k), v)
		}
		for _, id := range []string{"x", "y"} {
			rec := map[string]any{"name": id}
			for _, f := range []string{"a", "b"} {
				if p, ok := plain["r/"+id+"."+f]; ok {
					v, err := b.SealIn(tx, []byte(p), []byte(f+"/"+id))
					if err != nil {
						return err
					}
					rec[f] = v
				}
			}
			j, _ := json.Marshal(rec)
			tx.Set([]byte("r/"+id), j)
		}
		return tx.Set([]byte("mark"), []byte("1"))
	})
	if err != nil {
		t.Fatal(err)
	}
	return plain
}

// opens checks that every secret of plain opens through b.
func opens(t *testing.T, st *basetest.MemStore, b *barrier.Barrier, plain map[string]string) {
	t.Helper()
	for k, want := range plain {
		var sealed, aad []byte
		if k[0] == 's' {
			sealed, aad = st.Get(k), []byte(k)
		} else {
			id, f := k[2:3], k[4:]
			var rec map[string][]byte
			json.Unmarshal(st.Get("r/"+id), &rec)
			sealed, aad = rec[f], []byte(f+"/"+id)
		}
		got, err := b.Open(sealed, aad)
		if err != nil || string(got) != want {
			t.Errorf("Open(%s) = %q, %v; want %q", k, got, err, want)
		}
	}
}

func TestSealOpenRoundTrip(t *testing.T) {
	for name, rk := range map[string]barrier.RootKey{"master key": barrier.GenerateMasterKey(), "token": newTokenKey()} {
		t.Run(name, func(t *testing.T) {
			st := basetest.NewMemStore()
			b := start(t, st, rk, nil)
			plain := seed(t, st, b)
			opens(t, st, b, plain)
			// A restart under the same key opens them too.
			b2 := start(t, st, rk, nil)
			opens(t, st, b2, plain)
			// Bound to its associated data.
			if _, err := b2.Open(st.Get("s/1"), []byte("s/2")); err == nil {
				t.Error("Open with other associated data succeeded")
			}
		})
	}
}

func TestWrongKeyRefused(t *testing.T) {
	// A token's key: the store's root secret does not open under another.
	st := basetest.NewMemStore()
	if _, err := barrier.New(config(st)).Start(ctx, newTokenKey(), nil); err != nil {
		t.Fatal(err)
	}
	if st.Get("sys/root") == nil {
		t.Fatal("no root secret written for a token's key")
	}
	if _, err := barrier.New(config(st)).Start(ctx, newTokenKey(), nil); base.ErrorKind(err) != base.KindUnauthenticated {
		t.Errorf("Start(another token key) = %v, want unauthenticated", err)
	}
	if _, err := barrier.New(config(st)).Start(ctx, barrier.GenerateMasterKey(), nil); base.ErrorKind(err) != base.KindUnauthenticated {
		t.Errorf("Start(a master key) = %v, want unauthenticated", err)
	}

	// A master key's own bytes: the domain's proof tells another key.
	st = basetest.NewMemStore()
	mk := barrier.GenerateMasterKey()
	b := start(t, st, mk, nil)
	seed(t, st, b)
	cfg := config(st)
	cfg.Proof = func(_ context.Context, st base.Store, s *seal.Sealer) error {
		return st.View(ctx, func(tx base.Txn) error {
			v, err := tx.Get([]byte("s/1"))
			if err != nil {
				return err
			}
			if _, err := s.Open(v, []byte("s/1")); err != nil {
				return base.Errorf(base.KindUnauthenticated, "s/1 does not open")
			}
			return nil
		})
	}
	if _, err := barrier.New(cfg).Start(ctx, barrier.GenerateMasterKey(), nil); base.ErrorKind(err) != base.KindUnauthenticated {
		t.Errorf("Start(another master key) = %v, want unauthenticated", err)
	}
	if _, err := barrier.New(cfg).Start(ctx, mk, nil); err != nil {
		t.Errorf("Start(the master key) = %v", err)
	}
	// A store written under a master key's own bytes is no new store for
	// a token's key.
	if _, err := barrier.New(cfg).Start(ctx, newTokenKey(), nil); base.ErrorKind(err) != base.KindUnauthenticated {
		t.Errorf("Start(a token key on a plain store) = %v, want unauthenticated", err)
	}
}

func TestRekeyTable(t *testing.T) {
	st := basetest.NewMemStore()
	old, next := barrier.GenerateMasterKey(), newTokenKey()
	b := barrier.New(config(st))
	before, err := b.Start(ctx, old, nil)
	if err != nil {
		t.Fatal(err)
	}
	plain := seed(t, st, b)

	adopted := 0
	cfg := config(st)
	cfg.Adopted = func() { adopted++ }
	r := startWith(t, cfg, old, next)
	counts, err := r.Rekey(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{2, 2, 1}; !slices.Equal(counts, want) {
		t.Errorf("Rekey counts = %v, want %v (by row of the table)", counts, want)
	}
	if adopted != 1 {
		t.Errorf("Adopted called %d times, want 1", adopted)
	}
	// The records keep what is not sealed.
	var rec map[string]any
	json.Unmarshal(st.Get("r/y"), &rec)
	if rec["name"] != "y" || rec["b"] != nil {
		t.Errorf("record r/y after the rekey = %v", rec)
	}

	nb := barrier.New(config(st))
	after, err := nb.Start(ctx, next, nil)
	if err != nil {
		t.Fatal(err)
	}
	opens(t, st, nb, plain)
	opens(t, st, r, plain)
	if after.Seal == before.Seal || after.Backup == before.Backup {
		t.Error("the seal and backup keys did not change")
	}
	if after.HashMAC != before.HashMAC || after.HeaderMAC != before.HeaderMAC || after.Cursor != before.Cursor || after.AuditChain != before.AuditChain || after.Throttle != before.Throttle {
		t.Error("the MAC and cursor keys changed")
	}
	if _, err := barrier.New(config(st)).Start(ctx, old, nil); base.ErrorKind(err) != base.KindUnauthenticated {
		t.Errorf("Start(the old key) = %v, want unauthenticated", err)
	}
	// The old barrier, without the next key, finds the store foreign.
	if got := b.Check(ctx); got != barrier.Foreign {
		t.Errorf("Check of a barrier without the new key = %v, want Foreign", got)
	}
}

func TestRekeyFollowed(t *testing.T) {
	st := basetest.NewMemStore()
	old, next := newTokenKey(), newTokenKey()
	adopted := 0
	cfg := config(st)
	cfg.Adopted = func() { adopted++ }
	follower := startWith(t, cfg, old, next)
	plain := seed(t, st, follower)
	r := start(t, st, old, next)
	if _, err := r.Rekey(ctx); err != nil {
		t.Fatal(err)
	}
	if got := follower.Check(ctx); got != barrier.Opens || adopted != 1 {
		t.Fatalf("Check = %v, adopted %d times; want Opens, once", got, adopted)
	}
	// What it seals now opens under the new key alone.
	err := st.Update(ctx, func(tx base.Txn) error {
		v, err := follower.SealIn(tx, []byte("three"), []byte("s/3"))
		if err != nil {
			return err
		}
		return tx.Set([]byte("s/3"), v)
	})
	if err != nil {
		t.Fatal(err)
	}
	plain["s/3"] = "three"
	nb := start(t, st, next, nil)
	opens(t, st, nb, plain)
}

func TestRetiredKeyRefused(t *testing.T) {
	st := basetest.NewMemStore()
	a, b, c := newTokenKey(), newTokenKey(), newTokenKey()
	first := start(t, st, a, nil)
	plain := seed(t, st, first)
	rekey := func(old, new barrier.RootKey) error {
		r := barrier.New(config(st))
		if err := r.CheckRekey(ctx, old, new); err != nil {
			return err
		}
		if _, err := r.Start(ctx, old, new); err != nil {
			return err
		}
		_, err := r.Rekey(ctx)
		return err
	}
	if err := rekey(a, b); err != nil {
		t.Fatal(err)
	}
	if st.Get("sys/retired") == nil {
		t.Fatal("no record of the retired key")
	}
	// The same rekey again: refused, the store unchanged.
	was := st.Snapshot()
	if err := rekey(a, b); base.ErrorKind(err) != base.KindInvalid {
		t.Errorf("rekey a->b again = %v, want invalid", err)
	}
	// Back to a, which the store left: refused, the store unchanged.
	if err := rekey(b, a); base.ErrorKind(err) != base.KindInvalid {
		t.Errorf("rekey b->a = %v, want invalid", err)
	}
	// To the key it is under: refused.
	if err := rekey(b, b); base.ErrorKind(err) != base.KindInvalid {
		t.Errorf("rekey b->b = %v, want invalid", err)
	}
	if now := st.Snapshot(); !mapsEqual(was, now) {
		t.Error("a refused rekey changed the store")
	}
	// On to a key it never had, and then a and b are both retired.
	if err := rekey(b, c); err != nil {
		t.Fatal(err)
	}
	for name, k := range map[string]barrier.RootKey{"a": a, "b": b} {
		if err := rekey(c, k); base.ErrorKind(err) != base.KindInvalid {
			t.Errorf("rekey c->%s = %v, want invalid", name, err)
		}
	}
	nb := start(t, st, c, nil)
	opens(t, st, nb, plain)
}

func TestRekeyRefusesForeignSecret(t *testing.T) {
	// A record that does not open under the old key fails the rekey,
	// which changes nothing.
	st := basetest.NewMemStore()
	old, next := barrier.GenerateMasterKey(), barrier.GenerateMasterKey()
	b := start(t, st, old, nil)
	seed(t, st, b)
	st.Update(ctx, func(tx base.Txn) error { return tx.Set([]byte("s/9"), []byte("not sealed under the store's key")) })
	was := st.Snapshot()
	r := start(t, st, old, next)
	if _, err := r.Rekey(ctx); base.ErrorKind(err) != base.KindUnauthenticated || !bytes.Contains([]byte(base.ErrorMessage(err)), []byte("secret 9")) {
		t.Errorf("Rekey = %v, want unauthenticated naming secret 9", err)
	}
	if !mapsEqual(was, st.Snapshot()) {
		t.Error("a failed rekey changed the store")
	}
}

// start starts a Barrier on st under key, with next (nil for none) as
// the key to rekey to.
func start(t *testing.T, st base.Store, key, next barrier.RootKey) *barrier.Barrier {
	t.Helper()
	return startWith(t, config(st), key, next)
}

// startWith is start with the Config cfg.
func startWith(t *testing.T, cfg barrier.Config, key, next barrier.RootKey) *barrier.Barrier {
	t.Helper()
	b := barrier.New(cfg)
	if _, err := b.Start(ctx, key, next); err != nil {
		t.Fatal(err)
	}
	return b
}

func mapsEqual(a, b map[string][]byte) bool {
	return maps.EqualFunc(a, b, bytes.Equal)
}
