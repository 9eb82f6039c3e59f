package httpedge

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
)

// JSONWriter writes the JSON answers of a protocol, each protocol in its
// own format (its content type, its body for an internal error, headers
// of its own), and all alike otherwise: an answer is per caller
// (Cache-Control: no-store) unless it is Conditional, is not sniffed,
// carries its length, and ends with a newline.
type JSONWriter struct {
	// ContentType is the Content-Type of every answer with a body.
	ContentType string
	// Internal is the body of the 500 written in place of an answer
	// that cannot be encoded or has no final status: a programming
	// error, noted for the log with the code InternalCode.
	Internal     any
	InternalCode string
	// Header, when set, adds the protocol's own headers to each answer
	// (AWS's request ID...).
	Header func(h http.Header, r *http.Request)
}

// Appender is an answer that encodes itself without reflection, as
// json.Marshal would (the hot answers: encrypt, decrypt).
type Appender interface {
	AppendJSON([]byte) ([]byte, error)
}

// Conditional is an answer that is the same for every caller, which
// caches may keep: the writer encodes Body(), and NotModified sets the
// answer's validators in h (replacing no-store) and reports whether r
// holds the answer b already, which is then answered 304 with no body.
type Conditional interface {
	Body() any
	NotModified(h http.Header, r *http.Request, b []byte) bool
}

// Write writes v with status: JSON, or no body at all for a nil v (a
// 204). The status must be a final one, 200 to 599: any other is a
// programming error, answered 500 and never written (net/http panics on
// a status below 100, and takes a 1xx for an interim answer).
func (j *JSONWriter) Write(w http.ResponseWriter, r *http.Request, status int, v any) {
	c, conditional := v.(Conditional)
	if conditional {
		v = c.Body()
	}
	var b []byte
	var bad error
	switch ap, fast := v.(Appender); {
	case status < 200 || status > 599:
		bad = fmt.Errorf("answer status %d: a final status is 200 to 599", status)
	case v == nil:
	case fast:
		buf := Buffer()
		defer PutBuffer(buf)
		if b, bad = ap.AppendJSON(buf.AvailableBuffer()); bad == nil {
			buf.Write(b) // in place; a first answer that outgrew buf grows it
			b = buf.Bytes()
		}
	default:
		b, bad = json.Marshal(v)
	}
	if bad != nil {
		NoteError(r, fmt.Errorf("encode answer: %w", bad), j.InternalCode)
		status, conditional = http.StatusInternalServerError, false
		if b, bad = json.Marshal(j.Internal); bad != nil {
			b = []byte(`"internal error"`)
		}
	}
	// The values share one array (each its own slice, so that appending
	// to one cannot touch another); the names are canonical. The
	// Content-Length, set last, shares the array too.
	v4 := []string{j.ContentType, "nosniff", "no-store", ""}
	h := w.Header()
	h["X-Content-Type-Options"] = v4[1:2:2]
	h["Cache-Control"] = v4[2:3:3]
	if j.Header != nil {
		j.Header(h, r)
	}
	if b == nil {
		w.WriteHeader(status)
		return
	}
	h["Content-Type"] = v4[0:1:1]
	if conditional && c.NotModified(h, r, b) {
		h.Del("Content-Type")
		w.WriteHeader(http.StatusNotModified)
		return
	}
	b = append(b, '\n')
	v4[3] = strconv.Itoa(len(b))
	h["Content-Length"] = v4[3:4:4]
	w.WriteHeader(status)
	w.Write(b) // the server copies it, or writes it, before returning
}

// bufs holds the buffers that request bodies are read into and answers
// encoded into; one that grew past maxPooledBuf is left to the collector.
var bufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

const maxPooledBuf = 16 << 10

// Buffer returns an empty buffer of the pool; PutBuffer gives it back
// once nothing refers to its bytes.
func Buffer() *bytes.Buffer { return bufs.Get().(*bytes.Buffer) }

// PutBuffer returns b to the pool, unless it grew large.
func PutBuffer(b *bytes.Buffer) {
	if b.Cap() <= maxPooledBuf {
		b.Reset()
		bufs.Put(b)
	}
}
