package mail

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"mime"
	"net"
	"net/textproto"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/testcert"
)

// fakeSMTP is a minimal SMTP server on 127.0.0.1:0: enough of RFC 5321,
// 3207 (STARTTLS) and 4954 (AUTH PLAIN) to receive what SMTP sends.
type fakeSMTP struct {
	ln         net.Listener
	tls        *tls.Config // offer STARTTLS when set
	user, pass string      // offer AUTH PLAIN when user is set
	rejectRcpt bool
	silent     bool // accept connections but never greet

	mu   sync.Mutex
	got  []received
	errs []error
	wg   sync.WaitGroup
}

type received struct {
	from, to string
	data     string
	tls      bool
	authUser string
}

func startFakeSMTP(t *testing.T, f *fakeSMTP) *fakeSMTP {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.ln = ln
	f.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			f.wg.Go(func() { f.serve(c) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		f.wg.Wait()
		for _, err := range f.errs {
			t.Errorf("fake SMTP server: %v", err)
		}
	})
	return f
}

func (f *fakeSMTP) addr() string { return f.ln.Addr().String() }

func (f *fakeSMTP) messages() []received {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]received(nil), f.got...)
}

func (f *fakeSMTP) serve(c net.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if f.silent {
		// Wait for the client to give up.
		c.Read(make([]byte, 1))
		return
	}
	tc := textproto.NewConn(c)
	reply := func(code int, lines ...string) {
		for i, l := range lines {
			sep := " "
			if i < len(lines)-1 {
				sep = "-"
			}
			tc.PrintfLine("%d%s%s", code, sep, l)
		}
	}
	reply(220, "fake ESMTP")
	var cur received
	for {
		line, err := tc.ReadLine()
		if err != nil {
			return
		}
		verb, arg, _ := strings.Cut(line, " ")
		switch strings.ToUpper(verb) {
		case "EHLO", "HELO":
			lines := []string{"fake greets " + arg}
			if f.tls != nil && !cur.tls {
				lines = append(lines, "STARTTLS")
			}
			if f.user != "" {
				lines = append(lines, "AUTH PLAIN")
			}
			lines = append(lines, "8BITMIME")
			reply(250, lines...)
		case "STARTTLS":
			reply(220, "go ahead")
			tlsConn := tls.Server(c, f.tls)
			if err := tlsConn.Handshake(); err != nil {
				return // the client may refuse our certificate
			}
			c = tlsConn
			tc = textproto.NewConn(c)
			cur = received{tls: true}
		case "AUTH":
			mech, ir, _ := strings.Cut(arg, " ")
			raw, err := base64.StdEncoding.DecodeString(ir)
			parts := strings.Split(string(raw), "\x00")
			if mech != "PLAIN" || err != nil || len(parts) != 3 || parts[1] != f.user || parts[2] != f.pass {
				reply(535, "authentication failed")
				continue
			}
			cur.authUser = parts[1]
			reply(235, "ok")
		case "MAIL":
			if f.user != "" && cur.authUser == "" {
				reply(530, "authentication required")
				continue
			}
			cur.from, _, _ = strings.Cut(strings.TrimPrefix(arg, "FROM:<"), ">")
			reply(250, "ok")
		case "RCPT":
			if f.rejectRcpt {
				reply(550, "no such user")
				continue
			}
			cur.to, _, _ = strings.Cut(strings.TrimPrefix(arg, "TO:<"), ">")
			reply(250, "ok")
		case "DATA":
			reply(354, "end with .")
			data, err := tc.ReadDotBytes()
			if err != nil {
				return
			}
			cur.data = string(data)
			f.mu.Lock()
			f.got = append(f.got, cur)
			f.mu.Unlock()
			cur = received{tls: cur.tls, authUser: cur.authUser}
			reply(250, "queued")
		case "RSET":
			cur = received{tls: cur.tls, authUser: cur.authUser}
			reply(250, "ok")
		case "NOOP":
			reply(250, "ok")
		case "QUIT":
			reply(221, "bye")
			return
		default:
			reply(502, "unknown command")
		}
	}
}

// selfSigned returns a server certificate for 127.0.0.1 and a pool that
// trusts it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	c := testcert.SelfSigned(t)
	return c.TLS(), c.Pool()
}

// parseMessage splits a received message (with LF line endings, as
// textproto's dot reader returns it) into its headers and body.
func parseMessage(t *testing.T, data string) (textproto.MIMEHeader, string) {
	t.Helper()
	r := textproto.NewReader(bufio.NewReader(strings.NewReader(data)))
	h, err := r.ReadMIMEHeader()
	if err != nil {
		t.Fatalf("message headers: %v", err)
	}
	_, body, _ := strings.Cut(data, "\n\n")
	return h, body
}

func TestSMTPSend(t *testing.T) {
	cert, pool := selfSigned(t)
	msg := kms.Message{
		To:      "Ada Lovelace <ada@example.com>",
		Subject: "Invitation à ringkms",
		Body:    "Follow this link:\nhttps://kms.example.com/invite?token=abc\n.\n..dots stay\n",
	}
	tests := []struct {
		name     string
		server   *fakeSMTP
		client   SMTP
		wantTLS  bool
		wantUser string
	}{
		{
			name:   "plain",
			server: &fakeSMTP{},
			client: SMTP{From: "ringkms <kms@example.com>"},
		},
		{
			name:     "auth without TLS to localhost",
			server:   &fakeSMTP{user: "kms", pass: "s3cret"},
			client:   SMTP{From: "kms@example.com", Username: "kms", Password: "s3cret"},
			wantUser: "kms",
		},
		{
			name:     "STARTTLS and auth",
			server:   &fakeSMTP{tls: &tls.Config{Certificates: []tls.Certificate{cert}}, user: "kms", pass: "s3cret"},
			client:   SMTP{From: "kms@example.com", Username: "kms", Password: "s3cret", RequireTLS: true, TLSConfig: &tls.Config{RootCAs: pool}},
			wantTLS:  true,
			wantUser: "kms",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := startFakeSMTP(t, tt.server)
			c := tt.client
			c.Addr = srv.addr()
			if err := c.Send(context.Background(), msg); err != nil {
				t.Fatalf("Send = %v", err)
			}
			got := srv.messages()
			if len(got) != 1 {
				t.Fatalf("server received %d messages, want 1", len(got))
			}
			r := got[0]
			if r.from != "kms@example.com" || r.to != "ada@example.com" {
				t.Errorf("envelope = %q -> %q, want kms@example.com -> ada@example.com", r.from, r.to)
			}
			if r.tls != tt.wantTLS || r.authUser != tt.wantUser {
				t.Errorf("tls, user = %v, %q; want %v, %q", r.tls, r.authUser, tt.wantTLS, tt.wantUser)
			}
			h, body := parseMessage(t, r.data)
			if got := h.Get("To"); !strings.Contains(got, "<ada@example.com>") {
				t.Errorf("To = %q", got)
			}
			if got := h.Get("From"); !strings.Contains(got, "kms@example.com") {
				t.Errorf("From = %q", got)
			}
			if got := h.Get("Content-Type"); got != "text/plain; charset=utf-8" {
				t.Errorf("Content-Type = %q", got)
			}
			dec := new(mime.WordDecoder)
			if got, err := dec.DecodeHeader(h.Get("Subject")); err != nil || got != msg.Subject {
				t.Errorf("Subject = %q (%v), want %q", got, err, msg.Subject)
			}
			if body != msg.Body {
				t.Errorf("body = %q, want %q", body, msg.Body)
			}
		})
	}
}

func TestSMTPErrors(t *testing.T) {
	_, pool := selfSigned(t)
	otherCert, _ := selfSigned(t)
	msg := kms.Message{To: "ada@example.com", Subject: "s", Body: "b"}
	tests := []struct {
		name   string
		server *fakeSMTP
		client SMTP
		want   string
	}{
		{"TLS required but not offered", &fakeSMTP{}, SMTP{From: "kms@example.com", RequireTLS: true}, "STARTTLS"},
		{"untrusted certificate", &fakeSMTP{tls: &tls.Config{Certificates: []tls.Certificate{otherCert}}}, SMTP{From: "kms@example.com", TLSConfig: &tls.Config{RootCAs: pool}}, "STARTTLS"},
		{"wrong password", &fakeSMTP{user: "kms", pass: "right"}, SMTP{From: "kms@example.com", Username: "kms", Password: "wrong"}, "AUTH"},
		{"no AUTH offered", &fakeSMTP{}, SMTP{From: "kms@example.com", Username: "kms", Password: "x"}, "AUTH"},
		{"recipient rejected", &fakeSMTP{rejectRcpt: true}, SMTP{From: "kms@example.com"}, "RCPT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := startFakeSMTP(t, tt.server)
			c := tt.client
			c.Addr = srv.addr()
			err := c.Send(context.Background(), msg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Send = %v, want an error about %s", err, tt.want)
			}
			if got := srv.messages(); len(got) != 0 {
				t.Errorf("server received %d messages, want none", len(got))
			}
		})
	}
}

func TestSMTPDeadline(t *testing.T) {
	srv := startFakeSMTP(t, &fakeSMTP{silent: true})
	c := SMTP{Addr: srv.addr(), From: "kms@example.com"}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := c.Send(ctx, kms.Message{To: "ada@example.com"})
	if err == nil {
		t.Fatal("Send to a silent server = nil, want an error")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Send = %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Send took %v after its deadline", d)
	}
}

func TestSMTPCheck(t *testing.T) {
	tests := []struct {
		name string
		c    SMTP
		ok   bool
	}{
		{"ok", SMTP{Addr: "mail.example.com:587", From: "kms@example.com"}, true},
		{"ok with name", SMTP{Addr: "mail.example.com:587", From: "Ring KMS <kms@example.com>"}, true},
		{"no address", SMTP{From: "kms@example.com"}, false},
		{"no port", SMTP{Addr: "mail.example.com", From: "kms@example.com"}, false},
		{"no sender", SMTP{Addr: "mail.example.com:587"}, false},
		{"bad sender", SMTP{Addr: "mail.example.com:587", From: "not an address"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.c.Check(); (err == nil) != tt.ok {
				t.Errorf("Check() = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

func TestSMTPRejectsHeaderInjection(t *testing.T) {
	srv := startFakeSMTP(t, &fakeSMTP{})
	c := SMTP{Addr: srv.addr(), From: "kms@example.com"}
	for _, m := range []kms.Message{
		{To: "ada@example.com\r\nBcc: evil@example.com", Subject: "s"},
		{To: "ada@example.com", Subject: "s\nBcc: evil@example.com"},
	} {
		if err := c.Send(context.Background(), m); err == nil {
			t.Errorf("Send(%q, %q) = nil, want an error", m.To, m.Subject)
		}
	}
	if got := srv.messages(); len(got) != 0 {
		t.Errorf("server received %d messages, want none", len(got))
	}
}
