package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"io"
	"maps"
	"path/filepath"
	"strings"
	"testing"
)

// signingKeys returns the keys GET /ks/signing-keys publishes.
func signingKeys(t *testing.T, url string) []map[string]any {
	t.Helper()
	code, body := call(t, nil, "GET", url+"/ks/signing-keys", "", nil)
	if code != 200 {
		t.Fatalf("GET /ks/signing-keys = %d %v", code, body)
	}
	keys, _ := body["keys"].([]any)
	var out []map[string]any
	for _, k := range keys {
		m, _ := k.(map[string]any)
		out = append(out, m)
	}
	return out
}

// signingKeyIDs fetches GET /ks/signing-keys with no credential and
// returns the key IDs, oldest first, and the active one.
func signingKeyIDs(t *testing.T, url string) (ids []string, active string) {
	t.Helper()
	for _, m := range signingKeys(t, url) {
		id, _ := m["id"].(string)
		ids = append(ids, id)
		if m["active"] == true {
			active = id
		}
	}
	return ids, active
}

// startWithRing starts kmsd on a data directory of its own, under a new
// master key, with the bootstrap API key boot and the variables of more,
// and creates the ring "r" with boot. It returns the server and what
// starts kmsd on its store again: the data directory, the environment
// and the arguments.
func startWithRing(t *testing.T, boot string, more env) (s *server, data string, e env, args []string) {
	t.Helper()
	data = filepath.Join(t.TempDir(), "data")
	e = env{"KMS_MASTER_KEY": newKey(), "KMS_BOOTSTRAP_API_KEY": boot}
	maps.Copy(e, more)
	args = []string{"-data", data, "-addr", "127.0.0.1:0"}
	s = startRun(t, args, e)
	if code, body := call(t, nil, "POST", s.url+"/ks/keyrings", boot, map[string]any{"name": "r"}); code != 200 {
		t.Fatalf("create ring = %d %v", code, body)
	}
	return s, data, e, args
}

// encryptHeader makes an encrypt call and returns its header and the
// signing key ID the header names.
func encryptHeader(t *testing.T, url, key string) (header, id string) {
	t.Helper()
	code, body := call(t, nil, "POST", url+"/ks/encrypt", key, map[string]any{"ringname": "r"})
	if code != 200 {
		t.Fatalf("encrypt = %d %v", code, body)
	}
	header, _ = body["header"].(string)
	raw, err := base64.RawURLEncoding.DecodeString(header)
	if err != nil || len(raw) < 10 {
		t.Fatalf("header %q: %v", header, err)
	}
	return header, hex.EncodeToString(raw[2:10])
}

// TestRotateSigningKeyCommand runs kmsd rotate-signing-key on a stopped
// kmsd's store: after a restart, new headers name the new key, both keys
// are published, and a header of the old key still verifies.
func TestRotateSigningKeyCommand(t *testing.T) {
	const boot = "rotate-bootstrap-secret-0123456789abcdef"
	s, data, e, args := startWithRing(t, boot, nil)
	oldHeader, oldID := encryptHeader(t, s.url, boot)
	if ids, active := signingKeyIDs(t, s.url); len(ids) != 1 || active != oldID {
		t.Fatalf("signing keys %v, active %s; want the one that signed, %s", ids, active, oldID)
	}
	s.stop(t)

	if err, _ := runErr(t, []string{"rotate-signing-key", "-data", filepath.Join(t.TempDir(), "empty")}, e); err == nil {
		t.Errorf("rotate-signing-key without a store = nil, want an error")
	}
	if err := run(context.Background(), []string{"rotate-signing-key", "-data", data}, env{"KMS_MASTER_KEY": newKey()}.get, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "master key") {
		t.Errorf("rotate-signing-key with another master key = %v, want an error about the master key", err)
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"rotate-signing-key", "-h"}, e.get, &out, io.Discard); err != nil || !strings.Contains(out.String(), "Usage: kmsd rotate-signing-key") {
		t.Errorf("rotate-signing-key -h = %v, printed:\n%s", err, out.String())
	}
	out.Reset()
	if err := run(context.Background(), []string{"rotate-signing-key", "-data", data}, e.get, &out, io.Discard); err != nil {
		t.Fatalf("rotate-signing-key = %v; output:\n%s", err, out.String())
	}
	_, newID, ok := strings.Cut(out.String(), "new key ID: ")
	newID, _, _ = strings.Cut(newID, "\n")
	if !ok || len(newID) != 16 || newID == oldID {
		t.Fatalf("rotate-signing-key printed:\n%s", out.String())
	}

	s = startRun(t, args, e)
	defer s.stop(t)
	if ids, active := signingKeyIDs(t, s.url); len(ids) != 2 || ids[0] != oldID || ids[1] != newID || active != newID {
		t.Fatalf("after the rotation: signing keys %v, active %s; want [%s %s], active %s", ids, active, oldID, newID, newID)
	}
	if _, id := encryptHeader(t, s.url, boot); id != newID {
		t.Errorf("a header after the rotation names key %s, want %s", id, newID)
	}
	if code, body := call(t, nil, "GET", s.url+"/ks/header/"+oldHeader, boot, nil); code != 200 || body["valid"] != true {
		t.Errorf("GET /ks/header of a header of the old key = %d %v, want valid", code, body)
	}
}
