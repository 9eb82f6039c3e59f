package netproxy_test

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/ringkms/kms/internal/netproxy"
)

// sink is a TCP server that reports everything one connection sent it,
// once that connection ends.
func sink(t *testing.T) (addr string, got <-chan string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	t.Cleanup(func() { ln.Close() })
	ch := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		b, _ := io.ReadAll(c)
		ch <- string(b)
	}()
	return ln.Addr().String(), ch
}

// TestCutStraddling: a pattern split over two writes of the client is
// still found, and the server gets exactly what each cut lets through.
func TestCutStraddling(t *testing.T) {
	for _, tc := range []struct {
		name  string
		where netproxy.Cut
		want  string
	}{
		// The first half of the pattern went with the first write.
		{"before", netproxy.CutBefore, "head-CO"},
		{"after", netproxy.CutAfter, "head-COMMIT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, got := sink(t)
			p, err := netproxy.New(addr)
			if err != nil {
				t.Fatalf("netproxy.New: %v", err)
			}
			defer p.Close()
			cut := p.CutOn([]byte("COMMIT"), tc.where)
			c, err := net.Dial("tcp", p.Addr())
			if err != nil {
				t.Fatalf("dial: %v", err)
			}
			defer c.Close()
			c.Write([]byte("head-CO"))
			time.Sleep(100 * time.Millisecond) // two reads on the proxy's side
			c.Write([]byte("MMIT-tail"))
			select {
			case s := <-got:
				if s != tc.want {
					t.Errorf("server got %q, want %q", s, tc.want)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("server saw no end of stream")
			}
			select {
			case <-cut:
			case <-time.After(10 * time.Second):
				t.Fatalf("cut not complete")
			}
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, err := c.Read(make([]byte, 1)); err == nil {
				t.Errorf("client read after the cut: no error")
			}
		})
	}
}
