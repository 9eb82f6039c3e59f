package httpapi_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/ringkms/kms/httpapi"
	"github.com/ringkms/kms/kmstest"
)

// TestForwardedForIsNotTheClients: behind a proxy that appends to
// X-Forwarded-For, the client writes the start of the list; the address
// the login throttle counts is the one the proxy appended, so a client
// that writes a new address each time is throttled all the same.
func TestForwardedForIsNotTheClients(t *testing.T) {
	e := newEnv(t)
	srv, _ := kmstest.Serve(t, httpapi.New(e.svc, httpapi.Options{ClientIPHeader: "X-Forwarded-For"}), "")
	login := func(name, forwardedFor string) int {
		t.Helper()
		body := fmt.Sprintf(`{"username": %q, "password": "Wrong-Pass-1"}`, name)
		r, err := http.NewRequest("POST", srv.URL+"/auth/basic/login", bytes.NewReader([]byte(body)))
		if err != nil {
			t.Fatal(err)
		}
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("X-Forwarded-For", forwardedFor)
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	const proxySaw = "203.0.113.7"
	for i := range 20 {
		if got := login(fmt.Sprintf("guess%d", i), fmt.Sprintf("198.51.100.%d, %s", i, proxySaw)); got != http.StatusBadRequest {
			t.Fatalf("failed login %d = %d, want 400", i+1, got)
		}
	}
	if got := login("guess20", "192.0.2.200, "+proxySaw); got != http.StatusTooManyRequests {
		t.Errorf("login after 20 failures from %s, with a new address written before it = %d, want 429", proxySaw, got)
	}
	if got := login("guess21", proxySaw+", 203.0.113.8"); got != http.StatusBadRequest {
		t.Errorf("login from another address = %d, want 400", got)
	}
}
