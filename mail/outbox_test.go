package mail

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ringkms/kms"
)

func readOutbox(t testing.TB, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

func TestOutboxSend(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "outbox") // created by Send
	o := NewOutbox(dir)
	times := []time.Time{
		time.Date(2026, 1, 2, 15, 4, 5, 123, time.UTC),
		time.Date(2026, 1, 2, 15, 4, 6, 0, time.UTC),
	}
	i := 0
	o.now = func() time.Time { i++; return times[i-1] }

	msgs := []kms.Message{
		{To: "ada@example.com", Subject: "You are invited", Body: "Follow https://kms.example.com/invite?token=abc\n"},
		{To: "Bob <bob@example.com>", Subject: "Reset your password", Body: "line one\nline two"},
	}
	for _, m := range msgs {
		if err := o.Send(context.Background(), m); err != nil {
			t.Fatalf("Send(%q) = %v", m.To, err)
		}
	}
	names := readOutbox(t, dir)
	if len(names) != 2 {
		t.Fatalf("outbox holds %v, want 2 files", names)
	}
	for j, name := range names {
		if !strings.HasPrefix(name, times[j].Format("20060102T150405.000000000Z")+"-") || !strings.HasSuffix(name, ".txt") {
			t.Errorf("file %d is named %q, want the send time first", j, name)
		}
		path := filepath.Join(dir, name)
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if mode := fi.Mode().Perm(); mode != 0o600 {
			t.Errorf("%s has mode %o, want 600", name, mode)
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("To: %s\nSubject: %s\n\n%s", msgs[j].To, msgs[j].Subject, msgs[j].Body)
		if string(got) != want {
			t.Errorf("%s holds\n%q\nwant\n%q", name, got, want)
		}
	}
	if fi, err := os.Stat(dir); err != nil {
		t.Fatal(err)
	} else if mode := fi.Mode().Perm(); mode != 0o700 {
		t.Errorf("outbox directory has mode %o, want 700", mode)
	}
}

func TestOutboxConcurrent(t *testing.T) {
	dir := t.TempDir()
	o := NewOutbox(dir)
	const n = 50
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			m := kms.Message{To: fmt.Sprintf("u%d@example.com", i), Subject: "s", Body: "b"}
			if err := o.Send(context.Background(), m); err != nil {
				t.Errorf("Send = %v", err)
			}
		})
	}
	wg.Wait()
	names := readOutbox(t, dir)
	if len(names) != n {
		t.Fatalf("outbox holds %d files, want %d", len(names), n)
	}
	for _, name := range names {
		if strings.HasPrefix(name, ".tmp-") {
			t.Errorf("temporary file %s left behind", name)
		}
	}
}

func TestOutboxRejects(t *testing.T) {
	tests := []struct {
		name string
		msg  kms.Message
	}{
		{"no recipient", kms.Message{Subject: "s", Body: "b"}},
		{"line break in recipient", kms.Message{To: "a@example.com\nBcc: evil@example.com", Subject: "s"}},
		{"line break in subject", kms.Message{To: "a@example.com", Subject: "s\r\nBcc: evil@example.com"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := NewOutbox(dir).Send(context.Background(), tt.msg); err == nil {
				t.Errorf("Send = nil, want an error")
			}
			if names := readOutbox(t, dir); len(names) != 0 {
				t.Errorf("outbox holds %v after a rejected message", names)
			}
		})
	}
}

func TestOutboxCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	dir := t.TempDir()
	if err := NewOutbox(dir).Send(ctx, kms.Message{To: "a@example.com"}); err == nil {
		t.Errorf("Send with a canceled context = nil, want an error")
	}
}
