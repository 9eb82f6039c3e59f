package reqlog_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringkms/kms/internal/reqlog"
)

// TestWriteLevel: a request's line is at info, at warn for a 503 (an
// outage ridden out as documented: operators alert on error), and at
// error for a 500 and the other 5xx; every 5xx line carries its cause.
func TestWriteLevel(t *testing.T) {
	for _, tc := range []struct {
		status int
		level  string
	}{
		{200, "info"},
		{404, "info"},
		{429, "info"},
		{500, "error"},
		{502, "error"},
		{503, "warn"},
		{507, "error"},
	} {
		var buf bytes.Buffer
		log := zerolog.New(&buf)
		reqlog.Write(&log, reqlog.Line{ID: reqlog.NewID(), Method: "GET", Route: "/x", Status: tc.status, Start: time.Now(), Err: errors.New("the cause")})
		var line map[string]any
		if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
			t.Fatalf("status %d: log line %q: %v", tc.status, buf.Bytes(), err)
		}
		if line["level"] != tc.level {
			t.Errorf("status %d logged at %v, want %s", tc.status, line["level"], tc.level)
		}
		if got, want := line["error"] == "the cause", tc.status >= 500; got != want {
			t.Errorf("status %d: cause logged = %v, want %v: %v", tc.status, got, want, line)
		}
	}
	// At level warn, a 503 is still logged; at error, it is not.
	for _, min := range []zerolog.Level{zerolog.WarnLevel, zerolog.ErrorLevel} {
		var buf bytes.Buffer
		log := zerolog.New(&buf).Level(min)
		reqlog.Write(&log, reqlog.Line{Status: 503, Start: time.Now()})
		if got, want := buf.Len() > 0, min == zerolog.WarnLevel; got != want {
			t.Errorf("a 503 on a logger at %s: logged = %v, want %v", min, got, want)
		}
	}
}
