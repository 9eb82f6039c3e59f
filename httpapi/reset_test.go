package httpapi_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/kmstest"
)

// TestPasswordResetStartThrottle: reset requests are throttled per
// address, known or not, and answer 429 past it.
func TestPasswordResetStartThrottle(t *testing.T) {
	clock := kmstest.NewClock()
	e := newEnv(t, withClock(clock), withMailer(kmstest.NewMailbox()))
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
	clock.Advance(16 * time.Minute)
	start("ruth@example.com").want(t, http.StatusOK)
}

// flushMailer is a Mailer that tells whether the answer of the request
// had been flushed when the mail went out.
type flushMailer struct {
	rec     *httptest.ResponseRecorder
	flushed chan bool
}

func (m *flushMailer) Send(_ context.Context, _ kms.Message) error {
	m.flushed <- m.rec.Flushed
	return nil
}

// TestPasswordResetStartFlushesFirst: the answer of a reset request, with
// its Content-Length, is flushed to the connection before the work behind
// it (the look-up and the mail) starts, even when the call is long over.
func TestPasswordResetStartFlushesFirst(t *testing.T) {
	m := &flushMailer{rec: httptest.NewRecorder(), flushed: make(chan bool, 1)}
	e := newEnv(t, withMailer(m))
	e.createUser(t, "ruth")
	r := httptest.NewRequest("POST", "/auth/basic/reset-password-start", strings.NewReader(`{"email":"ruth@example.com"}`))
	r.Header.Set("Content-Type", "application/json")
	e.srv.Config.Handler.ServeHTTP(m.rec, r)
	if m.rec.Code != http.StatusOK {
		t.Fatalf("reset-password-start = %d %s", m.rec.Code, m.rec.Body)
	}
	if got, want := m.rec.Header().Get("Content-Length"), strconv.Itoa(m.rec.Body.Len()); got != want {
		t.Errorf("Content-Length %q, want %s: a flushed answer without it is not whole", got, want)
	}
	select {
	case flushed := <-m.flushed:
		if !flushed {
			t.Error("the reset mail went out before the answer was flushed")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no mail was sent")
	}
}
