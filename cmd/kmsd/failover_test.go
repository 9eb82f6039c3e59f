package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ringkms/kms/internal/pgtest"
)

// waitHealthy polls GET /healthz of s until it answers 200, and fails the
// test when it does not within limit; it returns how long that took.
func waitHealthy(t *testing.T, s *server, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		code, body := call(t, nil, "GET", s.url+"/healthz", "", nil)
		if code == 200 {
			return time.Since(start)
		}
		if time.Since(start) > limit {
			t.Fatalf("/healthz = %d %v after %s, want 200", code, body, limit)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestRunOnHotStandby: kmsd started on a real hot standby (streaming from
// a primary) answers 503 saying the database is read-only, for /healthz
// and for writes, and serves, without a restart, once the standby is
// promoted.
func TestRunOnHotStandby(t *testing.T) {
	pair := pgtest.StartPair(t)
	e := env{"KMS_MASTER_KEY": newKey(), "KMS_BOOTSTRAP_API_KEY": "standby-bootstrap-secret-0123456789", "KMS_STORE": pair.PrimaryURL()}
	root := e["KMS_BOOTSTRAP_API_KEY"]
	args := []string{"-data", t.TempDir(), "-addr", "127.0.0.1:0"}
	s := startRun(t, args, e)
	if code, body := call(t, nil, "POST", s.url+"/ks/keyrings", root, map[string]any{"name": "before"}); code != 200 {
		t.Fatalf("create ring on the primary = %d %v", code, body)
	}
	s.stop(t)

	e["KMS_STORE"] = pair.StandbyURL()
	s = startRun(t, args, e)
	defer s.stop(t)
	for _, c := range []struct{ method, path string }{{"GET", "/healthz"}, {"POST", "/ks/keyrings"}} {
		code, body := call(t, nil, c.method, s.url+c.path, root, map[string]any{"name": "during"})
		if msg, _ := body["message"].(string); code != 503 || !strings.HasPrefix(msg, readOnlyMessage) {
			t.Errorf("%s %s on a hot standby = %d %v, want 503 saying %q", c.method, c.path, code, body, readOnlyMessage)
		}
	}
	pair.KillPrimary()
	pair.Promote()
	took := waitHealthy(t, s, 10*time.Second)
	t.Logf("serving %s after the promotion", took)
	if code, body := call(t, nil, "POST", s.url+"/ks/keyrings", root, map[string]any{"name": "after"}); code != 200 {
		t.Fatalf("create ring after the promotion = %d %v", code, body)
	}
	if code, body := call(t, nil, "GET", s.url+"/ks/keyrings/before", root, nil); code != 200 {
		t.Fatalf("ring made on the old primary = %d %v, want it on the promoted standby", code, body)
	}
}

// TestFailoverToStandby: a node on the pair's multi-host URL (with
// target_session_attrs=read-write) keeps every write it acknowledged
// across a SIGKILL of the primary and the promotion of its synchronous
// standby, and serves again within 10 seconds of the promotion without a
// restart.
func TestFailoverToStandby(t *testing.T) {
	pair := pgtest.StartPair(t)
	e := env{"KMS_MASTER_KEY": newKey(), "KMS_BOOTSTRAP_API_KEY": "failover-bootstrap-secret-0123456789", "KMS_STORE": pair.MultiURL()}
	root := e["KMS_BOOTSTRAP_API_KEY"]
	s := startRun(t, []string{"-data", t.TempDir(), "-addr", "127.0.0.1:0"}, e)
	defer s.stop(t)
	var acked []string
	for i := range 20 {
		name := fmt.Sprint("ring", i)
		if code, _ := call(t, nil, "POST", s.url+"/ks/keyrings", root, map[string]any{"name": name}); code == 200 {
			acked = append(acked, name)
		}
	}
	code, enc := call(t, nil, "POST", s.url+"/ks/encrypt", root, map[string]any{"ringname": "ring0"})
	if code != 200 || len(acked) != 20 {
		t.Fatalf("before the failover: %d rings acknowledged, encrypt = %d %v", len(acked), code, enc)
	}
	pair.KillPrimary()
	if code, body := call(t, nil, "GET", s.url+"/healthz", "", nil); code == 200 {
		t.Errorf("/healthz with the primary gone = %d %v, want 503", code, body)
	}
	pair.Promote()
	took := waitHealthy(t, s, 10*time.Second)
	t.Logf("serving %s after the promotion", took)
	for _, name := range acked {
		if code, body := call(t, nil, "GET", s.url+"/ks/keyrings/"+name, root, nil); code != 200 {
			t.Errorf("acknowledged ring %s after the failover = %d %v", name, code, body)
		}
	}
	if code, body := call(t, nil, "POST", s.url+"/ks/decrypt", root, map[string]any{"hash": enc["hash"], "header": enc["header"]}); code != 200 {
		t.Errorf("decrypt of an encrypt acknowledged before the failover = %d %v", code, body)
	}
	if code, body := call(t, nil, "POST", s.url+"/ks/keyrings", root, map[string]any{"name": "after"}); code != 200 {
		t.Errorf("create ring after the failover = %d %v", code, body)
	}
}

// TestWarnsOfAsynchronousStandby: kmsd on a primary that streams to a
// standby without naming it synchronous warns at start that a failover
// can lose acknowledged writes; on the pair as it starts (a synchronous
// standby), it does not.
func TestWarnsOfAsynchronousStandby(t *testing.T) {
	pair := pgtest.StartPair(t)
	e := env{"KMS_MASTER_KEY": newKey(), "KMS_BOOTSTRAP_API_KEY": "async-bootstrap-secret-0123456789", "KMS_STORE": pair.PrimaryURL()}
	args := []string{"-data", t.TempDir(), "-addr", "127.0.0.1:0"}
	const warning = "synchronous_standby_names is empty"
	s := startRun(t, args, e)
	s.stop(t)
	if strings.Contains(s.stderr.String(), "acknowledged writes") {
		t.Errorf("kmsd on a primary with a synchronous standby logged:\n%s", s.stderr)
	}
	pair.SyncStandbys("")
	s = startRun(t, args, e)
	s.stop(t)
	if !strings.Contains(s.stderr.String(), warning) {
		t.Errorf("kmsd on a primary with an asynchronous standby logged:\n%s\nwant a warning saying %q", s.stderr, warning)
	}
}
