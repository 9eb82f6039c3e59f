package kms_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/pgtest"
	"github.com/ringkms/kms/store/pgstore"
)

// nodeThrottles returns the login throttles of two nodes, over one store
// each (the same one, or two that share a database), with one master key.
// What they log fails the test.
func nodeThrottles(t *testing.T, newStores func(t *testing.T) (kms.Store, kms.Store)) (*kms.LoginThrottles, *kms.LoginThrottles) {
	t.Helper()
	a, b := newStores(t)
	mk := kms.GenerateMasterKey()
	logErr := func(err error, msg string) { t.Errorf("throttle logged %s: %v", msg, err) }
	ta, tb := kms.NewLoginThrottles(a, mk, logErr), kms.NewLoginThrottles(b, mk, logErr)
	t.Cleanup(func() {
		ta.Wait()
		tb.Wait()
	})
	return ta, tb
}

// testThrottlesShared checks that two nodes' throttles over one store
// count together.
func testThrottlesShared(t *testing.T, newStores func(t *testing.T) (kms.Store, kms.Store)) {
	ctx := context.Background()
	now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	attempt := func(t *testing.T, node *kms.LoginThrottles, user, addr string, ok bool) bool {
		t.Helper()
		allowed, err := node.Attempt(ctx, user, addr, now, ok)
		if err != nil {
			t.Fatalf("Attempt(%s, %s) = %v", user, addr, err)
		}
		return allowed
	}

	t.Run("per user", func(t *testing.T) {
		a, b := nodeThrottles(t, newStores)
		for i := range 5 { // 3 through a, 2 through b, from five addresses
			node := a
			if i >= 3 {
				node = b
			}
			if !attempt(t, node, "ada", fmt.Sprintf("192.0.2.%d", i), false) {
				t.Fatalf("failure #%d refused", i+1)
			}
		}
		for name, node := range map[string]*kms.LoginThrottles{"a": a, "b": b} {
			if attempt(t, node, "ada", "198.51.100.1", true) {
				t.Errorf("node %s let the User in after 3+2 failures on two nodes", name)
			}
		}
		if !attempt(t, a, "bob", "198.51.100.1", true) {
			t.Errorf("another User was refused")
		}
	})

	t.Run("concurrent failures all count", func(t *testing.T) {
		// 20 failures from one address, 10 on each node at once, of
		// different Users: each must be counted, or the address is not
		// locked out after them.
		a, b := nodeThrottles(t, newStores)
		const addr = "203.0.113.9"
		var wg sync.WaitGroup
		refused := make(chan int, 20)
		for i := range 20 {
			node := a
			if i%2 == 1 {
				node = b
			}
			wg.Go(func() {
				allowed, err := node.Attempt(ctx, fmt.Sprintf("user%d", i), addr, now, false)
				if err != nil {
					t.Errorf("Attempt #%d = %v", i, err)
				}
				if !allowed {
					refused <- i
				}
			})
		}
		wg.Wait()
		close(refused)
		for i := range refused {
			t.Errorf("failure #%d refused before the address reached its limit", i)
		}
		for name, node := range map[string]*kms.LoginThrottles{"a": a, "b": b} {
			if attempt(t, node, "someone", addr, true) {
				t.Errorf("node %s let the address in after 20 concurrent failures on two nodes", name)
			}
		}
	})

	t.Run("a success on one node clears the count of both", func(t *testing.T) {
		a, b := nodeThrottles(t, newStores)
		for range 4 {
			attempt(t, a, "cy", "", false)
		}
		if !attempt(t, b, "cy", "", true) {
			t.Fatal("login after 4 failures refused")
		}
		for range 4 {
			attempt(t, a, "cy", "", false)
		}
		if !attempt(t, b, "cy", "", true) {
			t.Fatal("login after 4+4 failures with a success between refused")
		}
	})
}

func TestThrottlesSharedBadger(t *testing.T) {
	testThrottlesShared(t, func(t *testing.T) (kms.Store, kms.Store) {
		st := newMemStore(t)
		t.Cleanup(func() { st.Close() })
		return st, st
	})
}

func TestThrottlesSharedPostgres(t *testing.T) {
	testThrottlesShared(t, func(t *testing.T) (kms.Store, kms.Store) {
		url := pgtest.URL(t)
		open := func() kms.Store {
			st, err := pgstore.Open(context.Background(), url, pgstore.Options{})
			if err != nil {
				t.Fatalf("pgstore.Open = %v", err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		}
		return open(), open() // two nodes: two pools on one database
	})
}

func TestThrottleSweep(t *testing.T) {
	st := newMemStore(t)
	t.Cleanup(func() { st.Close() })
	node, _ := nodeThrottles(t, func(*testing.T) (kms.Store, kms.Store) { return st, st })
	ctx := context.Background()
	now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	attempt := func(user string, ok bool) bool {
		t.Helper()
		allowed, err := node.Attempt(ctx, user, "", now, ok)
		if err != nil {
			t.Fatalf("Attempt(%s) = %v", user, err)
		}
		node.Wait()
		return allowed
	}
	counts := func() int {
		n := 0
		err := st.View(ctx, func(tx kms.Txn) error {
			return tx.Scan(kms.ScanOptions{Prefix: kms.ThrottlePrefix(), KeysOnly: true}, func(k, _ []byte) (bool, error) {
				n++
				return true, nil
			})
		})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	attempt("once", false) // the first failure sweeps at once: nothing to sweep
	for range 5 {
		attempt("locked", false)
	}
	if got := counts(); got != 2 {
		t.Fatalf("counts = %d, want 2", got)
	}
	now = now.Add(16 * time.Minute)
	attempt("later", false) // sweeps: "once" is idle, "locked" was locked out within a day
	if got := counts(); got != 2 {
		t.Fatalf("counts after the sweep = %d, want 2 (locked, later)", got)
	}
	for range 5 { // the second lockout lasts twice as long: the sweep kept the first
		attempt("locked", false)
	}
	now = now.Add(16 * time.Minute)
	if attempt("locked", true) {
		t.Fatal("the second lockout ended after 16 minutes, want 30")
	}
	now = now.Add(15 * time.Minute)
	if !attempt("locked", true) {
		t.Fatal("the second lockout did not end after 31 minutes")
	}
	// A success deletes the count; the sweep two days on, the others.
	now = now.Add(48 * time.Hour)
	attempt("last", false)
	if got := counts(); got != 1 {
		t.Fatalf("counts after the sweep two days on = %d, want 1 (last)", got)
	}
}

// refusingStore is a Store whose Update fails while refuse is set.
type refusingStore struct {
	kms.Store
	refuse atomic.Bool
}

func (s *refusingStore) Update(ctx context.Context, fn func(kms.Txn) error) error {
	if s.refuse.Load() {
		return errors.New("the store refuses writes")
	}
	return s.Store.Update(ctx, fn)
}

func TestThrottleStoreRefusesCount(t *testing.T) {
	st := newMemStore(t)
	t.Cleanup(func() { st.Close() })
	refusing := &refusingStore{Store: st}
	mk := kms.GenerateMasterKey()
	var logged atomic.Int32
	node := kms.NewLoginThrottles(refusing, mk, func(error, string) { logged.Add(1) })
	other := kms.NewLoginThrottles(st, mk, func(err error, msg string) { t.Errorf("%s: %v", msg, err) })
	t.Cleanup(func() {
		node.Wait()
		other.Wait()
	})
	ctx := context.Background()
	now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	attempt := func(node *kms.LoginThrottles, user string, ok bool) bool {
		t.Helper()
		allowed, err := node.Attempt(ctx, user, "", now, ok)
		if err != nil {
			t.Fatalf("Attempt(%s) = %v", user, err)
		}
		return allowed
	}

	refusing.refuse.Store(true)
	for i := range 5 {
		if !attempt(node, "ada", false) {
			t.Fatalf("failure #%d refused", i+1)
		}
	}
	if got := logged.Load(); got != 5 {
		t.Errorf("logged %d errors, want one per failure not counted (5)", got)
	}
	if attempt(node, "ada", true) {
		t.Error("the node let the User in after 5 failures that the store did not take")
	}

	// Failures not counted join the store's count with the next one it
	// takes: 3 refused, then 2 taken, lock the User out on every node.
	for range 3 {
		attempt(node, "bob", false)
	}
	refusing.refuse.Store(false)
	for range 2 {
		attempt(node, "bob", false)
	}
	if attempt(other, "bob", true) {
		t.Error("another node let the User in after 3 failures not counted and 2 counted")
	}
}

// keepOpen is a Store that its Close leaves open, for a Service after the
// one that closes it.
type keepOpen struct{ kms.Store }

func (keepOpen) Close() error { return nil }

func TestLoginThrottleSurvivesRestart(t *testing.T) {
	st := newMemStore(t)
	clock := newFixedClock(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
	opts := kms.Options{MasterKey: kms.GenerateMasterKey(), Now: clock.now, Mailer: newFakeMailer(), BaseURL: testBaseURL}
	ctx := context.Background()
	guesser := kms.WithClientAddr(ctx, "192.0.2.200")
	login := func(svc *kms.Service, ctx context.Context, name, pw string) error {
		_, err := svc.Login(ctx, kms.LoginInput{Username: name, Password: pw})
		return err
	}

	e := newEnvOn(t, keepOpen{st}, opts)
	first := e.svc
	u, err := first.CreateUser(e.root, userInput("ada", nil))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		wantKind(t, fmt.Sprintf("failure #%d", i+1), login(first, ctx, "ada", "Wrong-pass1"), kms.KindInvalid)
	}
	for i := range 20 {
		wantKind(t, fmt.Sprintf("guess #%d", i+1), login(first, guesser, fmt.Sprintf("guess%d", i), "Wrong-pass1"), kms.KindInvalid)
	}
	for i := range 5 {
		if _, err := first.StartPasswordReset(ctx, "nobody@example.com"); err != nil {
			t.Fatalf("StartPasswordReset #%d = %v", i+1, err)
		}
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}

	second, err := kms.New(st, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		second.Close()
		st.Close()
	})
	wantKind(t, "Login after a restart", login(second, ctx, "ada", u.Password), kms.KindRateLimited)
	wantKind(t, "Login from the guessing address after a restart", login(second, guesser, "bob", "Wrong-pass1"), kms.KindRateLimited)
	_, err = second.StartPasswordReset(ctx, "NOBODY@example.com")
	wantKind(t, "StartPasswordReset after a restart", err, kms.KindRateLimited)
	clock.advance(16 * time.Minute)
	if err := login(second, ctx, "ada", u.Password); err != nil {
		t.Fatalf("Login after the lockout = %v", err)
	}
}

// TestThrottleKeysHideNames checks that the store holds neither a login
// name, nor its digest, nor the client address in clear.
func TestThrottleKeysHideNames(t *testing.T) {
	e := newUserEnv(t)
	const name, addr = "Typed-Password-123", "192.0.2.77"
	_, err := e.svc.Login(kms.WithClientAddr(context.Background(), addr), kms.LoginInput{Username: name, Password: "Wrong-pass1"})
	wantKind(t, "Login", err, kms.KindInvalid)
	_, err = e.svc.StartPasswordReset(kms.WithClientAddr(context.Background(), addr), "Secret.Person@example.com")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(strings.ToLower(name)))
	for _, s := range []string{name, strings.ToLower(name), hex.EncodeToString(sum[:]), addr, "secret.person", "Secret.Person"} {
		if storeHolds(t, e.st, s) {
			t.Errorf("the store holds %q", s)
		}
	}
	if !storeHolds(t, e.st, string(kms.ThrottlePrefix())) {
		t.Errorf("the store holds no throttle count")
	}
}

// throttleOps is a Store that counts the transactions that read or write
// throttle counts.
type throttleOps struct {
	kms.Store
	reads, writes atomic.Int32
}

// opsTxn notes whether a transaction touched a throttle count.
type opsTxn struct {
	kms.Txn
	touched bool
}

func isCount(key []byte) bool { return strings.HasPrefix(string(key), string(kms.ThrottlePrefix())) }

func (t *opsTxn) Get(key []byte) ([]byte, error) {
	t.touched = t.touched || isCount(key)
	return t.Txn.Get(key)
}

func (t *opsTxn) Set(key, value []byte) error {
	t.touched = t.touched || isCount(key)
	return t.Txn.Set(key, value)
}

func (t *opsTxn) Delete(key []byte) error {
	t.touched = t.touched || isCount(key)
	return t.Txn.Delete(key)
}

func (s *throttleOps) View(ctx context.Context, fn func(kms.Txn) error) error {
	return s.Store.View(ctx, func(tx kms.Txn) error {
		ot := &opsTxn{Txn: tx}
		err := fn(ot)
		if ot.touched {
			s.reads.Add(1)
		}
		return err
	})
}

func (s *throttleOps) Update(ctx context.Context, fn func(kms.Txn) error) error {
	touched := false
	err := s.Store.Update(ctx, func(tx kms.Txn) error {
		ot := &opsTxn{Txn: tx}
		err := fn(ot)
		touched = ot.touched
		return err
	})
	if touched {
		s.writes.Add(1)
	}
	return err
}

// TestThrottleStoreCost checks what the throttles cost a login in store
// transactions: one read, and a write only for a failure or for a success
// that clears a count.
func TestThrottleStoreCost(t *testing.T) {
	st := &throttleOps{Store: newMemStore(t)}
	clock := newFixedClock(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
	e := newEnvOn(t, st, kms.Options{MasterKey: kms.GenerateMasterKey(), Now: clock.now})
	res, err := e.svc.CreateUser(e.root, userInput("ada", nil))
	if err != nil {
		t.Fatal(err)
	}
	ctx := kms.WithClientAddr(context.Background(), "192.0.2.1")
	tests := []struct {
		name                  string
		password              string
		wantReads, wantWrites int32
	}{
		{"success", res.Password, 1, 0},
		{"failure", "Wrong-pass1", 1, 1},
		{"success that clears", res.Password, 1, 1},
		{"success again", res.Password, 1, 0},
	}
	for _, tt := range tests {
		st.reads.Store(0)
		st.writes.Store(0)
		_, err := e.svc.Login(ctx, kms.LoginInput{Username: "ada", Password: tt.password})
		if (err == nil) != (tt.password == res.Password) {
			t.Fatalf("%s: Login = %v", tt.name, err)
		}
		if r, w := st.reads.Load(), st.writes.Load(); r != tt.wantReads || w != tt.wantWrites {
			t.Errorf("%s: %d reads and %d writes of throttle counts, want %d and %d", tt.name, r, w, tt.wantReads, tt.wantWrites)
		}
	}
}
