package kms_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/kmstest"
)

// TestAdmitRest: a request admitted for one call before its body was
// read (Admit) and found to make n calls takes the n-1 others of every
// bucket (AdmitRest), all together or not at all; past a burst it is
// Invalid, counting the call already taken; n of 1 takes nothing more.
func TestAdmitRest(t *testing.T) {
	ctx := context.Background()
	clock := kmstest.ClockAt(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	e := newEnvOn(t, mustMemStore(t), kms.Options{MasterKey: kms.GenerateMasterKey(), Now: clock.Now,
		RateLimits: kms.RateLimits{
			PerAPIKey: kms.Rate{PerSecond: 5, Burst: 5},
			PerAddr:   kms.Rate{PerSecond: 0.001, Burst: 12},
		}})
	check := func(what string, err error, want kms.Kind) *kms.Error {
		t.Helper()
		if got := kms.ErrorKind(err); got != want {
			t.Fatalf("%s = %v, want %v", what, err, want)
		}
		return kms.AsError(err)
	}
	a := kms.PrincipalFrom(e.as(t, kms.Flags{"*": true}))
	from := kms.WithClientAddr(ctx, "192.0.2.7")

	// A request of 5 calls: the address's first before the credential is
	// known, the credential's first before the body is read, the rest.
	check("the address's first", e.svc.Admit(from, nil), kms.KindNone)    // address 11
	check("the credential's first", e.svc.Admit(from, a), kms.KindNone)   // key 4, address 11
	check("the 4 others of 5", e.svc.AdmitRest(from, a, 5), kms.KindNone) // key 0, address 7
	check("a call of the empty credential", e.svc.Admit(ctx, a), kms.KindRateLimited)
	check("one call: nothing more", e.svc.AdmitRest(ctx, a, 1), kms.KindNone)
	for i := range 7 {
		check("the address's call "+string(rune('1'+i))+" of 7 left", e.svc.Admit(from, nil), kms.KindNone)
	}
	check("the address's call past 5 of the request and 7", e.svc.Admit(from, nil), kms.KindRateLimited)

	// Past the burst, the first call counted: Invalid, and the rest of
	// the bucket untouched.
	clock.Advance(time.Second)                                 // key 5
	check("the first of 6", e.svc.Admit(ctx, a), kms.KindNone) // key 4
	if err := check("the 5 others of 6, burst 5", e.svc.AdmitRest(ctx, a, 6), kms.KindInvalid); !strings.Contains(err.Message, "burst of 5") {
		t.Fatalf("6 calls, burst 5: %q, want the burst named", err.Message)
	}
	check("the 4 others of 5 after 6 were refused", e.svc.AdmitRest(ctx, a, 5), kms.KindNone) // key 0

	// Short: RateLimited until the bucket holds the whole request again,
	// and nothing taken.
	clock.Advance(600 * time.Millisecond)                      // key 3
	check("the first of 4", e.svc.Admit(ctx, a), kms.KindNone) // key 2
	if err := check("the 3 others of 4 with 2 in the bucket", e.svc.AdmitRest(ctx, a, 4), kms.KindRateLimited); err.RetryAfter != time.Second {
		t.Fatalf("3 others of 4 with 2: RetryAfter = %v, want 1s", err.RetryAfter)
	}
	check("the 2 others of 3 after 4 were refused", e.svc.AdmitRest(ctx, a, 3), kms.KindNone) // key 0
	check("a call after", e.svc.Admit(ctx, a), kms.KindRateLimited)
}
