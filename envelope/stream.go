package envelope

import (
	"context"
	"errors"
	"io"

	"github.com/ringkms/kms"
)

// Writer seals what is written to it into an envelope on an underlying
// writer, a chunk at a time: memory stays at one chunk whatever the size.
// Close seals the last chunk; without it the envelope is incomplete and
// does not open. A Writer is not safe for concurrent use.
type Writer struct {
	dst    io.Writer
	st     *state
	res    *kms.EncryptResult
	buf    []byte // ChunkSize of plaintext, and room for the tag
	n      int    // plaintext bytes in buf
	i      uint64 // index of the chunk in buf
	err    error  // sticky
	closed bool
}

// NewWriter makes the encrypt call for a new envelope and writes its
// prelude to dst; what is then written to the Writer is sealed into dst.
// Closing the Writer does not close dst.
func (s *Sealer) NewWriter(ctx context.Context, dst io.Writer, in SealInput) (*Writer, error) {
	res, prelude, st, err := s.begin(ctx, in)
	if err != nil {
		return nil, err
	}
	return newWriter(dst, res, prelude, st)
}

// newWriter writes the prelude of the envelope of the encrypt call res
// to dst and returns the Writer of its chunks.
func newWriter(dst io.Writer, res *kms.EncryptResult, prelude []byte, st *state) (*Writer, error) {
	if _, err := dst.Write(prelude); err != nil {
		return nil, err
	}
	return &Writer{dst: dst, st: st, res: res, buf: make([]byte, chunkCT)}, nil
}

// Result is the answer of the envelope's encrypt call: the key's ID, the
// hash and header, and the Asset it created or updated.
func (w *Writer) Result() *kms.EncryptResult { return w.res }

var errClosed = errors.New("envelope: write after Close")

// Write seals p into the envelope. A full chunk is written to the
// underlying writer only once a byte after it is known: the last chunk
// is marked as such, and only Close knows which one that is, so an input
// that ends on a chunk boundary ends with a full last chunk.
func (w *Writer) Write(p []byte) (int, error) {
	if w.closed {
		return 0, errClosed
	}
	if w.err != nil {
		return 0, w.err
	}
	written := 0
	for len(p) > 0 {
		if w.n == ChunkSize {
			if w.err = w.flush(false); w.err != nil {
				return written, w.err
			}
		}
		c := copy(w.buf[w.n:ChunkSize], p)
		w.n += c
		written += c
		p = p[c:]
	}
	return written, nil
}

// ReadFrom seals all of r into the envelope (io.Copy uses it), reading
// straight into the chunk buffer. As with Write, a full chunk is sealed
// as not the last only once a byte after it has been read: each read
// asks for one byte more than the chunk has room for, and that byte,
// read into the room for the tag, moves to the next chunk.
func (w *Writer) ReadFrom(r io.Reader) (int64, error) {
	if w.closed {
		return 0, errClosed
	}
	if w.err != nil {
		return 0, w.err
	}
	var total int64
	for {
		n, err := r.Read(w.buf[w.n : ChunkSize+1])
		w.n += n
		total += int64(n)
		if w.n > ChunkSize {
			if w.err = w.flushFull(); w.err != nil {
				return total, w.err
			}
		}
		if err == io.EOF {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

// flushFull seals and writes the full chunk in buf, which a byte of the
// next chunk follows, as not the last, and keeps that byte.
func (w *Writer) flushFull() error {
	next := w.buf[ChunkSize]
	w.n = ChunkSize
	err := w.flush(false)
	w.buf[0], w.n = next, 1
	return err
}

// flush seals the chunk in buf in place and writes it.
func (w *Writer) flush(last bool) error {
	ct := w.st.seal(w.buf[:0], w.buf[:w.n], w.i, last)
	w.i++
	w.n = 0
	_, err := w.dst.Write(ct)
	return err
}

// Close seals and writes the last chunk. It does not close the
// underlying writer. Calling it again does nothing.
func (w *Writer) Close() error {
	if w.closed {
		return w.err
	}
	w.closed = true
	if w.err != nil {
		return w.err
	}
	w.err = w.flush(true)
	clear(w.buf)
	return w.err
}

// Reader opens an envelope from an underlying reader, a chunk at a time.
// Each chunk's plaintext is returned once the chunk is authenticated; see
// the package documentation for what that means at the end of a stream.
// A Reader is not safe for concurrent use.
type Reader struct {
	src  io.Reader
	st   *state
	info *Info
	res  *kms.DecryptResult
	buf  []byte // one sealed chunk, and one byte of the next
	have int    // bytes of the next chunk already in buf (0 or 1)
	pt   []byte // plaintext of the current chunk not yet read
	i    uint64 // index of the next chunk
	done bool   // the last chunk was opened
	err  error  // sticky
}

// NewReader reads an envelope's prelude from src, checks its header with
// the service (a decrypt call), and returns a Reader of its plaintext.
// ad must be the associated data the envelope was sealed with.
func (s *Sealer) NewReader(ctx context.Context, src io.Reader, ad []byte) (*Reader, error) {
	info, prelude, err := readPrelude(src)
	if err != nil {
		return nil, err
	}
	res, st, err := s.decrypt(ctx, info, prelude, ad)
	if err != nil {
		return nil, err
	}
	return &Reader{src: src, st: st, info: info, res: res, buf: make([]byte, chunkCT+1)}, nil
}

// Result is the answer of the envelope's decrypt call: the ring and key,
// and the verified Asset.
func (r *Reader) Result() *kms.DecryptResult { return r.res }

// Read reads plaintext. It returns io.EOF after the last chunk, and an
// error wrapping ErrFormat for a chunk that fails authentication, a
// stream that ends before its last chunk, or bytes after it.
func (r *Reader) Read(p []byte) (int, error) {
	for len(r.pt) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		if r.done {
			r.err = io.EOF
			clear(r.buf)
			return 0, r.err
		}
		r.err = r.next()
	}
	n := copy(p, r.pt)
	r.pt = r.pt[n:]
	return n, nil
}

// WriteTo writes all the plaintext to w (io.Copy uses it), with no copy
// of the chunks.
func (r *Reader) WriteTo(w io.Writer) (int64, error) {
	var total int64
	for {
		if len(r.pt) > 0 {
			n, err := w.Write(r.pt)
			total += int64(n)
			r.pt = r.pt[n:]
			if err != nil {
				return total, err
			}
			continue
		}
		if r.err != nil {
			if r.err == io.EOF {
				return total, nil
			}
			return total, r.err
		}
		if r.done {
			r.err = io.EOF
			clear(r.buf)
			continue
		}
		r.err = r.next()
	}
}

// next reads and opens the next chunk. A chunk is the last when the
// stream ends within or right after it. A last chunk of no plaintext
// after a full one, which earlier versions of the Writer wrote when
// io.Copy fed them an input that ended on a chunk boundary, opens as any
// other last chunk (docs/FORMAT.md section 9.2).
func (r *Reader) next() error {
	if r.have > 0 {
		r.buf[0] = r.buf[chunkCT]
	}
	n, err := io.ReadFull(r.src, r.buf[r.have:])
	n += r.have
	last := false
	switch err {
	case nil: // a full chunk and a byte of the next
	case io.EOF, io.ErrUnexpectedEOF:
		last = true
		if n < tagSize {
			return formatError("it ends within chunk %d (%d bytes; a chunk has at least %d)", r.i, n, tagSize)
		}
	default:
		return err
	}
	size := min(n, chunkCT)
	pt, err := r.st.open(r.buf[:0], r.buf[:size], r.i, last)
	if err != nil {
		return err
	}
	r.i++
	r.pt = pt
	r.have = n - size
	r.done = last
	return nil
}
