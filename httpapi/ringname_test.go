package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestRingNameShapedLikeSecret: POST /ks/keyrings and POST /asym/keyrings
// with a name shaped like a credential (here an API key's secret, pasted
// in place of a name) answer 400 with a message that says why and does
// not quote the name, make no ring, and leave the name in no log line
// and no activity record.
func TestRingNameShapedLikeSecret(t *testing.T) {
	e := newEnv(t, withServiceLog)
	secret, _ := e.apiKey(t, "keyring.docs.read")
	for _, path := range []string{"/ks/keyrings", "/asym/keyrings"} {
		r := e.do(t, "POST", path, e.root, map[string]any{"name": secret})
		msg := r.wantError(t, http.StatusBadRequest, "invalid")
		if strings.Contains(string(r.body), secret) || !strings.Contains(msg, "credential") {
			t.Errorf("POST %s with a secret as the name answered %s, want a message that says why and does not quote it", path, r.body)
		}
	}
	e.do(t, "POST", "/ks/keyrings", e.root, map[string]any{"name": strings.Repeat("n", 31)}).want(t, http.StatusOK)
	trail := e.do(t, "POST", "/auth/search/activity?limit=10000", e.root, map[string]any{}).want(t, http.StatusOK)
	if strings.Contains(string(trail.body), secret) {
		t.Error("an activity record holds the secret given as a ring's name")
	}
	if strings.Contains(e.logs.String(), secret) {
		t.Error("the log holds the secret given as a ring's name")
	}
}
