package kms

import "context"

// Mailer sends the service's outgoing mail: invitations and password
// resets. Package mail has an SMTP mailer and an outbox mailer that writes
// each message to a file, for development and tests.
type Mailer interface {
	Send(ctx context.Context, m Message) error
}

// Message is one outgoing mail. Its body carries a single-use link; a
// Mailer must not log it.
type Message struct {
	To      string
	Subject string
	Body    string
}
