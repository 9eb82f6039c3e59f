package netproxy

import (
	"bytes"
	"errors"
	"net"
	"sync"
	"time"
)

// Mode is what a Proxy does with the bytes and connections it carries.
type Mode int

const (
	Pass   Mode = iota // forward
	Refuse             // reset open and new connections
	Hold               // forward nothing, keep connections open
)

func (m Mode) String() string {
	switch m {
	case Pass:
		return "pass"
	case Refuse:
		return "refuse"
	case Hold:
		return "hold"
	}
	return "mode(?)"
}

// Cut says where a CutOn hook cuts a connection.
type Cut int

const (
	// CutBefore forwards the bytes before the pattern, then resets the
	// client's side and half-closes the server's: the server never sees
	// the pattern. (If the pattern straddles two reads, its first part
	// has gone already; the server then holds a truncated message, which
	// it cannot act on.)
	CutBefore Cut = iota + 1
	// CutAfter forwards the bytes up to the end of the pattern, then
	// resets the client's side and half-closes the server's: the server
	// reads the pattern and then end of stream, and whatever it answers is
	// read and discarded until it closes.
	CutAfter
)

// holdAfter is the place of a HoldOn hook: it forwards the bytes read
// with the pattern, then holds.
const holdAfter Cut = CutAfter + 1

// Proxy is a TCP proxy; see the package documentation.
type Proxy struct {
	target string
	ln     net.Listener
	wg     sync.WaitGroup

	mu      sync.Mutex
	mode    Mode
	changed chan struct{} // closed and replaced on each SetMode and on Close
	links   map[*link]struct{}
	cut     *cut // armed hook, nil if none
	closed  bool
}

type cut struct {
	pattern  []byte
	where    Cut
	then     Mode // with switches, the mode to switch to at the cut
	switches bool
	done     chan struct{}
}

// link is one proxied connection.
type link struct {
	client, server *net.TCPConn
	closeOnce      sync.Once
	gone           chan struct{} // closed once the link is closed
	cutting        chan struct{} // closed once a cut fired on the link

	// Under Proxy.mu:
	cut      *cut // the cut that fired on l, if any
	downDone bool // down has returned
}

// New listens on 127.0.0.1:0 and forwards to target (host:port), in mode
// Pass. Close stops it.
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{
		target:  target,
		ln:      ln,
		changed: make(chan struct{}),
		links:   make(map[*link]struct{}),
	}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the host:port the proxy listens on.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Port is the port the proxy listens on.
func (p *Proxy) Port() int { return p.ln.Addr().(*net.TCPAddr).Port }

// SetMode switches every connection, open and new, to m.
func (p *Proxy) SetMode(m Mode) { p.setMode(m, nil) }

// setMode switches every connection but except, open and new, to m.
func (p *Proxy) setMode(m Mode, except *link) {
	p.mu.Lock()
	p.mode = m
	close(p.changed)
	p.changed = make(chan struct{})
	var reset []*link
	if m == Refuse {
		reset = p.linksBut(except)
	}
	p.mu.Unlock()
	for _, l := range reset {
		p.drop(l)
	}
}

// Break resets every open connection, with what it holds, and switches
// to Pass: the network is back, the connections it carried are lost.
func (p *Proxy) Break() {
	p.SetMode(Refuse)
	p.SetMode(Pass)
}

// linksBut returns the open connections but except; p.mu is held.
func (p *Proxy) linksBut(except *link) []*link {
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		if l != except {
			links = append(links, l)
		}
	}
	return links
}

// Mode reports the current mode.
func (p *Proxy) Mode() Mode {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode
}

// CutOn arms a hook that cuts the first connection on which the client
// sends pattern, as where says, and disarms itself. It replaces a hook
// armed before and not yet fired. The channel it returns is closed once
// the cut is complete: the server has read to the end of what it was
// sent and closed its end, so it has acted on it (with CutAfter, on the
// pattern), or the proxy dropped the connection (Refuse, Close).
func (p *Proxy) CutOn(pattern []byte, where Cut) <-chan struct{} {
	return p.arm(&cut{pattern: pattern, where: where})
}

// CutOnThen is CutOn that also switches the proxy to mode then at the
// cut, before the client's side is reset: the client finds the network
// as then says from the moment it learns of the cut (with Refuse or Hold,
// an outage that starts with the cut).
func (p *Proxy) CutOnThen(pattern []byte, where Cut, then Mode) <-chan struct{} {
	return p.arm(&cut{pattern: pattern, where: where, then: then, switches: true})
}

// arm arms the hook c.
func (p *Proxy) arm(c *cut) <-chan struct{} {
	if len(c.pattern) == 0 || c.where < CutBefore || c.where > holdAfter {
		panic("netproxy: CutOn needs a pattern and CutBefore or CutAfter")
	}
	c.pattern, c.done = bytes.Clone(c.pattern), make(chan struct{})
	p.mu.Lock()
	p.cut = c
	p.mu.Unlock()
	return c.done
}

// HoldOn arms a one-shot hook that switches the proxy to Hold, for every
// connection, as soon as a client sends pattern: the bytes read with the
// pattern are forwarded (the server acts on them) and nothing passes
// after them, the server's answer included, until SetMode. So a test can
// freeze a client at a chosen point, in the middle of a transaction say.
// It replaces a hook armed before (by CutOn too) and not yet fired. The
// channel it returns is closed once the proxy holds and the pattern went
// through.
func (p *Proxy) HoldOn(pattern []byte) <-chan struct{} {
	return p.arm(&cut{pattern: pattern, where: holdAfter})
}

// Close stops listening and closes every connection.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.changed)
	p.changed = make(chan struct{})
	links := p.linksBut(nil)
	p.mu.Unlock()
	err := p.ln.Close()
	for _, l := range links {
		p.drop(l)
	}
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		client := c.(*net.TCPConn)
		if p.Mode() == Refuse {
			reset(client)
			continue
		}
		p.wg.Add(1)
		go p.open(client)
	}
}

// open dials the target for client and starts forwarding.
func (p *Proxy) open(client *net.TCPConn) {
	defer p.wg.Done()
	s, err := net.DialTimeout("tcp", p.target, 10*time.Second)
	if err != nil {
		reset(client)
		return
	}
	l := &link{client: client, server: s.(*net.TCPConn), gone: make(chan struct{}), cutting: make(chan struct{})}
	p.mu.Lock()
	if p.closed || p.mode == Refuse {
		p.mu.Unlock()
		reset(l.client)
		reset(l.server)
		return
	}
	p.links[l] = struct{}{}
	p.mu.Unlock()
	p.wg.Add(2)
	go p.up(l)
	go p.down(l)
}

// drop resets both sides of l and forgets it.
func (p *Proxy) drop(l *link) {
	l.closeOnce.Do(func() {
		close(l.gone)
		reset(l.client)
		reset(l.server)
	})
	p.mu.Lock()
	delete(p.links, l)
	p.mu.Unlock()
}

// reset closes c with a RST rather than a FIN, so the peer's next read or
// write fails instead of seeing an orderly end.
func reset(c *net.TCPConn) {
	c.SetLinger(0)
	c.Close()
}

// pass blocks while the proxy holds, and reports whether bytes of l may be
// forwarded: false once l or the proxy is closed or refusing, or l cut.
func (p *Proxy) pass(l *link) bool {
	for {
		p.mu.Lock()
		mode, changed, closed := p.mode, p.changed, p.closed
		p.mu.Unlock()
		switch {
		case closed || mode == Refuse:
			return false
		case mode == Pass:
			select {
			case <-l.gone:
				return false
			default:
				return true
			}
		}
		select {
		case <-changed:
		case <-l.gone:
			return false
		case <-l.cutting:
			return false
		}
	}
}

// up forwards client to server, watching for an armed cut.
func (p *Proxy) up(l *link) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	var tail []byte // the last bytes forwarded, for a pattern that straddles reads
	for {
		n, err := l.client.Read(buf)
		if n > 0 {
			chunk := buf[:n]
			if !p.pass(l) {
				p.drop(l)
				return
			}
			c, end := p.match(&tail, chunk)
			if c != nil && c.where != holdAfter {
				p.cutAt(l, c, chunk, end)
				return
			}
			if c != nil {
				p.SetMode(Hold) // first: the answer to chunk is held too
			}
			_, werr := l.server.Write(chunk)
			if c != nil {
				close(c.done)
			}
			if werr != nil {
				p.drop(l)
				return
			}
		}
		if err != nil {
			p.drop(l)
			return
		}
	}
}

// down forwards server to client. Once l is cut it discards what the
// server says until the server closes, and then completes the cut.
func (p *Proxy) down(l *link) {
	defer p.wg.Done()
	defer func() {
		p.drop(l)
		p.mu.Lock()
		l.downDone = true
		c := l.cut
		p.mu.Unlock()
		if c != nil {
			close(c.done)
		}
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := l.server.Read(buf)
		if n > 0 && !p.isCut(l) {
			if p.pass(l) {
				if _, err := l.client.Write(buf[:n]); err != nil && !p.isCut(l) {
					return
				}
			} else if !p.isCut(l) {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *Proxy) isCut(l *link) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return l.cut != nil
}

// match looks for the armed pattern in tail+chunk, ending in chunk. If
// found, it disarms the hook and returns it with the offset in chunk where
// the pattern ends (it starts len(pattern) before, possibly in tail).
// Otherwise it keeps in tail the bytes a straddling pattern could start
// with.
func (p *Proxy) match(tail *[]byte, chunk []byte) (*cut, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.cut
	if c == nil {
		*tail = (*tail)[:0]
		return nil, 0
	}
	if keep := len(c.pattern) - 1; len(*tail) > keep {
		*tail = (*tail)[len(*tail)-keep:]
	}
	hay := append(*tail, chunk...)
	i := bytes.Index(hay, c.pattern)
	if i < 0 {
		keep := min(len(c.pattern)-1, len(hay))
		*tail = append((*tail)[:0], hay[len(hay)-keep:]...)
		return nil, 0
	}
	p.cut = nil
	return c, i + len(c.pattern) - (len(hay) - len(chunk))
}

// cutAt cuts l at chunk, whose first end bytes complete c's pattern: it
// forwards what goes before the pattern (CutBefore) or through it
// (CutAfter), half-closes the server's side so that the server reads
// those bytes and then the end of the stream (a reset might discard them),
// and resets the client's side. down completes the cut once the server
// has closed.
func (p *Proxy) cutAt(l *link, c *cut, chunk []byte, end int) {
	n := end
	if c.where == CutBefore {
		n = max(end-len(c.pattern), 0)
	}
	// The link counts as cut before the server gets the last bytes, so
	// that its answer to them, however fast, is drained, never forwarded.
	p.mu.Lock()
	l.cut = c
	finished := l.downDone
	p.mu.Unlock()
	close(l.cutting) // down may be held: it should drain instead
	if finished {
		// The server had closed already; nobody else will say so.
		close(c.done)
		p.drop(l)
		return
	}
	if _, err := l.server.Write(chunk[:n]); err != nil {
		p.drop(l)
		return
	}
	l.server.CloseWrite()
	if c.switches {
		p.setMode(c.then, l)
	}
	reset(l.client)
	// Should the server never close, the read deadline ends the wait.
	l.server.SetReadDeadline(time.Now().Add(30 * time.Second))
}
