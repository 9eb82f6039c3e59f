package pgstore

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/netproxy"
	"github.com/ringkms/kms/internal/pgtest"
)

// waitNil calls fn every 50 ms until it returns nil, and fails t with
// fn's last error when it has not within timeout.
func waitNil(t testing.TB, timeout time.Duration, what string, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := fn()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s = %v, want nil within %v", what, err, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestWritableLive(t *testing.T) {
	s := openStore(t, pgtest.URL(t), Options{})
	for i := range 3 {
		if err := s.Writable(t.Context()); err != nil {
			t.Fatalf("Writable #%d = %v, want nil", i+1, err)
		}
		time.Sleep(writableTTL) // the next call asks the database again
	}
}

// TestUnreachable: a database that cannot be reached is Unavailable, for
// Open, Writable and every call, and the Store recovers when it can be
// reached again. No message carries the URL's password.
func TestUnreachable(t *testing.T) {
	const password = "hunter2-secret-password"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := ln.Addr().String()
	ln.Close()
	_, err = Open(t.Context(), "postgres://kms:"+password+"@"+closedPort+"/kms?sslmode=disable&connect_timeout=5", Options{})
	wantKind(t, "Open(nothing listening)", err, kms.KindUnavailable)
	if err != nil && strings.Contains(err.Error(), password) {
		t.Errorf("Open(nothing listening) = %q, which contains the password", err)
	}

	dbURL := pgtest.URL(t)
	p, viaProxy := pgtest.Proxy(t, dbURL)
	u := strings.Replace(viaProxy, "kms@", "kms:"+password+"@", 1) // trust auth ignores it
	s := openStore(t, u, Options{QueryTimeout: 5 * time.Second})
	setKey(t, s, "k", "v")
	if err := s.Writable(t.Context()); err != nil {
		t.Fatalf("Writable = %v, want nil", err)
	}

	p.SetMode(netproxy.Refuse)
	time.Sleep(writableTTL) // the last answer no longer counts
	checks := []struct {
		name string
		err  func() error
	}{
		{"Writable", func() error { return s.Writable(t.Context()) }},
		{"View", func() error {
			return s.View(t.Context(), func(tx kms.Txn) error { _, err := tx.Get([]byte("k")); return err })
		}},
		{"Update", func() error {
			return s.Update(t.Context(), func(tx kms.Txn) error { return tx.Set([]byte("k2"), []byte("v")) })
		}},
		{"Append", func() error { return s.Trail().Append([][]byte{[]byte("r")}) }},
		{"Append again", func() error { return s.Trail().Append([][]byte{[]byte("r")}) }},
	}
	for _, c := range checks {
		err := c.err()
		wantKind(t, c.name+" with the database unreachable", err, kms.KindUnavailable)
		if err != nil && strings.Contains(err.Error(), password) {
			t.Errorf("%s = %q, which contains the password", c.name, err)
		}
	}
	if n := s.Trail().Len(); n != 0 {
		t.Errorf("Trail().Len() after failed appends = %d, want 0", n)
	}

	p.SetMode(netproxy.Pass)
	waitNil(t, 10*time.Second, "Writable after the database came back", func() error { return s.Writable(t.Context()) })
	setKey(t, s, "k2", "v2")
	if v, err := getKey(t, s, "k2"); err != nil || string(v) != "v2" {
		t.Errorf("Get(k2) after the database came back = %q, %v; want %q, nil", v, err, "v2")
	}
	if err := s.Trail().Append([][]byte{[]byte("after")}); err != nil {
		t.Errorf("Append after the database came back = %v, want nil", err)
	}
	var recs []string
	s.Trail().Scan(1, func(_ uint64, rec []byte) (bool, error) { recs = append(recs, string(rec)); return true, nil })
	if !slices.Equal(recs, []string{"after"}) {
		t.Errorf("trail = %q, want %q", recs, []string{"after"})
	}
}

// TestConnectionLost: a connection that breaks in a View is Unavailable;
// in an Update, before its commit, the Update runs again on a new one.
func TestConnectionLost(t *testing.T) {
	p, dbURL := pgtest.Proxy(t, pgtest.URL(t))
	s := openStore(t, dbURL, Options{})
	setKey(t, s, "k", "v")

	var getErr error
	err := s.View(t.Context(), func(tx kms.Txn) error {
		if _, err := tx.Get([]byte("k")); err != nil {
			return err
		}
		p.Break()
		_, getErr = tx.Get([]byte("k"))
		return getErr
	})
	wantKind(t, "Get in a View after its connection broke", getErr, kms.KindUnavailable)
	wantKind(t, "View whose connection broke", err, kms.KindUnavailable)

	runs := 0
	err = s.Update(t.Context(), func(tx kms.Txn) error {
		runs++
		if _, err := tx.Get([]byte("k")); err != nil {
			return err
		}
		if runs == 1 {
			p.Break()
		}
		if _, err := tx.Get([]byte("k")); err != nil {
			return err
		}
		return tx.Set([]byte("k"), []byte(fmt.Sprint(runs)))
	})
	if err != nil || runs != 2 {
		t.Errorf("Update whose connection broke in its first run = %v after %d runs, want nil after 2", err, runs)
	}
	if v, err := getKey(t, s, "k"); err != nil || string(v) != "2" {
		t.Errorf("Get(k) = %q, %v; want %q, nil", v, err, "2")
	}
}
