package main

import (
	"encoding/json"
	"net"
	"strings"
	"testing"
)

// TestOutageLoggedAtWarn: while kmsd cannot reach its database it answers
// 503, as documented, and logs each such request at warn, not error
// (operators alert on error); the cause is in the line.
func TestOutageLoggedAtWarn(t *testing.T) {
	// A port nothing listens on: the database cannot be reached.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	s := startRun(t, []string{"-data", t.TempDir(), "-addr", "127.0.0.1:0", "-log-format", "json"},
		env{"KMS_MASTER_KEY": newKey(), "KMS_STORE": "postgres://kms@" + addr + "/kms?connect_timeout=2"})
	for _, path := range []string{"/healthz", "/ks/keyrings"} {
		if code, body := call(t, nil, "GET", s.url+path, "", nil); code != 503 {
			t.Fatalf("GET %s with the database unreachable = %d %v, want 503", path, code, body)
		}
	}
	s.stop(t)
	lines := 0
	for _, raw := range strings.Split(s.stderr.String(), "\n") {
		var l map[string]any
		if json.Unmarshal([]byte(raw), &l) != nil || l["message"] != "request" {
			continue
		}
		lines++
		if l["status"] != float64(503) || l["level"] != "warn" || !strings.Contains(l["error"].(string), "database cannot be reached") {
			t.Errorf("request line %v, want status 503 at level warn with its cause", l)
		}
	}
	if lines != 2 {
		t.Errorf("%d request lines, want 2; log:\n%s", lines, s.stderr.String())
	}
}
