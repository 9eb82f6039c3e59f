package kmstest

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/ringkms/kms"
)

var _ kms.Mailer = (*Mailbox)(nil)

// Mailbox is a kms.Mailer that keeps the messages it is asked to send, for
// the test to read in order.
type Mailbox struct {
	sent chan kms.Message
}

// NewMailbox returns an empty Mailbox.
func NewMailbox() *Mailbox { return &Mailbox{sent: make(chan kms.Message, 100)} }

// Send keeps msg. It waits for room only when 100 are unread, so a
// context that has ended loses no message there is room for.
func (m *Mailbox) Send(ctx context.Context, msg kms.Message) error {
	select {
	case m.sent <- msg:
		return nil
	default:
	}
	select {
	case m.sent <- msg:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Next returns the next message sent, waiting for it (the Service sends
// some mails in the background), and fails the test when none comes
// within 20 seconds.
func (m *Mailbox) Next(t testing.TB) kms.Message {
	t.Helper()
	select {
	case msg := <-m.sent:
		return msg
	case <-time.After(20 * time.Second):
		t.Fatal("no mail within 20s")
		return kms.Message{}
	}
}

// None fails the test when a message was sent and not read.
func (m *Mailbox) None(t testing.TB) {
	t.Helper()
	select {
	case msg := <-m.sent:
		t.Fatalf("mail sent to %s, want none", msg.To)
	default:
	}
}

// LinkToken returns the token query parameter of a link, such as the
// invitation and password reset links the Service mails, and fails the
// test when the link has none.
func LinkToken(t testing.TB, link string) string {
	t.Helper()
	u, err := url.Parse(link)
	if err != nil {
		t.Fatalf("link %q: %v", link, err)
	}
	tok := u.Query().Get("token")
	if tok == "" {
		t.Fatalf("link %q has no token", link)
	}
	return tok
}
