package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

func noEnv(string) string { return "" }

func TestParseFlags(t *testing.T) {
	dir := t.TempDir()
	keyFile, caFile := filepath.Join(dir, "key"), filepath.Join(dir, "ca.pem")
	os.WriteFile(keyFile, []byte("filekey\n"), 0o600)
	tf, err := newTLSFiles()
	if err != nil {
		t.Fatal(err)
	}
	defer tf.remove()
	if b, err := os.ReadFile(tf.cert); err != nil || os.WriteFile(caFile, b, 0o600) != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr string // "" for none
		check   func(*options) bool
	}{
		{name: "start", args: []string{"-start"}, check: func(o *options) bool {
			return o.start && o.mode == "encrypt" && o.concurrency == 64 && o.duration == 10*time.Second && o.warmup == time.Second
		}},
		{name: "url and key", args: []string{"-url", "http://127.0.0.1:8200/", "-key", "k"}, check: func(o *options) bool {
			return slices.Equal(o.urls, []string{"http://127.0.0.1:8200"}) && o.key == "k"
		}},
		{name: "nodes of a cluster", args: []string{"-url", "http://127.0.0.1:8200/, http://[::1]:8201", "-key", "k"}, check: func(o *options) bool {
			return slices.Equal(o.urls, []string{"http://127.0.0.1:8200", "http://[::1]:8201"})
		}},
		{name: "one node twice", args: []string{"-url", "http://127.0.0.1:8200,http://127.0.0.1:8200", "-key", "k", "-c", "2"}, check: func(o *options) bool {
			return len(o.urls) == 2
		}},
		{name: "start a cluster", args: []string{"-start", "-store", "postgres://kms:hunter2@127.0.0.1/kms", "-nodes", "3"}, check: func(o *options) bool {
			return o.nodes == 3 && o.store == "postgres://kms:hunter2@127.0.0.1/kms" && o.urls == nil
		}},
		{name: "one node on PostgreSQL", args: []string{"-start", "-store", "postgresql:///kms?host=/run/postgresql"}, check: func(o *options) bool {
			return o.nodes == 1
		}},
		{name: "key from the environment", args: []string{"-url", "http://[::1]:8200"}, env: map[string]string{"KMS_API_KEY": "envkey"},
			check: func(o *options) bool { return o.key == "envkey" }},
		{name: "key by its old name", args: []string{"-url", "http://[::1]:8200"}, env: map[string]string{"KMSBENCH_KEY": "oldkey"},
			check: func(o *options) bool { return o.key == "oldkey" }},
		{name: "the new name wins over the old", args: []string{"-url", "http://[::1]:8200"}, env: map[string]string{"KMS_API_KEY": "new", "KMSBENCH_KEY": "old"},
			check: func(o *options) bool { return o.key == "new" }},
		{name: "-key wins over the environment", args: []string{"-url", "http://[::1]:8200", "-key", "flag"}, env: map[string]string{"KMS_API_KEY": "env"},
			check: func(o *options) bool { return o.key == "flag" }},
		{name: "key from a file", args: []string{"-url", "http://[::1]:8200"}, env: map[string]string{"KMS_API_KEY_FILE": keyFile},
			check: func(o *options) bool { return o.key == "filekey" }},
		{name: "URL and key from the environment", env: map[string]string{"KMS_ADDR": "http://127.0.0.1:8200/", "KMS_API_KEY": "k"},
			check: func(o *options) bool {
				return !o.start && slices.Equal(o.urls, []string{"http://127.0.0.1:8200"}) && o.key == "k"
			}},
		{name: "-url wins over KMS_ADDR", args: []string{"-url", "http://127.0.0.1:1"}, env: map[string]string{"KMS_ADDR": "http://127.0.0.1:2", "KMS_API_KEY": "k"},
			check: func(o *options) bool { return slices.Equal(o.urls, []string{"http://127.0.0.1:1"}) }},
		{name: "-start ignores the client settings", args: []string{"-start"}, env: map[string]string{"KMS_ADDR": "http://127.0.0.1:8200", "KMS_API_KEY": "k", "KMS_CACERT": "/nonexistent"},
			check: func(o *options) bool { return o.start && o.url == "" && o.key == "" && o.roots == nil }},
		{name: "CA from the environment", args: []string{"-url", "https://127.0.0.1:8200", "-key", "k"}, env: map[string]string{"KMS_CACERT": caFile},
			check: func(o *options) bool { return o.roots != nil }},
		{name: "-ca-cert", args: []string{"-url", "https://127.0.0.1:8200", "-key", "k", "-ca-cert", caFile}, check: func(o *options) bool { return o.roots != nil }},
		{name: "localhost", args: []string{"-url", "http://localhost:8200", "-key", "k"}},
		{name: "-n without -d is bounded by 1h", args: []string{"-start", "-n", "1000000"}, check: func(o *options) bool {
			return o.requests == 1000000 && o.duration == nDuration
		}},
		{name: "-n and -d", args: []string{"-start", "-n", "5", "-d", "3s"}, check: func(o *options) bool { return o.duration == 3*time.Second }},
		{name: "remote allowed", args: []string{"-url", "http://10.0.0.1:8200", "-key", "k", "-allow-remote"}},
		{name: "mix", args: []string{"-start", "-mode", "mix", "-mix", "0.2"}, check: func(o *options) bool { return o.mix == 0.2 }},
		{name: "baseline in 5 rounds", args: []string{"-start", "-baseline"}, check: func(o *options) bool { return o.baseline && o.rounds == 5 }},
		{name: "rounds", args: []string{"-start", "-baseline", "-rounds", "2", "-n", "2"}, check: func(o *options) bool { return o.rounds == 2 }},
		{name: "embedded", args: []string{"-start", "-store", "postgres://h/db", "-embedded"}, check: func(o *options) bool {
			return o.embedded && o.rounds == 5 && rounds(o) == 5 && o.nodes == 1
		}},
		{name: "against", args: []string{"-start", "-against", "/tmp/kmsd", "-rounds", "4"}, check: func(o *options) bool {
			return o.against == "/tmp/kmsd" && rounds(o) == 4 && o.takesTurns()
		}},
		{name: "embedded against a cluster in rounds", args: []string{"-start", "-store", "postgres://h/db", "-nodes", "3", "-embedded", "-rounds", "2"},
			check: func(o *options) bool { return o.embedded && rounds(o) == 2 && o.nodes == 3 && o.embNodes == 1 }},
		{name: "as many embedded kmsd as nodes", args: []string{"-start", "-store", "postgres://h/db", "-nodes", "3", "-embedded", "-embedded-nodes", "3"},
			check: func(o *options) bool { return o.embedded && o.nodes == 3 && o.embNodes == 3 }},
		{name: "one round without a second target", args: []string{"-start"}, check: func(o *options) bool { return rounds(o) == 1 }},
		{name: "signing key in a token", args: []string{"-start", "-signing-key-pkcs11", "pkcs11:token=kms;object=s?module-path=/m.so"}, env: map[string]string{"KMS_PKCS11_PIN": "1234"},
			check: func(o *options) bool {
				return o.signingKey == "pkcs11:token=kms;object=s?module-path=/m.so" && o.pin == "1234"
			}},
		{name: "transit-sign with ed25519", args: []string{"-start", "-mode", "transit-sign"}, check: func(o *options) bool {
			return o.transitKey == transitKey{Type: "ed25519"}
		}},
		{name: "transit-sign with ml-dsa", args: []string{"-start", "-mode", "transit-sign", "-key-type", "ml-dsa"}, check: func(o *options) bool {
			return o.transitKey == transitKey{Type: "ml-dsa", ParameterSet: "65"}
		}},
		{name: "transit-sign with ml-dsa-87", args: []string{"-start", "-mode", "transit-sign", "-key-type", "ml-dsa-87"}, check: func(o *options) bool {
			return o.transitKey == transitKey{Type: "ml-dsa", ParameterSet: "87"}
		}},
		{name: "transit-sign with ecdsa-p256", args: []string{"-start", "-mode", "transit-sign", "-key-type", "ecdsa-p256"}, check: func(o *options) bool {
			return o.transitKey == transitKey{Type: "ecdsa-p256"}
		}},
		{name: "transit-hmac with an hmac key", args: []string{"-start", "-mode", "transit-hmac"}, check: func(o *options) bool {
			return o.transitKey == transitKey{Type: "hmac"}
		}},
		{name: "transit-hmac with any key", args: []string{"-start", "-mode", "transit-hmac", "-key-type", "rsa-2048"}, check: func(o *options) bool {
			return o.transitKey == transitKey{Type: "rsa-2048"}
		}},
		{name: "transit-decrypt with aes256-gcm96", args: []string{"-start", "-mode", "transit-decrypt"}, check: func(o *options) bool {
			return o.transitKey == transitKey{Type: "aes256-gcm96"}
		}},
		{name: "key type of a /ks mode", args: []string{"-start", "-key-type", "ed25519"}, wantErr: "-key-type goes with the transit modes"},
		{name: "transit-sign with an AEAD key", args: []string{"-start", "-mode", "transit-sign", "-key-type", "aes256-gcm96"}, wantErr: "-key-type aes256-gcm96: -mode transit-sign wants a key type that signs"},
		{name: "transit-encrypt with a signing key", args: []string{"-start", "-mode", "transit-encrypt", "-key-type", "ed25519"}, wantErr: "wants a key type that encrypts"},
		{name: "unknown key type", args: []string{"-start", "-mode", "transit-sign", "-key-type", "rsa-1024"}, wantErr: `-key-type "rsa-1024": unknown key type "rsa-1024"; the key types are aes256-gcm96,`},
		{name: "unknown ml-dsa parameter set", args: []string{"-start", "-mode", "transit-sign", "-key-type", "ml-dsa-99"}, wantErr: `unknown parameter_set "99"; the parameter sets of ml-dsa are 44, 65, 87`},
		{name: "parameter set of another type", args: []string{"-start", "-mode", "transit-sign", "-key-type", "ed25519-65"}, wantErr: `unknown key type "ed25519-65"`},
		{name: "signing key without start", args: []string{"-url", "http://127.0.0.1:1", "-key", "k", "-signing-key-pkcs11", "pkcs11:object=s"}, wantErr: "go with -start"},
		{name: "signing key not a PKCS#11 URI", args: []string{"-start", "-signing-key-pkcs11", "/etc/kms/key"}, wantErr: "want a PKCS#11 URI"},

		{name: "remote refused", args: []string{"-url", "http://10.0.0.1:8200", "-key", "k"}, wantErr: "not a loopback address"},
		{name: "remote name refused", args: []string{"-url", "http://kms.example.com", "-key", "k"}, wantErr: "not a loopback address"},
		{name: "nothing to load", args: nil, wantErr: "give -url"},
		{name: "no key", args: []string{"-url", "http://127.0.0.1:8200"}, wantErr: "-url needs an API key: set KMS_API_KEY or KMS_API_KEY_FILE"},
		{name: "no key for KMS_ADDR", env: map[string]string{"KMS_ADDR": "http://127.0.0.1:8200"}, wantErr: "KMS_ADDR needs an API key"},
		{name: "remote KMS_ADDR refused", env: map[string]string{"KMS_ADDR": "http://10.0.0.1:8200", "KMS_API_KEY": "k"}, wantErr: `KMS_ADDR "http://10.0.0.1:8200": 10.0.0.1 is not a loopback address`},
		{name: "missing key file", args: []string{"-url", "http://127.0.0.1:8200"}, env: map[string]string{"KMS_API_KEY_FILE": "/nonexistent"}, wantErr: "KMS_API_KEY_FILE"},
		{name: "CA file not PEM", args: []string{"-url", "https://127.0.0.1:8200", "-key", "k"}, env: map[string]string{"KMS_CACERT": keyFile}, wantErr: "KMS_CACERT: " + keyFile + " holds no PEM certificate"},
		{name: "missing -ca-cert", args: []string{"-url", "https://127.0.0.1:8200", "-key", "k", "-ca-cert", "/nonexistent"}, wantErr: "-ca-cert"},
		{name: "-ca-cert with -start", args: []string{"-start", "-ca-cert", "/nonexistent"}, wantErr: "-ca-cert goes with -url"},
		{name: "start and url", args: []string{"-start", "-url", "http://127.0.0.1:1"}, wantErr: "exclude"},
		{name: "rss without start", args: []string{"-url", "http://127.0.0.1:1", "-key", "k", "-rss"}, wantErr: "-start"},
		{name: "bad mode", args: []string{"-start", "-mode", "rotate"}, wantErr: "-mode"},
		{name: "mix share without mix", args: []string{"-start", "-mix", "0.3"}, wantErr: "-mix goes with"},
		{name: "mix share out of range", args: []string{"-start", "-mode", "mix", "-mix", "1.5"}, wantErr: "-mix 1.5"},
		{name: "no concurrency", args: []string{"-start", "-c", "0"}, wantErr: "-c 0"},
		{name: "unbounded duration", args: []string{"-start", "-d", "0"}, wantErr: "-d 0s"},
		{name: "negative n", args: []string{"-start", "-n", "-1"}, wantErr: "-n -1"},
		{name: "ftp url", args: []string{"-url", "ftp://127.0.0.1", "-key", "k"}, wantErr: "want http"},
		{name: "rounds without baseline", args: []string{"-start", "-rounds", "3"}, wantErr: "-rounds goes with -baseline, -embedded or -against"},
		{name: "against without start", args: []string{"-url", "http://127.0.0.1:1", "-key", "k", "-against", "/tmp/kmsd"}, wantErr: "-against needs -start"},
		{name: "against and baseline", args: []string{"-start", "-against", "/tmp/kmsd", "-baseline"}, wantErr: "-against needs -start, and excludes -baseline"},
		{name: "against on postgres", args: []string{"-start", "-store", "postgres://h/db", "-against", "/tmp/kmsd"}, wantErr: "-against goes with the embedded store"},
		{name: "embedded and baseline", args: []string{"-start", "-store", "postgres://h/db", "-embedded", "-baseline"}, wantErr: "-embedded and -baseline exclude each other"},
		{name: "embedded without store", args: []string{"-start", "-embedded"}, wantErr: "-embedded needs -start and -store"},
		{name: "embedded nodes without embedded", args: []string{"-start", "-store", "postgres://h/db", "-nodes", "3", "-embedded-nodes", "3"}, wantErr: "-embedded-nodes goes with -embedded"},
		{name: "no embedded nodes", args: []string{"-start", "-store", "postgres://h/db", "-embedded", "-embedded-nodes", "0"}, wantErr: "-embedded-nodes 0"},
		{name: "embedded without start", args: []string{"-url", "http://127.0.0.1:1", "-key", "k", "-embedded"}, wantErr: "-embedded needs -start and -store"},
		{name: "embedded rounds too short", args: []string{"-start", "-store", "postgres://kms:hunter2@h/db", "-embedded", "-d", "1s", "-rounds", "20"}, wantErr: "at least 100ms a round"},
		{name: "embedded fewer requests than rounds", args: []string{"-start", "-store", "postgres://h/db", "-embedded", "-n", "3"}, wantErr: "-n 3 in 5 rounds"},
		{name: "no rounds", args: []string{"-start", "-baseline", "-rounds", "0"}, wantErr: "-rounds 0"},
		{name: "rounds too short", args: []string{"-start", "-baseline", "-d", "1s", "-rounds", "20"}, wantErr: "at least 100ms a round"},
		{name: "fewer requests than rounds", args: []string{"-start", "-baseline", "-n", "3"}, wantErr: "-n 3 in 5 rounds"},
		{name: "stray argument", args: []string{"-start", "now"}, wantErr: "unexpected argument"},
		{name: "remote node", args: []string{"-url", "http://127.0.0.1:1,http://10.0.0.1:8200", "-key", "k"}, wantErr: `"http://10.0.0.1:8200": 10.0.0.1 is not a loopback address`},
		{name: "empty node", args: []string{"-url", "http://127.0.0.1:1,", "-key", "k"}, wantErr: `-url "": want http://host:port, or several`},
		{name: "fewer clients than nodes", args: []string{"-url", "http://127.0.0.1:1,http://127.0.0.1:2", "-key", "k", "-c", "1"}, wantErr: "-c 1 over 2 nodes"},
		{name: "fewer clients than started nodes", args: []string{"-start", "-store", "postgres://h/db", "-nodes", "4", "-c", "3"}, wantErr: "-c 3 over 4 nodes"},
		{name: "nodes without store", args: []string{"-start", "-nodes", "2"}, wantErr: "-nodes 2 needs -store"},
		{name: "no nodes", args: []string{"-start", "-store", "postgres://h/db", "-nodes", "0"}, wantErr: "-nodes 0"},
		{name: "too many nodes", args: []string{"-start", "-store", "postgres://h/db", "-nodes", "65"}, wantErr: "-nodes 65"},
		{name: "store without start", args: []string{"-url", "http://127.0.0.1:1", "-key", "k", "-store", "postgres://h/db"}, wantErr: "go with -start"},
		{name: "nodes without start", args: []string{"-url", "http://127.0.0.1:1", "-key", "k", "-nodes", "1"}, wantErr: "go with -start"},
		{name: "store not PostgreSQL", args: []string{"-start", "-store", "mysql://kms:hunter2@h/db"}, wantErr: "-store: want a PostgreSQL URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parseCase(t, tt.args, tt.env, tt.wantErr)
			if err != nil {
				if strings.Contains(err.Error(), "hunter2") {
					t.Errorf("parseFlags(%q) = %v: the error shows the password", tt.args, err)
				}
				return
			}
			if tt.check != nil && !tt.check(o) {
				t.Errorf("parseFlags(%q) = %+v, not what was asked", tt.args, *o)
			}
		})
	}
}

// parseCase parses args under env. With wantErr, the parse must fail
// with an error that says it, which parseCase returns; without, it must
// succeed, and parseCase returns the options.
func parseCase(t *testing.T, args []string, env map[string]string, wantErr string) (*options, error) {
	t.Helper()
	o, err := parseFlags(args, envOf(env), &bytes.Buffer{})
	if wantErr == "" {
		if err != nil {
			t.Fatalf("parseFlags(%q) = %v, want no error", args, err)
		}
		return o, nil
	}
	if err == nil || !strings.Contains(err.Error(), wantErr) {
		t.Fatalf("parseFlags(%q) = %v, want an error with %q", args, err, wantErr)
	}
	return nil, err
}

// checkUsageError runs kmsbench with args, as a command: it must answer
// a usage error that says want and points at -h, and load nothing.
func checkUsageError(t *testing.T, args []string, want string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), args, noEnv, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "(see kmsbench -h)") {
		t.Errorf("kmsbench %q = %v, want the usage error saying %q", args, err, want)
	}
	if stdout.Len() != 0 || stderr.Len() != 0 {
		t.Errorf("kmsbench %q wrote %q and %q, want nothing", args, stdout.String(), stderr.String())
	}
}

func TestHelpDocumentsEveryFlag(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-h"}, noEnv, &out, &bytes.Buffer{}); err != nil {
		t.Fatalf("run -h = %v, want nil", err)
	}
	for _, f := range []string{"url", "key", "ca-cert", "allow-remote", "start", "store", "nodes", "kmsd", "kmsd-log-level", "mode", "mix", "c",
		"d", "n", "warmup", "timeout", "ring", "asset", "pool", "baseline", "embedded", "rounds", "rss", "json", "signing-key-pkcs11", "k8s-socket"} {
		if !regexp.MustCompile(`(?m)^  -` + f + `( |$)`).MatchString(out.String()) {
			t.Errorf("kmsbench -h does not document -%s:\n%s", f, out.String())
		}
	}
	for _, name := range []string{"KMS_ADDR", "KMS_API_KEY", "KMS_API_KEY_FILE", "KMS_CACERT", "KMSBENCH_KEY"} {
		if !strings.Contains(out.String(), name) {
			t.Errorf("kmsbench -h does not mention %s", name)
		}
	}
}

// checkTable prints s as a table, fails t for each of want that it lacks,
// and returns it.
func checkTable(t *testing.T, s *summary, want ...string) string {
	t.Helper()
	var out bytes.Buffer
	if err := s.print(&out, false); err != nil {
		t.Fatal(err)
	}
	for _, w := range want {
		if !strings.Contains(out.String(), w) {
			t.Errorf("table lacks %q; got:\n%s", w, out.String())
		}
	}
	return out.String()
}

// checkModeTable prints the summary of one kmsd of o's mode, loaded
// with 100 calls of 2 ms, 3 of them failed as byStatus counts, and
// checks that the table says want and names no ring (the protocols'
// modes name their keys otherwise).
func checkModeTable(t *testing.T, o *options, byStatus map[string]int64, want ...string) {
	t.Helper()
	var h Histogram
	h.Record(2 * time.Millisecond)
	s := newSummary(o)
	s.Rows = []row{newRow("kmsd", o.urls, o, &stats{requests: 100, errors: 3, byStatus: byStatus, elapsed: time.Second, hist: h})}
	if out := checkTable(t, s, want...); strings.Contains(out, "ring") {
		t.Errorf("the table names a ring:\n%s", out)
	}
}

// printJSON prints s as JSON and decodes it into got.
func printJSON(t *testing.T, s *summary, got any) {
	t.Helper()
	var out bytes.Buffer
	if err := s.print(&out, true); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(out.Bytes(), got); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
}

func TestSummaryTable(t *testing.T) {
	o := &options{mode: "encrypt", concurrency: 64, ring: "r", warmup: time.Second, baseline: true, rounds: 5}
	var kh, bh Histogram
	kh.Record(4 * time.Millisecond)
	bh.Record(time.Millisecond)
	s := newSummary(o)
	s.Rows = []row{
		newRow("kmsd", []string{"http://127.0.0.1:1"}, o, &stats{requests: 1000, errors: 2, byStatus: map[string]int64{"500": 1, "transport": 1}, elapsed: time.Second, hist: kh}),
		newRow("baseline", []string{"http://127.0.0.1:2"}, o, &stats{requests: 4000, elapsed: time.Second, hist: bh}),
	}
	s.finish()
	out := checkTable(t, s,
		"target    mode     concurrency  requests  errors  seconds  ops/s  p50 ms  p90 ms  p99 ms  max ms  cpu µs/req  client µs/req\n",
		"kmsd      encrypt           64      1000       2      1.0   1000    4.00    4.00    4.00    4.00           -              -\n",
		"kmsd errors by status: 500: 1, transport: 1",
		"kmsd / baseline: throughput 25.0 %, p99 4.0x\n",
		"warm-up 1s per target, 5 rounds taking turns",
	)
	if strings.Contains(out, "cpu per request") {
		t.Errorf("table shows a CPU ratio without CPU figures:\n%s", out)
	}
}

// TestSummaryTableEmbedded checks the CPU figures of a target, of each of
// its nodes, and their ratios to the second target.
func TestSummaryTableEmbedded(t *testing.T) {
	o := &options{mode: "encrypt", concurrency: 4, ring: "r", start: true, store: "postgres://h/db", embedded: true, rounds: 5,
		urls: []string{"http://127.0.0.1:1", "http://127.0.0.1:2"}}
	var ph, eh Histogram
	ph.Record(6 * time.Millisecond)
	eh.Record(2 * time.Millisecond)
	s := newSummary(o)
	s.Rows = []row{
		newRow("postgres", o.urls, o, &stats{requests: 1000, elapsed: time.Second, hist: ph,
			nodes: []nodeCount{{requests: 400}, {requests: 600}}, cpu: []time.Duration{80 * time.Millisecond, 90 * time.Millisecond}}),
		newRow("embedded", []string{"http://127.0.0.1:3"}, o, &stats{requests: 2000, elapsed: time.Second, hist: eh,
			nodes: []nodeCount{{requests: 2000}}, cpu: []time.Duration{100 * time.Millisecond}, clientCPU: 60 * time.Millisecond, clientKnown: true}),
	}
	s.finish()
	checkTable(t, s,
		"kmsd: 2 nodes started by kmsbench, store postgres; and one kmsd on the embedded store\n",
		"target    mode     concurrency  requests  errors  seconds  ops/s  p50 ms  p90 ms  p99 ms  max ms  cpu µs/req  client µs/req\n",
		"postgres  encrypt            4      1000       0      1.0   1000    6.00    6.00    6.00    6.00       170.0              -\n",
		"embedded  encrypt            4      2000       0      1.0   2000    2.00    2.00    2.00    2.00        50.0           30.0\n",
		"node  url                 requests  errors  ops/s  cpu s  cpu µs/req\n",
		"1     http://127.0.0.1:1       400       0    400   0.08       200.0\n",
		"2     http://127.0.0.1:2       600       0    600   0.09       150.0\n",
		"postgres / embedded: throughput 50.0 %, p99 3.0x\n",
		"postgres / embedded: cpu per request 3.40x, per node: 4.00x, 3.00x\n",
	)
	var got jsonSummary
	printJSON(t, s, &got)
	r := got.Ratios
	if r == nil || r.Of != "postgres" || r.To != "embedded" || r.ThroughputPct != 50 || r.P99Factor != 3 ||
		r.CPUFactor == nil || *r.CPUFactor != 3.4 || !slices.Equal(r.NodeCPUFactors, []float64{4, 3}) {
		t.Errorf("JSON ratios = %+v, want postgres to embedded: 50 %%, 3x, CPU 3.4x, nodes 4x and 3x", r)
	}
	if !got.Embedded || len(got.Rows) != 2 || got.Rows[0].CPUUsPerReq == nil || *got.Rows[0].CPUUsPerReq != 170 ||
		got.Rows[0].Nodes[1].CPUSeconds == nil || *got.Rows[0].Nodes[1].CPUSeconds != 0.09 {
		t.Errorf("JSON summary = %+v, want the CPU figures of the rows and nodes", got)
	}
}

// TestSummaryTableEmbeddedNodes: the summary says how many kmsd made the
// embedded target, and gives each one's requests and CPU.
func TestSummaryTableEmbeddedNodes(t *testing.T) {
	o := &options{mode: "encrypt", concurrency: 4, ring: "r", start: true, store: "postgres://h/db", embedded: true, embNodes: 2, rounds: 5,
		urls: []string{"http://127.0.0.1:1", "http://127.0.0.1:2"}}
	s := newSummary(o)
	emb := []string{"http://127.0.0.1:3", "http://127.0.0.1:4"}
	var h Histogram
	h.Record(time.Millisecond)
	s.Rows = []row{
		newRow("postgres", o.urls, o, &stats{requests: 1000, elapsed: time.Second, hist: h,
			nodes: []nodeCount{{requests: 500}, {requests: 500}}, cpu: []time.Duration{60 * time.Millisecond, 60 * time.Millisecond}}),
		newRow("embedded", emb, o, &stats{requests: 2000, elapsed: time.Second, hist: h,
			nodes: []nodeCount{{requests: 1000}, {requests: 1000}}, cpu: []time.Duration{100 * time.Millisecond, 100 * time.Millisecond}}),
	}
	s.finish()
	checkTable(t, s,
		"kmsd: 2 nodes started by kmsbench, store postgres; and 2 kmsd on the embedded store, each on a store of its own\n",
		"embedded over 2 nodes, client i calling node i mod 2:\n",
		"2     http://127.0.0.1:4      1000       0   1000   0.10       100.0\n",
		"postgres / embedded: cpu per request 1.20x, per node: 1.20x, 1.20x\n",
	)
}

func TestSummaryTableNodes(t *testing.T) {
	o := &options{mode: "decrypt", concurrency: 4, ring: "r", pool: 10, start: true, store: "postgres://h/db",
		urls: []string{"http://127.0.0.1:1", "http://127.0.0.1:2"}}
	var h Histogram
	h.Record(time.Millisecond)
	s := newSummary(o)
	s.Rows = []row{newRow("kmsd", o.urls, o, &stats{requests: 300, errors: 1, byStatus: map[string]int64{"500": 1}, elapsed: time.Second, hist: h,
		nodes: []nodeCount{{requests: 100}, {requests: 200, errors: 1}}})}
	s.RSS = []nodeRSS{{Node: o.urls[0], rssStats: rssStats{PeakBytes: 10 << 20, LastBytes: 5 << 20, Samples: 3}},
		{Node: o.urls[1], rssStats: rssStats{PeakBytes: 20 << 20, LastBytes: 6 << 20, Samples: 3}}}
	checkTable(t, s,
		"kmsd: 2 nodes started by kmsbench, store postgres\n",
		"kmsd over 2 nodes, client i calling node i mod 2:\n",
		"node  url                 requests  errors  ops/s  cpu s  cpu µs/req\n",
		"1     http://127.0.0.1:1       100       0    100      -           -\n",
		"2     http://127.0.0.1:2       200       1    200      -           -\n",
		"kmsd http://127.0.0.1:2 resident memory: peak 20.0 MiB, last 6.0 MiB",
	)
	var got struct {
		Nodes int       `json:"nodes"`
		Store string    `json:"store"`
		RSS   []nodeRSS `json:"rss"`
		Rows  []row     `json:"rows"`
	}
	printJSON(t, s, &got)
	if got.Nodes != 2 || got.Store != "postgres" || len(got.RSS) != 2 || got.RSS[1].PeakBytes != 20<<20 ||
		len(got.Rows) != 1 || got.Rows[0].URL != "http://127.0.0.1:1,http://127.0.0.1:2" || len(got.Rows[0].Nodes) != 2 || got.Rows[0].Nodes[1].Errors != 1 {
		t.Errorf("JSON summary = %+v, want 2 nodes, their RSS and their counts", got)
	}
}

// TestRunEndToEnd builds kmsd, and runs kmsbench against it and the
// baseline.
func TestRunEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds and runs kmsd; skipped with -short")
	}
	sum, stderr := runJSON(t, noEnv, "-start", "-mode", "mix", "-c", "8", "-n", "200", "-baseline", "-rss",
		"-warmup", "200ms", "-pool", "50", "-kmsd-log-level", "warn")
	if len(sum.Rows) != 2 || sum.Rows[0].Target != "kmsd" || sum.Rows[1].Target != "baseline" {
		t.Fatalf("rows = %+v, want kmsd and baseline", sum.Rows)
	}
	for _, r := range sum.Rows {
		if r.Requests != 200 || r.Errors != 0 || r.OpsPerSec <= 0 || r.P99Ms <= 0 || r.Mode != "mix" || r.Concurrency != 8 {
			t.Errorf("%s row = %+v, want 200 requests, no error", r.Target, r)
		}
	}
	if len(sum.RSS) != 1 || sum.RSS[0].Samples == 0 || sum.RSS[0].PeakBytes <= 0 || sum.RSS[0].Node != sum.Rows[0].URL {
		t.Errorf("rss = %+v, want samples of kmsd's memory", sum.RSS)
	}
	if sum.Nodes != 1 || sum.Store != "embedded" {
		t.Errorf("summary: %d nodes, store %q; want 1, embedded", sum.Nodes, sum.Store)
	}
	pids := startedPIDs(t, stderr)
	if len(pids) != 1 {
		t.Fatalf("stderr notes %d kmsd started, want 1:\n%s", len(pids), stderr)
	}
	checkStopped(t, pids)
}
