package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var newRootKeyRE = regexp.MustCompile(`new root API key \(shown once\): (rk_\S+)`)

// TestNewRootKey: the bootstrap key of a -dev kmsd is lost; kmsd
// new-root-key, with the master key (here -dev's master.key), makes a new
// key with the flag "*" that works, prints it once with the command that
// deactivates the lost one, and the activity trail records it. It
// refuses to run beside kmsd, and without a master key.
func TestNewRootKey(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	args := []string{"-dev", "-data", data, "-log-level", "warn"}
	s := startRun(t, append([]string{"-addr", "127.0.0.1:0"}, args...), env{})
	if !bootstrapRE.MatchString(s.stderr.String()) {
		t.Fatalf("no bootstrap key printed:\n%s", s.stderr)
	}
	// Beside the running kmsd: refused, and nothing is made.
	err := run(context.Background(), append([]string{"new-root-key"}, args...), env{}.get, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "stop it first") {
		t.Errorf("new-root-key beside a running kmsd = %v, want a refusal saying to stop it", err)
	}
	s.stop(t)

	// Without a master key: a usage error.
	err = run(context.Background(), []string{"new-root-key", "-data", data, "-log-level", "warn"}, env{}.get, io.Discard, io.Discard)
	if err == nil || exitCode(err) != 2 || !strings.Contains(err.Error(), "no master key") {
		t.Errorf("new-root-key without a master key = %v (exit %d), want exit 2 and no master key", err, exitCode(err))
	}

	var out, errOut bytes.Buffer
	if err := run(context.Background(), append([]string{"new-root-key"}, args...), env{}.get, &out, &errOut); err != nil {
		t.Fatalf("new-root-key = %v; stderr:\n%s", err, errOut.String())
	}
	m := newRootKeyRE.FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("new-root-key printed:\n%s\nwant the new key", out.String())
	}
	key := m[1]
	if !strings.Contains(out.String(), "kmsctl apikey update -active false") {
		t.Errorf("new-root-key printed:\n%s\nwant the kmsctl command that deactivates a lost key", out.String())
	}
	if strings.Count(out.String(), key) != 1 || strings.Contains(errOut.String(), key) {
		t.Errorf("the new key is shown %d times on stdout and in the log %v; want once, on stdout only",
			strings.Count(out.String(), key), strings.Contains(errOut.String(), key))
	}

	s = startRun(t, append([]string{"-addr", "127.0.0.1:0"}, args...), env{})
	if code, body := call(t, nil, "POST", s.url+"/ks/keyrings", key, map[string]any{"name": "after"}); code != 200 {
		t.Errorf("create ring with the new root key = %d %v", code, body)
	}
	code, list := call(t, nil, "POST", s.url+"/auth/search/activity", key, map[string]any{"action": "apikey.create"})
	found := false
	for _, a := range list["data"].([]any) {
		rec := a.(map[string]any)
		if rec["keyid"] == "app:"+rootKeyApp && rec["valid"] == true {
			found = true
		}
	}
	if code != 200 || !found {
		b, _ := json.Marshal(list)
		t.Errorf("activity apikey.create = %d %s; want a record by app:%s", code, b, rootKeyApp)
	}
}
