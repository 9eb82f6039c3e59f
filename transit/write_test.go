package transit

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// stateRequest is a request with the state logRequests gives it.
func stateRequest() (*http.Request, *reqState) {
	st := &reqState{id: "test", status: http.StatusOK}
	r := httptest.NewRequest(http.MethodPost, "/v1/transit/encrypt/k", nil)
	return r.WithContext(context.WithValue(r.Context(), stateKey{}, st)), st
}

// TestWriteFinalStatusOnly: an answer whose status is not a final one
// (200 to 599) is a programming error answered 500, never written: net/http
// panics on a status below 100, and takes 101 for a switch of protocols.
func TestWriteFinalStatusOnly(t *testing.T) {
	a := &api{log: zerolog.Nop()}
	for _, status := range []int{-1, 0, 1, 99, 100, 101, 103, 199, 600, 999, 1000} {
		w := httptest.NewRecorder()
		r, st := stateRequest()
		a.write(w, r, status, envelope{Data: map[string]any{"batch_results": []any{}}})
		var body errorsBody
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || w.Code != http.StatusInternalServerError ||
			len(body.Errors) != 1 || body.Errors[0] != "internal error" {
			t.Errorf("write(%d) = %d %q, want 500 internal error", status, w.Code, w.Body)
		}
		if st.status != http.StatusInternalServerError || st.err == nil {
			t.Errorf("write(%d): the log line gets status %d, error %v", status, st.status, st.err)
		}
	}
	for _, status := range []int{200, 207, 400, 599} {
		w := httptest.NewRecorder()
		r, _ := stateRequest()
		a.write(w, r, status, envelope{})
		if w.Code != status {
			t.Errorf("write(%d) = %d", status, w.Code)
		}
	}
}

// TestPanicAfterAnswer: a handler that panics after its answer was
// written leaves that answer whole (no second status, no second body) and
// its panic in the log line; one that panics before answers 500.
func TestPanicAfterAnswer(t *testing.T) {
	a := &api{log: zerolog.Nop()}
	w := httptest.NewRecorder()
	r, st := stateRequest()
	a.writeAnswer(w, r, &answer{status: http.StatusMultiStatus, data: map[string]any{"batch_results": []any{"x"}}})
	a.panicked(w, r, "after the answer")
	dec := json.NewDecoder(strings.NewReader(w.Body.String()))
	var first envelope
	if err := dec.Decode(&first); err != nil || w.Code != http.StatusMultiStatus || dec.More() {
		t.Errorf("answer then panic = %d %q, want the answer alone", w.Code, w.Body)
	}
	if st.err == nil || !strings.Contains(st.err.Error(), "after the answer") || st.status != http.StatusMultiStatus {
		t.Errorf("the log line gets status %d, error %v; want the answer's and the panic", st.status, st.err)
	}

	w = httptest.NewRecorder()
	r, st = stateRequest()
	a.panicked(w, r, "before the answer")
	if w.Code != http.StatusInternalServerError || !strings.Contains(w.Body.String(), "internal error") || st.err == nil {
		t.Errorf("panic before the answer = %d %q, error %v", w.Code, w.Body, st.err)
	}
}
