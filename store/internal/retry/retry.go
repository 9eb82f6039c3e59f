// Package retry is the wait between attempts of a store's transaction
// that conflicted, shared by the store backends.
package retry

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff waits before attempt number attempt+1 (attempt counts from 0) a
// random duration in [d/2, d), where d is minWait doubled attempt times,
// at most maxWait; or it returns ctx.Err() if ctx is done first.
func Backoff(ctx context.Context, attempt int, minWait, maxWait time.Duration) error {
	d := maxWait
	if attempt < 10 && minWait<<attempt < maxWait {
		d = minWait << attempt
	}
	d = d/2 + rand.N(d/2)
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}
