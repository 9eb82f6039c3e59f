// Package reqlog is what the HTTP handlers of the service (httpapi, and
// transit's Vault interface) share of a request's log line: its ID, the
// path with what may be a secret in it hidden, and the line itself. A
// request logs one line when it is done; neither headers nor bodies are
// ever in it.
package reqlog

import (
	"encoding/base32"
	"encoding/binary"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/rs/zerolog"
)

// idEncoding is base32hex (RFC 4648 section 7) in lower case, unpadded.
var idEncoding = base32.NewEncoding("0123456789abcdefghijklmnopqrstuv").WithPadding(base32.NoPadding)

// NewID returns a random request ID of 20 characters. The ID names a
// request in the logs and is no secret: it comes from the runtime's
// generator (ChaCha8, seeded by the system), which costs no system call,
// unlike crypto/rand.
func NewID() string {
	var b [12]byte
	binary.LittleEndian.PutUint64(b[:8], rand.Uint64())
	binary.LittleEndian.PutUint32(b[8:], rand.Uint32())
	var id [20]byte
	idEncoding.Encode(id[:], b[:])
	return string(id[:])
}

// Redacted takes the place of what RedactPath hides.
const Redacted = "<redacted>"

// RedactPath returns path with what may be a secret in it replaced by
// Redacted: every segment after one that names API keys (apikey,
// apikeyid, apikeys...: a route may name a key by its secret, and a client
// may get the method or the path slightly wrong), and every segment that
// secret says is shaped like one. A path with nothing to hide comes back
// as it is, without allocating.
func RedactPath(path string, secret func(string) bool) string {
	var out []string // the segments, once one is redacted
	after := false   // past a segment that names API keys
	rest := path
	for n := 0; ; n++ {
		seg, tail, more := strings.Cut(rest, "/")
		if after || secret(seg) {
			if out == nil {
				out = strings.Split(path, "/") // the same segments
			}
			out[n] = Redacted
		}
		if len(seg) >= len("apikey") && strings.EqualFold(seg[:len("apikey")], "apikey") {
			after = true
		}
		if !more {
			break
		}
		rest = tail
	}
	if out == nil {
		return path
	}
	return strings.Join(out, "/")
}

// Line is what a request's log line says.
type Line struct {
	ID, Method string
	Route      string // the route's pattern; "" when none matched
	Path       string // redacted; "" to leave the path out
	Status     int
	Size       int64
	Start      time.Time
	Principal  string // the caller's ID; "" for none
	Code       string // the error's code, when the answer is one
	Err        error  // logged for a 5xx
}

// level is the level of a request's log line by its status: info, but
// warn for a 503 and error for another 5xx. A 503 is the service riding
// out an outage as documented (its database cannot be reached, its store
// stalled, the process waits for its store): it is answered at once, the
// client may try again, and it ends with the outage. Operators alert on
// error, which is kept for what needs someone: a 500 (a fault of the
// service or its store) and the other 5xx (507: a disk is full).
func level(status int) zerolog.Level {
	switch {
	case status == 503:
		return zerolog.WarnLevel
	case status >= 500:
		return zerolog.ErrorLevel
	}
	return zerolog.InfoLevel
}

// Write logs l on log, at the level of its status (level).
func Write(log *zerolog.Logger, l Line) {
	ev := log.WithLevel(level(l.Status))
	if !ev.Enabled() {
		return
	}
	ev = ev.Str("req_id", l.ID).Str("method", l.Method)
	if l.Route != "" {
		ev = ev.Str("route", l.Route)
	}
	if l.Path != "" {
		ev = ev.Str("path", l.Path)
	}
	ev = ev.Int("status", l.Status).Int64("size", l.Size).Dur("duration", time.Since(l.Start))
	if l.Principal != "" {
		ev = ev.Str("principal", l.Principal)
	}
	if l.Code != "" {
		ev = ev.Str("code", l.Code)
	}
	if l.Status >= 500 {
		ev = ev.Err(l.Err)
	}
	ev.Msg("request")
}
