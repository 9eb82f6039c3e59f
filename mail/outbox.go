package mail

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ringkms/kms"
)

var _ kms.Mailer = (*Outbox)(nil)

// Outbox is a kms.Mailer that writes each message as one file in a
// directory instead of sending it. A file is named
// <UTC time>-<random>.txt (for example 20260102T150405.123456789Z-1a2b3c4d.txt),
// so that names sort in the order messages were sent, and holds:
//
//	To: <recipient>
//	Subject: <subject>
//
//	<body>
//
// Files have mode 0600: a body carries a single-use token. A file appears
// complete or not at all (it is written under a temporary name, synced,
// then renamed). Outbox is safe for concurrent use.
type Outbox struct {
	dir string
	now func() time.Time
}

// NewOutbox returns an Outbox that writes into dir. The directory is
// created (mode 0700) on the first Send if it does not exist.
func NewOutbox(dir string) *Outbox {
	return &Outbox{dir: dir, now: time.Now}
}

// Dir returns the directory the Outbox writes into.
func (o *Outbox) Dir() string { return o.dir }

// Send writes m as a new file in the outbox directory.
func (o *Outbox) Send(ctx context.Context, m kms.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkHeaders(m); err != nil {
		return err
	}
	if err := os.MkdirAll(o.dir, 0o700); err != nil {
		return fmt.Errorf("mail: outbox: %w", err)
	}
	var rnd [4]byte
	rand.Read(rnd[:])
	name := o.now().UTC().Format("20060102T150405.000000000Z") + "-" + hex.EncodeToString(rnd[:]) + ".txt"

	// os.CreateTemp creates the file with mode 0600.
	f, err := os.CreateTemp(o.dir, ".tmp-*")
	if err != nil {
		return fmt.Errorf("mail: outbox: %w", err)
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	var b strings.Builder
	b.WriteString("To: " + m.To + "\n")
	b.WriteString("Subject: " + m.Subject + "\n")
	b.WriteString("\n")
	b.WriteString(m.Body)
	if _, err := f.WriteString(b.String()); err != nil {
		return fmt.Errorf("mail: outbox: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("mail: outbox: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("mail: outbox: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(o.dir, name)); err != nil {
		return fmt.Errorf("mail: outbox: %w", err)
	}
	ok = true
	return nil
}

// checkHeaders rejects header values that would break the message apart.
func checkHeaders(m kms.Message) error {
	if strings.TrimSpace(m.To) == "" {
		return fmt.Errorf("mail: no recipient")
	}
	if strings.ContainsAny(m.To, "\r\n") {
		return fmt.Errorf("mail: recipient holds a line break")
	}
	if strings.ContainsAny(m.Subject, "\r\n") {
		return fmt.Errorf("mail: subject holds a line break")
	}
	return nil
}
