package httpedge

import (
	"net/http/httptest"
	"strings"
	"testing"
)

func TestBearerToken(t *testing.T) {
	tests := []struct {
		in, token string
		ok        bool
	}{
		{"Bearer abc", "abc", true},
		{"bearer abc", "abc", true},
		{"bEaReR a b", "a b", true},
		{"Bearer", "", false},
		{"Bearer ", "", false},
		{"Bearer  abc", "", false},
		{"Bearer \tabc", "", false},
		{"Bearer\tabc", "", false},
		{"Bearerabc", "", false},
		{"Basic abc", "", false},
		{"Bear abc", "", false},
		{"", "", false},
		{"Bearé abc", "", false},
	}
	for _, tc := range tests {
		token, ok := BearerToken(tc.in)
		if token != tc.token || ok != tc.ok {
			t.Errorf("BearerToken(%q) = %q, %v, want %q, %v", tc.in, token, ok, tc.token, tc.ok)
		}
	}
}

func FuzzBearerToken(f *testing.F) {
	for _, s := range []string{"Bearer abc", "bearer ", "Bearer  x", "", "B", "Bearer\x00x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		token, ok := BearerToken(s)
		if ok && (token == "" || !strings.EqualFold(s[:7], "Bearer ") || s[7:] != token || token[0] == ' ') {
			t.Errorf("BearerToken(%q) = %q, true", s, token)
		}
	})
}

func TestClientAddr(t *testing.T) {
	tests := []struct {
		header string
		hops   int
		values []string // of the header, one a line
		remote string
		want   string
	}{
		{"", 0, nil, "10.1.2.3:4567", "10.1.2.3"},
		{"", 0, []string{"9.9.9.9"}, "10.1.2.3:4567", "10.1.2.3"}, // no header configured: ignored
		// The address the proxy appended, not the one the client sent.
		{"X-Forwarded-For", 0, []string{"9.9.9.9, 10.0.0.1"}, "10.1.2.3:4567", "10.0.0.1"},
		{"X-Forwarded-For", 1, []string{"9.9.9.9,10.0.0.1"}, "10.1.2.3:4567", "10.0.0.1"},
		{"X-Forwarded-For", 1, []string{"9.9.9.9", "10.0.0.1"}, "10.1.2.3:4567", "10.0.0.1"},
		{"X-Forwarded-For", 0, []string{"203.0.113.5"}, "10.1.2.3:4567", "203.0.113.5"},
		// Two trusted proxies: the second from the right.
		{"X-Forwarded-For", 2, []string{"9.9.9.9, 203.0.113.5, 10.0.0.1"}, "10.1.2.3:4567", "203.0.113.5"},
		{"X-Forwarded-For", 2, []string{"9.9.9.9, 203.0.113.5", "10.0.0.1"}, "10.1.2.3:4567", "203.0.113.5"},
		{"X-Forwarded-For", 2, []string{"203.0.113.5"}, "10.1.2.3:4567", "203.0.113.5"}, // entered behind the outer proxy
		{"x-real-ip", 0, []string{"2001:db8::1"}, "10.1.2.3:4567", "2001:db8::1"},
		{"X-Forwarded-For", 0, []string{"not an address"}, "10.1.2.3:4567", "10.1.2.3"},
		{"X-Forwarded-For", 0, []string{"9.9.9.9, not an address"}, "10.1.2.3:4567", "10.1.2.3"},
		{"X-Forwarded-For", 0, []string{"9.9.9.9,"}, "10.1.2.3:4567", "10.1.2.3"},
		{"X-Forwarded-For", 0, []string{""}, "[::1]:80", "::1"},
		{"X-Forwarded-For", 0, nil, "[::1]:80", "::1"},
	}
	for _, tt := range tests {
		e := New(Config[*caller]{ClientIPHeader: tt.header, ClientIPHops: tt.hops})
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = tt.remote
		for _, v := range tt.values {
			r.Header.Add("X-Forwarded-For", v)
			r.Header.Add("X-Real-Ip", v)
		}
		if got := e.ClientAddr(r); got != tt.want {
			t.Errorf("clientAddr(header %q = %q, hops %d, remote %s) = %q, want %q", tt.header, tt.values, tt.hops, tt.remote, got, tt.want)
		}
	}
}
