package kms_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/kmstest"
)

// from is a context whose client address is addr.
func from(addr string) context.Context { return kms.WithClientAddr(context.Background(), addr) }

// TestClientAddrIPv6Prefix: the rate limit per address counts an IPv6
// client by its prefix (a /64 unless Options.IPv6Prefix says otherwise),
// an IPv4 client by its address, and an IPv4-mapped IPv6 address as its
// IPv4 address: addresses of one prefix share a bucket, and another
// prefix has its own.
func TestClientAddrIPv6Prefix(t *testing.T) {
	for _, c := range []struct {
		prefix int      // Options.IPv6Prefix
		share  []string // addresses that share one bucket, the first one's
		own    []string // addresses that each have a bucket of their own
	}{
		{0, []string{"2001:db8:1:2::1", "2001:db8:1:2:ffff:ffff:ffff:fffe", "2001:DB8:1:2::abcd", "2001:db8:1:2::7%eth0"},
			[]string{"2001:db8:1:3::1", "2001:db8:2:2::1", "192.0.2.1"}},
		{0, []string{"192.0.2.1", "::ffff:192.0.2.1"}, []string{"192.0.2.2", "::ffff:192.0.2.3", "::192.0.2.1"}},
		{48, []string{"2001:db8:1:2::1", "2001:db8:1:ffff::1"}, []string{"2001:db8:2::1"}},
		{128, []string{"2001:db8:1:2::1", "2001:db8:1:2:0:0:0:1"}, []string{"2001:db8:1:2::2", "2001:db8:1:2::3"}},
	} {
		t.Run(fmt.Sprintf("prefix %d, %s", c.prefix, c.share[0]), func(t *testing.T) {
			clock := kmstest.ClockAt(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
			e := newEnvOn(t, kmstest.MemoryStore(t), kms.Options{MasterKey: kms.GenerateMasterKey(), Now: clock.Now, IPv6Prefix: c.prefix,
				RateLimits: kms.RateLimits{PerAddr: kms.Rate{PerSecond: 1, Burst: 1}}})
			if err := e.svc.Admit(from(c.share[0]), nil); err != nil {
				t.Fatalf("Admit(%s) = %v", c.share[0], err)
			}
			for _, a := range c.share[1:] {
				err := e.svc.Admit(from(a), nil)
				wantKind(t, fmt.Sprintf("Admit(%s) after a call from %s", a, c.share[0]), err, kms.KindRateLimited)
			}
			for _, a := range c.own {
				if err := e.svc.Admit(from(a), nil); err != nil {
					t.Errorf("Admit(%s), a bucket of its own = %v", a, err)
				}
			}
		})
	}
}

// TestClientAddrIPv6PrefixInvalid: Options.IPv6Prefix is 0 (the default)
// or 1 to 128.
func TestClientAddrIPv6PrefixInvalid(t *testing.T) {
	for _, p := range []int{-1, 129, 256} {
		_, err := kms.New(kmstest.MemoryStore(t), kms.Options{MasterKey: kms.GenerateMasterKey(), IPv6Prefix: p})
		wantKind(t, fmt.Sprintf("New(IPv6Prefix %d)", p), err, kms.KindInvalid)
	}
}

// TestClientAddrIPv6PrefixThrottles: the login and password-reset
// throttles of a client address count every address of its /64 as one:
// failures spread over addresses of one /64 lock the whole /64 out, and
// another /64 is not locked out.
func TestClientAddrIPv6PrefixThrottles(t *testing.T) {
	e := newUserEnv(t)
	addr := func(i int) string { return fmt.Sprintf("2001:db8:7:7:%x::1", i+1) }
	for i := range 20 {
		_, err := e.svc.Login(from(addr(i)), kms.LoginInput{Username: fmt.Sprintf("guess%d", i), Password: "Wrong-pass1"})
		wantKind(t, fmt.Sprintf("failed login #%d", i+1), err, kms.KindInvalid)
	}
	_, err := e.svc.Login(from("2001:db8:7:7:abcd::9"), kms.LoginInput{Username: "another", Password: "Wrong-pass1"})
	wantKind(t, "Login from another address of the /64", err, kms.KindRateLimited)
	_, err = e.svc.Login(from("2001:db8:7:8::1"), kms.LoginInput{Username: "another", Password: "Wrong-pass1"})
	wantKind(t, "Login from another /64", err, kms.KindInvalid)

	for i := range 20 {
		if _, err := e.svc.StartPasswordReset(from(addr(i)), fmt.Sprintf("nobody%d@example.com", i)); err != nil {
			t.Fatalf("StartPasswordReset #%d = %v", i+1, err)
		}
	}
	_, err = e.svc.StartPasswordReset(from("2001:db8:7:7:abcd::9"), "someone@example.com")
	wantKind(t, "StartPasswordReset from another address of the /64", err, kms.KindRateLimited)
	if _, err := e.svc.StartPasswordReset(from("2001:db8:7:8::1"), "someone@example.com"); err != nil {
		t.Fatalf("StartPasswordReset from another /64 = %v", err)
	}
}
