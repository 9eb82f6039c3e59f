package clientaddr

import (
	"net/http"
	"testing"
)

func TestForwarded(t *testing.T) {
	tests := []struct {
		name  string
		lines []string
		hops  int
		want  string // "" for nil
	}{
		{"one proxy", []string{"198.51.100.1, 203.0.113.7"}, 1, "203.0.113.7"},
		{"two proxies", []string{"198.51.100.1, 203.0.113.7, 10.0.0.1"}, 2, "203.0.113.7"},
		{"across lines", []string{"198.51.100.1", "203.0.113.7", "10.0.0.1"}, 2, "203.0.113.7"},
		{"shorter than the hops", []string{"203.0.113.7, 10.0.0.1"}, 3, "203.0.113.7"},
		{"spaces", []string{"  203.0.113.7  "}, 1, "203.0.113.7"},
		{"IPv6", []string{"2001:db8::1"}, 1, "2001:db8::1"},
		{"not an address", []string{"203.0.113.7, unknown"}, 1, ""},
		{"empty entry", []string{"203.0.113.7,"}, 1, ""},
		{"no header", nil, 1, ""},
		{"no hops", []string{"203.0.113.7"}, 0, ""},
	}
	for _, tt := range tests {
		ip := Forwarded(tt.lines, tt.hops)
		got := ""
		if ip != nil {
			got = ip.String()
		}
		if got != tt.want {
			t.Errorf("%s: Forwarded(%q, %d) = %q, want %q", tt.name, tt.lines, tt.hops, got, tt.want)
		}
	}
}

func TestOf(t *testing.T) {
	r, err := http.NewRequest("GET", "/", nil)
	if err != nil {
		t.Fatal(err)
	}
	r.RemoteAddr = "192.0.2.1:4321"
	r.Header.Set("X-Forwarded-For", "198.51.100.1, 203.0.113.7")
	for _, tt := range []struct {
		name, header, remote, want string
	}{
		{"no header trusted", "", "192.0.2.1:4321", "192.0.2.1"},
		{"the header", "X-Forwarded-For", "192.0.2.1:4321", "203.0.113.7"},
		{"a header not sent", "X-Real-Ip", "192.0.2.1:4321", "192.0.2.1"},
		{"no port", "", "192.0.2.1", ""},
	} {
		r.RemoteAddr = tt.remote
		if got := Of(r, tt.header, 1); got != tt.want {
			t.Errorf("%s: Of = %q, want %q", tt.name, got, tt.want)
		}
	}
}
