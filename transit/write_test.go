package transit

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/julienschmidt/httprouter"
	"github.com/rs/zerolog"

	"github.com/ringkms/kms/internal/httpedge"
	"github.com/ringkms/kms/kmstest"
)

// logged serves one request with h and returns its answer and its log
// line.
func logged(t *testing.T, logs *kmstest.LogBuffer, h http.Handler, path string) (*httptest.ResponseRecorder, map[string]any) {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, path, nil))
	id := w.Header().Get(httpedge.RequestIDHeader)
	for _, l := range logs.Lines(t) {
		if l["req_id"] == id {
			return w, l
		}
	}
	t.Fatalf("no log line of request %q:\n%s", id, logs.String())
	return nil, nil
}

// testAPI is an api with its log.
func testAPI() (*api, *kmstest.LogBuffer) {
	logs := &kmstest.LogBuffer{}
	log := zerolog.New(logs)
	return newAPI(nil, Options{Logger: &log}), logs
}

// TestWriteFinalStatusOnly: an answer whose status is not a final one
// (200 to 599) is a programming error answered 500, never written: net/http
// panics on a status below 100, and takes 101 for a switch of protocols.
func TestWriteFinalStatusOnly(t *testing.T) {
	a, logs := testAPI()
	for _, status := range []int{-1, 0, 1, 99, 100, 101, 103, 199, 600, 999, 1000} {
		w, line := logged(t, logs, a.edge.Log(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			answers.Write(w, r, status, envelope{Data: map[string]any{"batch_results": []any{}}})
		})), "/v1/transit/encrypt/k")
		var body errorsBody
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || w.Code != http.StatusInternalServerError ||
			len(body.Errors) != 1 || body.Errors[0] != "internal error" {
			t.Errorf("write(%d) = %d %q, want 500 internal error", status, w.Code, w.Body)
		}
		if line["status"] != float64(http.StatusInternalServerError) || line["error"] == nil {
			t.Errorf("write(%d): the log line gets status %v, error %v", status, line["status"], line["error"])
		}
	}
	for _, status := range []int{200, 207, 400, 599} {
		w, _ := logged(t, logs, a.edge.Log(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			answers.Write(w, r, status, envelope{})
		})), "/v1/transit/encrypt/k")
		if w.Code != status {
			t.Errorf("write(%d) = %d", status, w.Code)
		}
	}
}

// TestPanicAfterAnswer: a handler that panics after its answer was
// written leaves that answer whole (no second status, no second body) and
// its status in the log line; one that panics before answers 500, in
// Vault's shape, with the panic in the log line.
func TestPanicAfterAnswer(t *testing.T) {
	a, logs := testAPI()
	h := a.edge.Handler([]httpedge.Route{
		{Method: http.MethodPost, Path: "/transit/encrypt/:name", Public: true, Unlimited: true, Handle: func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
			if ps.ByName("name") == "after" {
				a.writeAnswer(w, r, &answer{status: http.StatusMultiStatus, data: map[string]any{"batch_results": []any{"x"}}})
			}
			panic("boom")
		}},
	})
	w, line := logged(t, logs, h, "/v1/transit/encrypt/after")
	dec := json.NewDecoder(strings.NewReader(w.Body.String()))
	var first envelope
	if err := dec.Decode(&first); err != nil || w.Code != http.StatusMultiStatus || dec.More() {
		t.Errorf("answer then panic = %d %q, want the answer alone", w.Code, w.Body)
	}
	if line["status"] != float64(http.StatusMultiStatus) {
		t.Errorf("the log line gets status %v, want the answer's", line["status"])
	}

	w, line = logged(t, logs, h, "/v1/transit/encrypt/before")
	if e, _ := line["error"].(string); w.Code != http.StatusInternalServerError || w.Body.String() != "{\"errors\":[\"internal error\"]}\n" ||
		!strings.Contains(e, "panic: boom") {
		t.Errorf("panic before the answer = %d %q, log line %v", w.Code, w.Body, line)
	}
}
