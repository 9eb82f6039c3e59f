package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ringkms/kms/internal/kmsdtest"
	"github.com/ringkms/kms/internal/pgtest"

	"github.com/jackc/pgx/v5"
)

// TestRunPostgres: kmsd on a PostgreSQL store (-store) serves, keeps what
// it acknowledged across a restart, and verify-audit checks its trail
// there.
func TestRunPostgres(t *testing.T) {
	url := pgtest.URL(t)
	e := env{"KMS_MASTER_KEY": newKey(), "KMS_BOOTSTRAP_API_KEY": "postgres-bootstrap-secret-0123456789", "KMS_STORE": url}
	root := e["KMS_BOOTSTRAP_API_KEY"]
	s := startRun(t, []string{"-data", t.TempDir(), "-addr", "127.0.0.1:0"}, e)
	if code, body := call(t, nil, "POST", s.url+"/ks/keyrings", root, map[string]any{"name": "pg"}); code != 200 {
		t.Fatalf("create ring = %d %v", code, body)
	}
	code, enc := call(t, nil, "POST", s.url+"/ks/encrypt", root, map[string]any{"ringname": "pg"})
	if code != 200 {
		t.Fatalf("encrypt = %d %v", code, enc)
	}
	// A second node on the same database serves the same service: it
	// decrypts what the first encrypted, and its encrypt is decrypted by
	// the first.
	s2 := startRun(t, []string{"-data", t.TempDir(), "-addr", "127.0.0.1:0"}, e)
	if code, body := call(t, nil, "POST", s2.url+"/ks/decrypt", root, map[string]any{"hash": enc["hash"], "header": enc["header"]}); code != 200 {
		t.Fatalf("decrypt on a second node = %d %v", code, body)
	}
	code, enc2 := call(t, nil, "POST", s2.url+"/ks/encrypt", root, map[string]any{"ringname": "pg"})
	if code != 200 {
		t.Fatalf("encrypt on a second node = %d %v", code, enc2)
	}
	if code, body := call(t, nil, "POST", s.url+"/ks/decrypt", root, map[string]any{"hash": enc2["hash"], "header": enc2["header"]}); code != 200 {
		t.Fatalf("decrypt on the first node of the second's encrypt = %d %v", code, body)
	}
	s2.stop(t)
	s.stop(t)
	if !strings.Contains(s.stderr.String(), `"store":"PostgreSQL postgres://`) {
		t.Errorf("the listening line does not name the PostgreSQL store:\n%s", s.stderr.String())
	}

	s = startRun(t, []string{"-data", t.TempDir(), "-addr", "127.0.0.1:0", "-store", url}, env{"KMS_MASTER_KEY": e["KMS_MASTER_KEY"]})
	if code, body := call(t, nil, "POST", s.url+"/ks/decrypt", root, map[string]any{"hash": enc["hash"], "header": enc["header"]}); code != 200 {
		t.Fatalf("decrypt after a restart = %d %v", code, body)
	}
	s.stop(t)

	var out bytes.Buffer
	if err := run(context.Background(), []string{"verify-audit", "-store", url}, e.get, &out, io.Discard); err != nil {
		t.Fatalf("verify-audit -store = %v; output:\n%s", err, out.String())
	}
	if !regexp.MustCompile(`records checked: [1-9]`).MatchString(out.String()) {
		t.Errorf("verify-audit -store printed:\n%s", out.String())
	}
}

// TestSubcommandsRefuseAnEmptyDatabase: verify-audit, audit export,
// rotate-signing-key and rekey on a PostgreSQL database that holds no
// kmsd store (a mistyped URL) fail and create nothing there, as they do
// on a data directory without a store.
func TestSubcommandsRefuseAnEmptyDatabase(t *testing.T) {
	url := pgtest.URL(t)
	e := env{"KMS_MASTER_KEY": newKey(), "KMS_NEW_MASTER_KEY": newKey()}
	for _, args := range [][]string{
		{"verify-audit"},
		{"audit", "export"},
		{"rotate-signing-key"},
		{"rekey"},
	} {
		var out bytes.Buffer
		err := run(context.Background(), append(args, "-store", url), e.get, &out, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "no kmsd store") {
			t.Errorf("%s -store on an empty database = %v, want an error saying it holds no kmsd store; output:\n%s", strings.Join(args, " "), err, out.String())
		}
	}
	c, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	var tables int
	if err := c.QueryRow(context.Background(), "SELECT count(*) FROM pg_tables WHERE tablename LIKE 'kms_%'").Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables != 0 {
		t.Errorf("the refused commands left %d kms_ tables, want none", tables)
	}
}

// TestRekeyBesideTheNodes: kmsd rekey on PostgreSQL runs while the nodes
// serve. A node started with the new key as its next key goes on under it
// without a restart; a node without it stops writing (503, /healthz 503)
// and serves again once restarted with the new key.
func TestRekeyBesideTheNodes(t *testing.T) {
	url := pgtest.URL(t)
	oldKey, newMaster := newKey(), newKey()
	e := env{"KMS_MASTER_KEY": oldKey, "KMS_MASTER_KEY_NEXT": newMaster, "KMS_BOOTSTRAP_API_KEY": "rekey-bootstrap-secret-0123456789", "KMS_STORE": url}
	root := e["KMS_BOOTSTRAP_API_KEY"]
	a := startRun(t, []string{"-data", t.TempDir(), "-addr", "127.0.0.1:0"}, e)
	defer a.stop(t)
	b := startRun(t, []string{"-data", t.TempDir(), "-addr", "127.0.0.1:0"}, env{"KMS_MASTER_KEY": oldKey, "KMS_STORE": url})
	if code, body := call(t, nil, "POST", a.url+"/ks/keyrings", root, map[string]any{"name": "rk"}); code != 200 {
		t.Fatalf("create ring = %d %v", code, body)
	}
	code, enc := call(t, nil, "POST", a.url+"/ks/encrypt", root, map[string]any{"ringname": "rk"})
	if code != 200 {
		t.Fatalf("encrypt = %d %v", code, enc)
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"rekey", "-store", url}, env{"KMS_MASTER_KEY": oldKey, "KMS_NEW_MASTER_KEY": newMaster}.get, &out, io.Discard); err != nil {
		t.Fatalf("rekey beside the nodes = %v; output:\n%s", err, out.String())
	}
	if code, body := call(t, nil, "POST", a.url+"/ks/decrypt", root, map[string]any{"hash": enc["hash"], "header": enc["header"]}); code != 200 {
		t.Errorf("decrypt on the node with the next key, after the rekey = %d %v", code, body)
	}
	if code, body := call(t, nil, "POST", a.url+"/ks/keyrings", root, map[string]any{"name": "after"}); code != 200 {
		t.Errorf("create ring on the node with the next key, after the rekey = %d %v", code, body)
	}
	kmsdtest.WaitFor(t, 10*time.Second, "the node without the new key to answer 503", func() bool {
		code, _ := call(t, nil, "GET", b.url+"/healthz", "", nil)
		return code == 503
	})
	if code, body := call(t, nil, "POST", b.url+"/ks/keyrings", root, map[string]any{"name": "stale"}); code != 503 {
		t.Errorf("create ring on the node without the new key = %d %v, want 503", code, body)
	}
	b.stop(t)
	if err := run(context.Background(), nil, env{"KMS_MASTER_KEY": oldKey, "KMS_STORE": url}.get, io.Discard, io.Discard); err == nil {
		t.Errorf("kmsd with the old key alone started")
	}
	b = startRun(t, []string{"-data", t.TempDir(), "-addr", "127.0.0.1:0"}, env{"KMS_MASTER_KEY": newMaster, "KMS_STORE": url})
	defer b.stop(t)
	if code, body := call(t, nil, "POST", b.url+"/ks/decrypt", root, map[string]any{"hash": enc["hash"], "header": enc["header"]}); code != 200 {
		t.Fatalf("decrypt with the new master key = %d %v", code, body)
	}
}

func TestStoreFlag(t *testing.T) {
	for _, bad := range []string{"mysql://x", "/var/lib/kms", "postgres"} {
		if _, err := parseConfig("", []string{"-store", bad}, env{}.get, io.Discard); err == nil || !strings.Contains(err.Error(), "-store") {
			t.Errorf("-store %q = %v, want an error about -store", bad, err)
		}
	}
	for _, good := range []string{"", "postgres://kms@db/kms", "postgresql://kms@db:5433/kms?sslmode=verify-full"} {
		if _, err := parseConfig("", []string{"-store", good}, env{}.get, io.Discard); err != nil {
			t.Errorf("-store %q = %v, want nil", good, err)
		}
	}
	c := config{store: "postgres://kms:hunter2secret@db:5432/kms"}
	if name := c.storeName(); strings.Contains(name, "hunter2secret") || !strings.Contains(name, "db:5432") {
		t.Errorf("storeName() = %q, want the database without its password", name)
	}
}

// TestMigrate: kmsd migrate copies an embedded store into an empty
// PostgreSQL database; kmsd on it decrypts what was issued before, its
// trail verifies, and a second migrate into the now full database is
// refused, writing nothing.
func TestMigrate(t *testing.T) {
	data := t.TempDir()
	e := env{"KMS_MASTER_KEY": newKey(), "KMS_BOOTSTRAP_API_KEY": "migrate-bootstrap-secret-0123456789abc"}
	root := e["KMS_BOOTSTRAP_API_KEY"]
	s := startRun(t, []string{"-data", data, "-addr", "127.0.0.1:0"}, e)
	if code, body := call(t, nil, "POST", s.url+"/ks/keyrings", root, map[string]any{"name": "moved"}); code != 200 {
		t.Fatalf("create ring = %d %v", code, body)
	}
	var issued []map[string]any
	for range 30 {
		code, enc := call(t, nil, "POST", s.url+"/ks/encrypt", root, map[string]any{"ringname": "moved", "asset": map[string]any{"data": map[string]any{"n": 1}}})
		if code != 200 {
			t.Fatalf("encrypt = %d %v", code, enc)
		}
		issued = append(issued, enc)
	}
	s.stop(t)

	url := pgtest.URL(t)
	var out bytes.Buffer
	if err := run(context.Background(), []string{"migrate", "-from", data, "-to", url}, e.get, &out, io.Discard); err != nil {
		t.Fatalf("migrate = %v; output:\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "activity chain intact") || !regexp.MustCompile(`copied [1-9]\d* keys and [1-9]\d* activity records`).MatchString(out.String()) {
		t.Errorf("migrate printed:\n%s", out.String())
	}
	out.Reset()
	err := run(context.Background(), []string{"migrate", "-from", data, "-to", url}, e.get, &out, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("a second migrate into the same database = %v, want a refusal", err)
	}

	s = startRun(t, []string{"-data", t.TempDir(), "-addr", "127.0.0.1:0", "-store", url}, env{"KMS_MASTER_KEY": e["KMS_MASTER_KEY"]})
	for i, enc := range issued {
		if code, body := call(t, nil, "POST", s.url+"/ks/decrypt", root, map[string]any{"hash": enc["hash"], "header": enc["header"]}); code != 200 {
			t.Fatalf("decrypt of hash %d after migrate = %d %v", i, code, body)
		}
	}
	s.stop(t)
	out.Reset()
	if err := run(context.Background(), []string{"verify-audit", "-store", url}, e.get, &out, io.Discard); err != nil {
		t.Fatalf("verify-audit -store after migrate = %v; output:\n%s", err, out.String())
	}
}

func TestMigrateUsage(t *testing.T) {
	for _, args := range [][]string{{"migrate", "-from", t.TempDir()}, {"migrate", "-to", "/var/lib/kms"}} {
		err := run(context.Background(), args, env{"KMS_MASTER_KEY": newKey()}.get, io.Discard, io.Discard)
		if exitCode(err) != 2 || !strings.Contains(fmt.Sprint(err), "-to") {
			t.Errorf("run(%q) = %v (exit %d), want a usage error about -to", args, err, exitCode(err))
		}
	}
}
