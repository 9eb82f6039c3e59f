package httpapi_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestPasswordResetStartThrottle: reset requests are throttled per
// address, known or not, and answer 429 past it.
func TestPasswordResetStartThrottle(t *testing.T) {
	clock := newTestClock()
	e := newEnv(t, withClock(clock), withMailer(newFakeMailer()))
	e.createUser(t, "ruth")
	start := func(email string) reply {
		return e.do(t, "POST", "/auth/basic/reset-password-start", "", map[string]any{"email": email})
	}
	var limited [][]byte
	for _, email := range []string{"ruth@example.com", "nobody@example.com"} {
		for range 5 {
			start(email).want(t, http.StatusOK)
		}
		r := start(email)
		if msg := r.wantError(t, http.StatusTooManyRequests, "rate_limited"); !strings.Contains(msg, "try again after") {
			t.Errorf("429 message = %q, want when to retry", msg)
		}
		limited = append(limited, r.body)
	}
	if !bytes.Equal(limited[0], limited[1]) {
		t.Errorf("429 answers differ for a known and an unknown address: %s and %s", limited[0], limited[1])
	}
	clock.advance(16 * time.Minute)
	start("ruth@example.com").want(t, http.StatusOK)
}
