package main

import (
	"io"
	"os"
	"strings"
	"time"

	"github.com/rs/zerolog"
)

// newLogger returns the logger of kmsd: JSON lines or console text on w,
// at the configured level.
func newLogger(c *config, w io.Writer) zerolog.Logger {
	level, err := zerolog.ParseLevel(c.logLevel)
	if err != nil {
		level = zerolog.InfoLevel // validate has checked it
	}
	out := w
	if c.logFormat == "console" {
		out = zerolog.ConsoleWriter{Out: w, TimeFormat: time.RFC3339, NoColor: !isTerminal(w)}
	}
	return zerolog.New(out).Level(level).With().Timestamp().Logger()
}

// isTerminal reports whether w is, or wraps, a character device.
func isTerminal(w io.Writer) bool {
	if lw, ok := w.(*lockedWriter); ok {
		w = lw.w
	}
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// httpErrorLog adapts the http.Server's error log to zerolog. TLS
// handshake failures, which any scanner causes, go to debug.
type httpErrorLog struct{ log *zerolog.Logger }

func (h httpErrorLog) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	ev := h.log.Warn()
	if strings.Contains(msg, "TLS handshake error") {
		ev = h.log.Debug()
	}
	ev.Str("component", "http").Msg(msg)
	return len(p), nil
}
