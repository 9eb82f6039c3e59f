package kms_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/kmstest"
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
		st := kmstest.MemoryStore(t)
		return st, st
	})
}

func TestThrottlesSharedPostgres(t *testing.T) {
	testThrottlesShared(t, func(t *testing.T) (kms.Store, kms.Store) {
		open := pgOpener(t)
		return open(), open() // two nodes: two pools on one database
	})
}

// keepOpen is a Store that its Close leaves open, for a Service after the
// one that closes it.
type keepOpen struct{ kms.Store }

func (keepOpen) Close() error { return nil }

func TestLoginThrottleSurvivesRestart(t *testing.T) {
	st := kmstest.MemoryStore(t)
	clock := kmstest.ClockAt(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
	opts := kms.Options{MasterKey: kms.GenerateMasterKey(), Now: clock.Now, Mailer: kmstest.NewMailbox(), BaseURL: testBaseURL}
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

	second := serviceOn(t, st, opts)
	wantKind(t, "Login after a restart", login(second, ctx, "ada", u.Password), kms.KindRateLimited)
	wantKind(t, "Login from the guessing address after a restart", login(second, guesser, "bob", "Wrong-pass1"), kms.KindRateLimited)
	_, err = second.StartPasswordReset(ctx, "NOBODY@example.com")
	wantKind(t, "StartPasswordReset after a restart", err, kms.KindRateLimited)
	clock.Advance(16 * time.Minute)
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
	st := &throttleOps{Store: kmstest.MemoryStore(t)}
	clock := kmstest.ClockAt(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
	e := newEnvOn(t, st, kms.Options{MasterKey: kms.GenerateMasterKey(), Now: clock.Now})
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
