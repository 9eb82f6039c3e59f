package transit_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/ringkms/kms"
)

// records returns how many activity records of action the trail holds.
func records(t *testing.T, e *env, action string) int {
	t.Helper()
	list, err := e.Service.SearchActivity(e.RootCtx, kms.ActivityFilter{Action: action}, kms.PageRequest{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return len(list.Data)
}

// TestPartialFailureCodeRefused: a partial_failure_response_code that is
// not a 2xx with a body, a 4xx or a 5xx is refused with 400 before any
// item is worked on: no item encrypted, decrypted or rewrapped, no record
// of one. Before, 101 switched the connection's protocol and a code below
// 100 panicked the handler once the batch's items were encrypted and
// recorded.
func TestPartialFailureCodeRefused(t *testing.T) {
	e := newEnv(t, kms.Options{})
	c := e.root
	ct := c.mustWrite(t, "transit/encrypt/pf", map[string]any{"plaintext": b64("x")}).str("ciphertext")
	// One good item and one bad: the override would apply.
	enc := []any{map[string]any{"plaintext": b64("ok")}, map[string]any{"plaintext": "%%%"}}
	dec := []any{map[string]any{"ciphertext": ct}, map[string]any{"ciphertext": "nope"}}
	for _, code := range []any{101, 0, 99, 1, 100, 199, 204, 205, 300, 302, 600, 999, 1000, -1, "101", "abc", true} {
		for _, rt := range []struct {
			path, action string
			batch        []any
			one          map[string]any
		}{
			{"transit/encrypt/pf", "transit.encrypt", enc, map[string]any{"plaintext": b64("ok")}},
			{"transit/decrypt/pf", "transit.decrypt", dec, map[string]any{"ciphertext": ct}},
			{"transit/rewrap/pf", "transit.rewrap", dec, map[string]any{"ciphertext": ct}},
		} {
			before := records(t, e, rt.action)
			a := c.write(t, rt.path, map[string]any{"batch_input": rt.batch, "partial_failure_response_code": code})
			if a.status != 400 || len(a.errors) != 1 || !strings.Contains(a.errors[0], "partial_failure_response_code") {
				t.Errorf("%s batch with partial_failure_response_code %v = %v, want 400 naming it", rt.path, code, a)
			}
			// A call of one item: the code is checked there too.
			one := map[string]any{"partial_failure_response_code": code}
			for k, v := range rt.one {
				one[k] = v
			}
			if a := c.write(t, rt.path, one); a.status != 400 {
				t.Errorf("%s with partial_failure_response_code %v = %v, want 400", rt.path, code, a)
			}
			if after := records(t, e, rt.action); after != before {
				t.Errorf("%s with partial_failure_response_code %v: %d %s records, want none", rt.path, code, after-before, rt.action)
			}
		}
	}
}

// TestPartialFailureCodeServed: a 2xx, 4xx or 5xx is the status of a
// batch of which some items failed, with every item's result.
func TestPartialFailureCodeServed(t *testing.T) {
	e := newEnv(t, kms.Options{})
	c := e.root
	c.mustWrite(t, "transit/keys/pf", nil)
	enc := []any{map[string]any{"plaintext": b64("ok")}, map[string]any{"plaintext": "%%%"}}
	for _, code := range []any{200, 201, 207, 299, 400, 422, 500, 599, "207"} {
		a := c.write(t, "transit/encrypt/pf", map[string]any{"batch_input": enc, "partial_failure_response_code": code})
		items, _ := a.data["batch_results"].([]any)
		if fmt.Sprint(a.status) != fmt.Sprint(code) || len(items) != 2 ||
			!strings.HasPrefix(fmt.Sprint(items[0].(map[string]any)["ciphertext"]), "vault:v1:") || items[1].(map[string]any)["error"] == nil {
			t.Errorf("batch with partial_failure_response_code %v = %v", code, a)
		}
	}
	// Every item good: 200, whatever the override.
	if a := c.write(t, "transit/encrypt/pf", map[string]any{"batch_input": enc[:1], "partial_failure_response_code": 500}); a.status != 200 {
		t.Errorf("good batch with partial_failure_response_code 500 = %v, want 200", a)
	}
}

// TestPartialFailureCodeKeepsConnection: over a real server, a batch
// asking for 101 Switching Protocols is answered 400, and the connection
// goes on serving HTTP: the next request on it is answered as any other.
func TestPartialFailureCodeKeepsConnection(t *testing.T) {
	e := newEnv(t, kms.Options{})
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rd := bufio.NewReader(conn)
	send := func(body map[string]any) *http.Response {
		t.Helper()
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest(http.MethodPost, e.url+"/v1/transit/encrypt/sw", strings.NewReader(string(b)))
		req.Header.Set("X-Vault-Token", e.RootKey)
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "tunnel")
		if err := req.Write(conn); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(rd, req)
		if err != nil {
			t.Fatalf("reading the answer: %v", err)
		}
		var out map[string]any
		json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		return resp
	}
	batch := []any{map[string]any{"plaintext": b64("ok")}, map[string]any{"plaintext": "%%%"}}
	if resp := send(map[string]any{"batch_input": batch, "partial_failure_response_code": 101}); resp.StatusCode != 400 || resp.Header.Get("Upgrade") != "" {
		t.Fatalf("batch with partial_failure_response_code 101 = %s %v, want 400", resp.Status, resp.Header)
	}
	if resp := send(map[string]any{"plaintext": b64("next")}); resp.StatusCode != 200 {
		t.Errorf("the next request on the connection = %s, want 200", resp.Status)
	}
	if n := records(t, e, "transit.encrypt"); n != 1 {
		t.Errorf("%d transit.encrypt records, want the next request's one", n)
	}
}
