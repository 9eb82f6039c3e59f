package main

import (
	"bytes"
	"encoding/json"
	"io"
	"testing"
)

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
