package kmstest

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ringkms/kms/internal/kmsdtest"
)

// LogBuffer is a sink for a zerolog.Logger (zerolog.New(&buf)), safe for
// concurrent writes, that the test reads back: String gives everything
// logged so far, Lines its JSON lines.
type LogBuffer struct {
	kmsdtest.Buffer
}

// Lines returns the JSON log lines, failing the test on a line that is not
// a JSON object.
func (b *LogBuffer) Lines(t testing.TB) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q is not JSON: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}
