package kms_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
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

	first, err := kms.New(st, opts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := first.Bootstrap(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	p, err := first.Authenticate(ctx, b.Secret)
	if err != nil {
		t.Fatal(err)
	}
	u, err := first.CreateUser(kms.WithPrincipal(ctx, p), userInput("ada", nil))
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
