// Package interrupt is how the service's programs end on a signal: the
// first SIGINT or SIGTERM cancels their context, so that they stop
// cleanly, and a second one, no longer caught, kills the process at
// once.
package interrupt

import (
	"context"
	"os/signal"
	"syscall"
)

// Context returns a context that the first SIGINT or SIGTERM cancels,
// after which the signals are no longer caught; stop releases it.
func Context() (ctx context.Context, stop context.CancelFunc) {
	ctx, stop = signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	return ctx, stop
}
