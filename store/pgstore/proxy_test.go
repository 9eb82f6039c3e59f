package pgstore

import (
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
)

// proxy forwards TCP connections to a PostgreSQL server, so that a test can
// cut the Store off from its database (stop), let it back (start), or let
// its statements reach the server while the answers never come back
// (swallow).
type proxy struct {
	t      testing.TB
	target string // host:port of the server
	addr   string // the proxy's own address, kept across stop and start

	mu    sync.Mutex
	ln    net.Listener
	conns []net.Conn

	swallowing atomic.Bool // drop what the server sends
}

// newProxy starts a proxy to the server of dbURL and returns it with the
// URL that goes through it.
func newProxy(t testing.TB, dbURL string) (*proxy, string) {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatalf("url.Parse(%q): %v", dbURL, err)
	}
	p := &proxy{t: t, target: u.Host, addr: "127.0.0.1:0"}
	p.start()
	t.Cleanup(p.stop)
	u.Host = p.addr
	return p, u.String()
}

// start listens (again) on the proxy's address.
func (p *proxy) start() {
	p.t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatalf("proxy: listen on %s: %v", p.addr, err)
	}
	p.mu.Lock()
	p.ln, p.addr = ln, ln.Addr().String()
	p.mu.Unlock()
	go p.accept(ln)
}

func (p *proxy) accept(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.ln != ln { // stopped while this one was being accepted
			p.mu.Unlock()
			c.Close()
			s.Close()
			continue
		}
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		go func() {
			io.Copy(s, c)
			s.Close()
		}()
		go func() {
			buf := make([]byte, 32<<10)
			for {
				n, err := s.Read(buf)
				if n > 0 && !p.swallowing.Load() {
					if _, werr := c.Write(buf[:n]); werr != nil {
						break
					}
				}
				if err != nil {
					break
				}
			}
			c.Close()
		}()
	}
}

// cut closes every connection through the proxy, leaving it listening.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// stop closes the listener and every connection: the database cannot be
// reached until start.
func (p *proxy) stop() {
	p.mu.Lock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	p.mu.Unlock()
	p.cut()
}

// swallow makes the proxy drop (on) or forward (off) what the server sends.
func (p *proxy) swallow(on bool) { p.swallowing.Store(on) }
