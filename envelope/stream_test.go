package envelope_test

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"io"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ringkms/kms/envelope"
)

// pattern is a cheap, reproducible source of left bytes: a random table
// over and over, of a length that no chunk boundary divides, so that no
// two chunks are alike.
type pattern struct {
	left int64
	pos  int
}

var table = func() []byte {
	b := make([]byte, 1<<20+1)
	rand.Read(b)
	return b
}()

func (p *pattern) Read(b []byte) (int, error) {
	if p.left <= 0 {
		return 0, io.EOF
	}
	n := copy(b[:min(int64(len(b)), p.left)], table[p.pos%len(table):])
	p.pos += n
	p.left -= int64(n)
	return n, nil
}

// allocated returns the bytes allocated on the heap so far.
func allocated() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc
}

// heapSampler follows the heap's size while a run goes on, and gives its
// peak above the size at its start.
type heapSampler struct {
	stop chan struct{}
	wg   sync.WaitGroup
	base uint64
	peak atomic.Uint64
}

func sampleHeap() *heapSampler {
	runtime.GC()
	h := &heapSampler{stop: make(chan struct{})}
	h.base = heapBytes()
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			if b := heapBytes(); b > h.peak.Load() {
				h.peak.Store(b)
			}
			select {
			case <-h.stop:
				return
			case <-t.C:
			}
		}
	}()
	return h
}

// done stops the sampler and returns the peak growth of the heap.
func (h *heapSampler) done() uint64 {
	close(h.stop)
	h.wg.Wait()
	if p := h.peak.Load(); p > h.base {
		return p - h.base
	}
	return 0
}

func heapBytes() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// TestStreamConstantMemory: a 1 GiB stream seals and opens, through a
// pipe, allocating no more than a 1 MiB one does: memory is flat in the
// size of the input. The plaintext that comes out is checked against
// what went in.
func TestStreamConstantMemory(t *testing.T) {
	ctx, svc := service(t)
	sc := schemes(t, ctx, svc)[1]
	s := envelope.New(svc, sc.priv)
	run := func(size int64) (alloc uint64) {
		pr, pw := io.Pipe()
		errc := make(chan error, 1)
		go func() {
			// NewWriter writes the prelude: the pipe holds it until
			// NewReader reads it.
			w, err := s.NewWriter(ctx, pw, envelope.SealInput{RingName: sc.ring})
			if err == nil {
				_, err = io.Copy(w, &pattern{left: size})
			}
			if err == nil {
				err = w.Close()
			}
			pw.CloseWithError(err)
			errc <- err
		}()
		r, err := s.NewReader(ctx, pr, nil)
		if err != nil {
			t.Fatal(err)
		}
		start := allocated()
		want, got := sha256.New(), sha256.New()
		io.Copy(want, &pattern{left: size})
		n, err := io.Copy(got, r)
		alloc = allocated() - start
		if err != nil || n != size {
			t.Fatalf("read %d of %d bytes: %v", n, size, err)
		}
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Sum(nil), want.Sum(nil)) {
			t.Fatalf("%d bytes: the plaintext read differs from the one written", size)
		}
		return alloc
	}
	small := run(1 << 20)
	big := run(1 << 30)
	// Anything allocated per chunk would be 16384 times more for 1 GiB.
	// The slack is for the Service's own goroutines meanwhile.
	if big > small+8<<20 {
		t.Errorf("allocated %d bytes for 1 GiB, %d for 1 MiB: memory grows with the input", big, small)
	}
	t.Logf("allocated during the stream: 1 MiB %d bytes, 1 GiB %d bytes", small, big)
}

// BenchmarkStream compares sealing and opening streams with bare
// AES-256-GCM over the same 64 KiB chunks (read from the same source,
// sealed in place, written to the same sink), and reports the peak heap
// growth of each.
func BenchmarkStream(b *testing.B) {
	ctx, svc := service(b)
	sc := schemes(b, ctx, svc)[1]
	s := envelope.New(svc, sc.priv)
	key := make([]byte, 32)
	rand.Read(key)
	block, _ := aes.NewCipher(key)
	gcm, _ := cipher.NewGCM(block)
	for _, size := range []struct {
		name string
		n    int64
	}{{"1MiB", 1 << 20}, {"1GiB", 1 << 30}} {
		b.Run("bare-gcm-seal/"+size.name, func(b *testing.B) {
			measure(b, size.n, func() { bareSeal(gcm, size.n, io.Discard) })
		})
		b.Run("seal/"+size.name, func(b *testing.B) {
			measure(b, size.n, func() {
				w, err := s.NewWriter(ctx, io.Discard, envelope.SealInput{RingName: sc.ring})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := io.Copy(w, &pattern{left: size.n}); err != nil {
					b.Fatal(err)
				}
				if err := w.Close(); err != nil {
					b.Fatal(err)
				}
			})
		})

		// Opening reads a stream sealed beforehand, held in memory.
		var sealed, bare bytes.Buffer
		sealed.Grow(int(size.n + size.n/envelope.ChunkSize*16 + 1024))
		bare.Grow(int(size.n + size.n/envelope.ChunkSize*16 + 1024))
		w, err := s.NewWriter(ctx, &sealed, envelope.SealInput{RingName: sc.ring})
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(w, &pattern{left: size.n})
		w.Close()
		bareSeal(gcm, size.n, &bare)
		b.Run("bare-gcm-open/"+size.name, func(b *testing.B) {
			measure(b, size.n, func() {
				buf := make([]byte, envelope.ChunkSize+16)
				src := bytes.NewReader(bare.Bytes())
				var nonce [12]byte
				for i := uint64(0); ; i++ {
					n, _ := io.ReadFull(src, buf)
					if n == 0 {
						return
					}
					binary.BigEndian.PutUint64(nonce[3:], i)
					pt, err := gcm.Open(buf[:0], nonce[:], buf[:n], nonce[:])
					if err != nil {
						b.Fatal(err)
					}
					io.Discard.Write(pt)
				}
			})
		})
		b.Run("open/"+size.name, func(b *testing.B) {
			measure(b, size.n, func() {
				r, err := s.NewReader(ctx, bytes.NewReader(sealed.Bytes()), nil)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := io.Copy(io.Discard, r); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}

// bareSeal seals n bytes of pattern with bare AES-256-GCM, in chunks of
// envelope.ChunkSize, each with its index as nonce and associated data,
// and writes the sealed chunks to dst.
func bareSeal(gcm cipher.AEAD, n int64, dst io.Writer) {
	buf := make([]byte, envelope.ChunkSize+16)
	src := &pattern{left: n}
	var nonce [12]byte
	for i := uint64(0); ; i++ {
		n, _ := io.ReadFull(src, buf[:envelope.ChunkSize])
		binary.BigEndian.PutUint64(nonce[3:], i)
		dst.Write(gcm.Seal(buf[:0], nonce[:], buf[:n], nonce[:]))
		if n < envelope.ChunkSize {
			return
		}
	}
}

// measure runs op b.N times as a stream of n bytes and reports its
// throughput, allocations and peak heap growth.
func measure(b *testing.B, n int64, op func()) {
	b.SetBytes(n)
	b.ReportAllocs()
	h := sampleHeap()
	b.ResetTimer()
	for b.Loop() {
		op()
	}
	b.StopTimer()
	b.ReportMetric(float64(h.done()), "peak-heap-B")
}
