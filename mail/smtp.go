package mail

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"mime"
	"net"
	netmail "net/mail"
	"net/smtp"
	"os"
	"strings"
	"time"

	"github.com/ringkms/kms"
)

var _ kms.Mailer = (*SMTP)(nil)

// DefaultSMTPTimeout bounds one Send when the context has no deadline.
const DefaultSMTPTimeout = 30 * time.Second

// SMTP is a kms.Mailer that sends each message through an SMTP server,
// one connection per message.
//
// When the server offers STARTTLS, SMTP upgrades the connection before
// anything else, verifying the server's certificate for the host of Addr
// (or TLSConfig). When Username is set, it authenticates with PLAIN; like
// net/smtp, it refuses to send credentials over a connection that is not
// encrypted, unless the server is on localhost. With RequireTLS, a server
// that does not offer STARTTLS is an error.
//
// The zero value is not usable: Addr and From are required.
type SMTP struct {
	// Addr is the server, host:port (port 587 for submission with
	// STARTTLS, 25 for relay).
	Addr string

	// From is the sender address, for the envelope and the From header:
	// "kms@example.com" or "Ring KMS <kms@example.com>".
	From string

	// Username and Password, when Username is set, authenticate with
	// SMTP AUTH PLAIN.
	Username string
	Password string

	// RequireTLS makes Send fail when the server does not offer STARTTLS.
	RequireTLS bool

	// TLSConfig configures STARTTLS. Nil means the system roots and the
	// host of Addr as the server name.
	TLSConfig *tls.Config

	// HelloName is the name sent in EHLO. Empty means "localhost".
	HelloName string

	// Timeout bounds one Send when ctx has no deadline. Zero means
	// DefaultSMTPTimeout.
	Timeout time.Duration
}

// Check validates the configuration, so that a server can refuse to start
// with a bad one instead of failing on the first mail.
func (s *SMTP) Check() error {
	if s.Addr == "" {
		return errors.New("mail: SMTP server address is required")
	}
	host, port, err := net.SplitHostPort(s.Addr)
	if err != nil || host == "" || port == "" {
		return fmt.Errorf("mail: SMTP server address %q is not host:port", s.Addr)
	}
	if s.From == "" {
		return errors.New("mail: SMTP sender (From) is required")
	}
	if _, err := netmail.ParseAddress(s.From); err != nil {
		return fmt.Errorf("mail: SMTP sender %q: %v", s.From, err)
	}
	return nil
}

// Send delivers m. It honours ctx's deadline and cancellation.
func (s *SMTP) Send(ctx context.Context, m kms.Message) error {
	if err := s.Check(); err != nil {
		return err
	}
	if err := checkHeaders(m); err != nil {
		return err
	}
	from, _ := netmail.ParseAddress(s.From)
	to, err := netmail.ParseAddress(m.To)
	if err != nil {
		return fmt.Errorf("mail: recipient: %v", err)
	}
	msg := s.compose(from, to, m)

	timeout := s.Timeout
	if timeout <= 0 {
		timeout = DefaultSMTPTimeout
	}
	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	var d net.Dialer
	dctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	conn, err := d.DialContext(dctx, "tcp", s.Addr)
	if err != nil {
		return fmt.Errorf("mail: connect to SMTP server: %w", err)
	}
	conn.SetDeadline(deadline)
	// Cancelling ctx aborts the exchange.
	stop := context.AfterFunc(dctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	host, _, _ := net.SplitHostPort(s.Addr)
	c, err := smtp.NewClient(conn, host)
	if err != nil {
		conn.Close()
		return s.wrap(ctx, "greeting", err)
	}
	defer c.Close()
	hello := s.HelloName
	if hello == "" {
		hello = "localhost"
	}
	if err := c.Hello(hello); err != nil {
		return s.wrap(ctx, "EHLO", err)
	}
	if ok, _ := c.Extension("STARTTLS"); ok {
		cfg := s.TLSConfig.Clone()
		if cfg == nil {
			cfg = &tls.Config{}
		}
		if cfg.ServerName == "" {
			cfg.ServerName = host
		}
		if cfg.MinVersion == 0 {
			cfg.MinVersion = tls.VersionTLS12
		}
		if err := c.StartTLS(cfg); err != nil {
			return s.wrap(ctx, "STARTTLS", err)
		}
	} else if s.RequireTLS {
		return errors.New("mail: the SMTP server does not offer STARTTLS, which is required")
	}
	if s.Username != "" {
		if ok, _ := c.Extension("AUTH"); !ok {
			return errors.New("mail: the SMTP server does not offer AUTH, but a user name is set")
		}
		if err := c.Auth(smtp.PlainAuth("", s.Username, s.Password, host)); err != nil {
			return s.wrap(ctx, "AUTH", err)
		}
	}
	if err := c.Mail(from.Address); err != nil {
		return s.wrap(ctx, "MAIL FROM", err)
	}
	if err := c.Rcpt(to.Address); err != nil {
		return s.wrap(ctx, "RCPT TO", err)
	}
	w, err := c.Data()
	if err != nil {
		return s.wrap(ctx, "DATA", err)
	}
	if _, err := w.Write(msg); err != nil {
		return s.wrap(ctx, "DATA", err)
	}
	if err := w.Close(); err != nil {
		return s.wrap(ctx, "DATA", err)
	}
	if err := c.Quit(); err != nil {
		return s.wrap(ctx, "QUIT", err)
	}
	return nil
}

// wrap names the step that failed. A timeout that ctx's deadline caused
// is reported as ctx's error, whichever of the connection or the context
// noticed it first.
func (s *SMTP) wrap(ctx context.Context, step string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("mail: SMTP %s: %w", step, ctx.Err())
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
			return fmt.Errorf("mail: SMTP %s: %w", step, context.DeadlineExceeded)
		}
		return fmt.Errorf("mail: SMTP %s: timed out: %w", step, err)
	}
	return fmt.Errorf("mail: SMTP %s: %w", step, err)
}

// compose renders the message: headers, a blank line, the body as UTF-8
// text. Line endings become CRLF and dots are stuffed by the DATA writer.
func (s *SMTP) compose(from, to *netmail.Address, m kms.Message) []byte {
	var id [12]byte
	rand.Read(id[:])
	domain := "ringkms"
	if at := strings.LastIndexByte(from.Address, '@'); at >= 0 {
		domain = from.Address[at+1:]
	}
	var b strings.Builder
	b.WriteString("From: " + from.String() + "\r\n")
	b.WriteString("To: " + to.String() + "\r\n")
	b.WriteString("Subject: " + mime.QEncoding.Encode("utf-8", m.Subject) + "\r\n")
	b.WriteString("Date: " + time.Now().Format(time.RFC1123Z) + "\r\n")
	b.WriteString("Message-ID: <" + hex.EncodeToString(id[:]) + "@" + domain + ">\r\n")
	b.WriteString("MIME-Version: 1.0\r\n")
	b.WriteString("Content-Type: text/plain; charset=utf-8\r\n")
	b.WriteString("Content-Transfer-Encoding: 8bit\r\n")
	b.WriteString("\r\n")
	body := strings.ReplaceAll(m.Body, "\r\n", "\n")
	b.WriteString(strings.ReplaceAll(body, "\n", "\r\n"))
	if !strings.HasSuffix(body, "\n") {
		b.WriteString("\r\n")
	}
	return []byte(b.String())
}
