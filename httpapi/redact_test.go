package httpapi

import "testing"

func TestRedactPath(t *testing.T) {
	const (
		apiKey = "rk_0123456789abcdefghijklmnopqrstuvwxyzABCDEFG"
		token  = "rkt_0123456789abcdefghijklmnopqrstuvwxyzABCDEFG"
		// A bootstrap API key may have any form of 32 characters or more.
		bootstrap = "my-own-bootstrap-secret-of-40-chars-long"
		id        = "019cb73d32189ac086319826cec5dd06"
	)
	tests := []struct{ path, want string }{
		{"/ks/encrypt", "/ks/encrypt"},
		{"/", "/"},
		{"", ""},
		{"/ks/keyrings/payments/keys/" + id, "/ks/keyrings/payments/keys/" + id},
		{"/auth/users/ada@example.com", "/auth/users/ada@example.com"},
		{"/auth/apikey", "/auth/apikey"},
		{"/auth/apikey/" + apiKey, "/auth/apikey/<redacted>"},
		{"/auth/apikey/" + apiKey + "/", "/auth/apikey/<redacted>/<redacted>"},
		{"/auth/apikey/" + id + "/props", "/auth/apikey/<redacted>/<redacted>"},
		{"/auth/APIKEYS/short", "/auth/APIKEYS/<redacted>"},
		{"/auth/apikeyid/whatever", "/auth/apikeyid/<redacted>"},
		{"/auth/users/" + token, "/auth/users/<redacted>"},
		{"/" + token + "/x", "/<redacted>/x"},
		{"/ks/keyrings/RKR_short", "/ks/keyrings/<redacted>"},
		{"/ks/keyrings/" + bootstrap + "/keys", "/ks/keyrings/<redacted>/keys"},
		{"/rki_", "/<redacted>"},
	}
	redactPath := newAPI(nil, Options{}).edge.RedactPath
	for _, tt := range tests {
		if got := redactPath(tt.path); got != tt.want {
			t.Errorf("redactPath(%q) = %q, want %q", tt.path, got, tt.want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { redactPath("/ks/keyrings/payments/keys/" + id) }); n != 0 {
		t.Errorf("redactPath of a path with nothing to hide: %v allocations, want 0", n)
	}
}
