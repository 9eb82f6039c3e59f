package reqlog

import (
	"bytes"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

func TestNewID(t *testing.T) {
	shape := regexp.MustCompile(`^[0-9a-v]{20}$`)
	seen := map[string]bool{}
	for range 1000 {
		id := NewID()
		if !shape.MatchString(id) {
			t.Fatalf("NewID() = %q, want 20 characters of lower-case base32hex", id)
		}
		if seen[id] {
			t.Fatalf("NewID() repeated %q", id)
		}
		seen[id] = true
	}
}

func TestRedactPath(t *testing.T) {
	secret := func(s string) bool { return strings.HasPrefix(s, "rk_") }
	tests := []struct{ path, want string }{
		{"/keyrings/a/keys", "/keyrings/a/keys"},
		{"/auth/rk_abc/x", "/auth/" + Redacted + "/x"},
		{"/apikeys/abc/def", "/apikeys/" + Redacted + "/" + Redacted},
		{"/APIKeyId/abc", "/APIKeyId/" + Redacted},
		{"/apikey", "/apikey"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := RedactPath(tt.path, secret); got != tt.want {
			t.Errorf("RedactPath(%q) = %q, want %q", tt.path, got, tt.want)
		}
	}
	if n := testing.AllocsPerRun(10, func() { RedactPath("/keyrings/a/keys", secret) }); n != 0 {
		t.Errorf("RedactPath of a path with nothing to hide allocates %v times", n)
	}
}

func TestWrite(t *testing.T) {
	var buf bytes.Buffer
	log := zerolog.New(&buf)
	line := func() map[string]any {
		t.Helper()
		var m map[string]any
		if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
			t.Fatalf("log line %q: %v", buf.String(), err)
		}
		buf.Reset()
		return m
	}
	Write(&log, Line{ID: "id1", Method: "GET", Status: 200, Start: time.Now(), Err: errors.New("hidden")})
	m := line()
	if m["level"] != "info" || m["req_id"] != "id1" || m["status"] != float64(200) || m["message"] != "request" {
		t.Errorf("a 200 logs %v", m)
	}
	for _, k := range []string{"route", "path", "principal", "code", "error"} {
		if _, ok := m[k]; ok {
			t.Errorf("a 200 without %s logs %s: %v", k, k, m)
		}
	}
	Write(&log, Line{ID: "id2", Method: "POST", Route: "/r", Path: "/p", Status: 500, Principal: "u1", Code: "internal", Err: errors.New("broke")})
	m = line()
	if m["level"] != "error" || m["route"] != "/r" || m["path"] != "/p" || m["principal"] != "u1" || m["code"] != "internal" || m["error"] != "broke" {
		t.Errorf("a 500 logs %v", m)
	}
}
