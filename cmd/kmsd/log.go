package main

import (
	"io"
	"os"
	"strings"
	"time"

	"github.com/rs/zerolog"
)

// newLogger returns the logger of kmsd: JSON lines or console text on w
// (logFormat), at the configured level.
func newLogger(c *config, w io.Writer) zerolog.Logger {
	level, err := zerolog.ParseLevel(c.logLevel)
	if err != nil {
		level = zerolog.InfoLevel // validate has checked it
	}
	out := w
	if logFormat(c.logFormat, w, isTerminal) == "console" {
		out = zerolog.ConsoleWriter{Out: w, TimeFormat: time.RFC3339, NoColor: !isTerminal(w)}
	}
	return zerolog.New(out).Level(level).With().Timestamp().Logger()
}

// logFormat is the format of the log on w for -log-format flag: json or
// console as asked, and for auto (the default) console text when w is a
// terminal, where a person reads it (kmsd -dev on a laptop), and JSON
// lines otherwise, where a program collects them (systemd's journal, a
// container's log driver).
func logFormat(flag string, w io.Writer, isTerminal func(io.Writer) bool) string {
	if flag != "auto" {
		return flag
	}
	if isTerminal(w) {
		return "console"
	}
	return "json"
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
