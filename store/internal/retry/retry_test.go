package retry

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestBackoffBounds(t *testing.T) {
	for attempt, want := range []time.Duration{2 * time.Millisecond, 4 * time.Millisecond, 8 * time.Millisecond, 8 * time.Millisecond} {
		start := time.Now()
		if err := Backoff(context.Background(), attempt, 2*time.Millisecond, 8*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if got := time.Since(start); got < want/2 {
			t.Errorf("Backoff(attempt %d) waited %v, want at least %v", attempt, got, want/2)
		}
	}
}

func TestBackoffContextDone(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Backoff(ctx, 0, time.Hour, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("Backoff on a canceled context = %v, want context.Canceled", err)
	}
}
