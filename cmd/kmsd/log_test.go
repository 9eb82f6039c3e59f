package main

import (
	"bytes"
	"encoding/json"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ringkms/kms/internal/hsmtest"
)

// startLine returns kmsd's start-up line ("starting") from its JSON log.
func startLine(t *testing.T, logs string) map[string]any {
	t.Helper()
	for _, raw := range strings.Split(logs, "\n") {
		var l map[string]any
		if json.Unmarshal([]byte(raw), &l) == nil && l["message"] == "starting" {
			return l
		}
	}
	t.Fatalf("no start-up line in the log:\n%s", logs)
	return nil
}

// TestStartLogSaysWhatIsOn: kmsd's start-up log says what it serves
// besides its API (transit, the metrics and where, the admin socket),
// where the master key comes from (the environment, a file, a PKCS#11
// token, -dev's file) and whether a next master key is loaded, and from
// where; never a key, nor a token's PIN.
func TestStartLogSaysWhatIsOn(t *testing.T) {
	master, next := newKey(), newKey()
	dir := t.TempDir()
	masterFile := keyFile(t, dir, "master.key", master)
	for _, tc := range []struct {
		name    string
		args    []string
		e       env
		want    map[string]any
		secrets []string
	}{
		{"environment, nothing else", nil, env{"KMS_MASTER_KEY": master},
			map[string]any{"master_key": "environment KMS_MASTER_KEY", "next_master_key": "none", "transit": "off", "metrics": "off"},
			[]string{master}},
		{"file, next key, transit and metrics", []string{"-master-key-file", masterFile, "-transit", "-metrics", "-metrics-addr", "127.0.0.1:0"},
			env{"KMS_MASTER_KEY_NEXT": next, "KMS_METRICS_TOKEN": "metrics-token-0123456789"},
			map[string]any{"master_key": "file " + masterFile, "next_master_key": "environment KMS_MASTER_KEY_NEXT", "transit": "on, at /v1/transit/",
				"metrics": "GET /metrics on the main listener and on 127.0.0.1:0", "metrics_token": true},
			[]string{master, next, "metrics-token-0123456789"}},
		{"-dev", []string{"-dev"}, env{}, map[string]any{"next_master_key": "none"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := t.TempDir()
			s := startRun(t, append([]string{"-data", data, "-addr", "127.0.0.1:0", "-log-format", "json"}, tc.args...), tc.e)
			s.stop(t)
			l := startLine(t, s.stderr.String())
			want := tc.want
			want["admin_socket"] = adminSocket(data)
			if tc.name == "-dev" {
				want["master_key"] = "file " + filepath.Join(data, devKeyFile) + " (-dev)"
			}
			for k, v := range want {
				if l[k] != v {
					t.Errorf("start-up line's %s = %v, want %v; line: %v", k, l[k], v, l)
				}
			}
			for _, secret := range tc.secrets {
				if strings.Contains(s.stderr.String(), secret) {
					t.Errorf("the log holds a secret")
				}
			}
		})
	}
	t.Run("token", func(t *testing.T) {
		tok := hsmtest.New(t, "kms")
		tok.GenerateAESKey(t, "kms-master", hsmtest.AESKeyOptions{})
		tok.GenerateAESKey(t, "kms-next", hsmtest.AESKeyOptions{})
		s := startRun(t, []string{"-data", t.TempDir(), "-addr", "127.0.0.1:0", "-log-format", "json", "-master-key-next-pkcs11", tok.URI("kms-next")},
			env{"KMS_MASTER_KEY_PKCS11": tok.URI("kms-master")})
		s.stop(t)
		l := startLine(t, s.stderr.String())
		for k, object := range map[string]string{"master_key": "kms-master", "next_master_key": "kms-next"} {
			if v, _ := l[k].(string); !strings.HasPrefix(v, "PKCS#11 pkcs11:token=kms;object="+object+"?") || !strings.Contains(v, "module-path=") {
				t.Errorf("start-up line's %s = %q, want the PKCS#11 URI of %s", k, v, object)
			}
		}
		if strings.Contains(s.stderr.String(), tok.PIN) {
			t.Errorf("the log holds the token's PIN")
		}
	})
}

// TestLogFormat: without -log-format (auto), the log is console text on a
// terminal and JSON lines elsewhere; json and console are kept as asked,
// terminal or not.
func TestLogFormat(t *testing.T) {
	for _, c := range []struct {
		args     []string
		env      env
		terminal bool
		want     string
	}{
		{nil, nil, true, "console"},
		{nil, nil, false, "json"},
		{[]string{"-log-format", "auto"}, nil, true, "console"},
		{[]string{"-log-format", "json"}, nil, true, "json"},
		{nil, env{"KMS_LOG_FORMAT": "json"}, true, "json"},
		{[]string{"-log-format", "console"}, nil, false, "console"},
	} {
		cfg, err := parseConfig("", c.args, c.env.get, io.Discard)
		if err != nil {
			t.Fatalf("parseConfig(%q, %v) = %v", c.args, c.env, err)
		}
		isTerminal := func(io.Writer) bool { return c.terminal }
		if got := logFormat(cfg.logFormat, io.Discard, isTerminal); got != c.want {
			t.Errorf("logFormat(%q, %v) on a terminal %v = %q, want %q", c.args, c.env, c.terminal, got, c.want)
		}
	}
}

// TestNewLoggerNotATerminal: by default, a log that goes to a pipe or a
// file (anything but a terminal) is one JSON object per line.
func TestNewLoggerNotATerminal(t *testing.T) {
	cfg, err := parseConfig("", nil, env{}.get, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	log := newLogger(cfg, &lockedWriter{w: &buf})
	log.Info().Str("k", "v").Msg("hello")
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil || line["message"] != "hello" {
		t.Errorf("default log line = %q (%v), want a JSON object", buf.String(), err)
	}
}
