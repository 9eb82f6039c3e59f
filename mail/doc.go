// Package mail holds the two kms.Mailer implementations that kmsd ships:
//
//   - Outbox writes each message as one file in a directory, for
//     development and tests: the file holds the link with its single-use
//     token, so a person or a test can follow it without a mail server.
//   - SMTP sends each message through an SMTP server with net/smtp, using
//     STARTTLS when the server offers it and PLAIN authentication when
//     credentials are set.
//
// Both reject a recipient or subject that holds a line break, which would
// otherwise let a caller forge headers. Neither logs a message: its body
// carries a single-use secret.
package mail
