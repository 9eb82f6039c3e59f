package auditsink_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/cmd/kmsd/internal/auditsink"
	"github.com/ringkms/kms/kmstest"
)

// flaky is a sink that fails its first failures writes, then keeps what
// it is given.
type flaky struct {
	mu       sync.Mutex
	failures int
	buf      bytes.Buffer
}

func (f *flaky) Write(lines []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failures > 0 {
		f.failures--
		return errors.New("sink down")
	}
	f.buf.Write(lines)
	return nil
}

func (f *flaky) Close() error { return nil }

func (f *flaky) seqs(t *testing.T) []uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []uint64
	sc := bufio.NewScanner(bytes.NewReader(f.buf.Bytes()))
	for sc.Scan() {
		var a kms.Activity
		if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out = append(out, a.Seq)
	}
	return out
}

// TestFollowerRetries: a sink that is down for a while misses nothing:
// the records from where the Follower began reach it in order, once it
// is back, and the calls of the service never waited for it.
func TestFollowerRetries(t *testing.T) {
	st := kmstest.MemoryStore(t)
	env := kmstest.New(t, st, kms.Options{})
	svc, ctx := env.Service, env.RootCtx
	if _, err := svc.CreateKeyRing(ctx, kms.CreateKeyRingInput{Name: "r", KEM: "x25519"}); err != nil {
		t.Fatal(err)
	}
	start := st.Trail().Len() // the Follower begins after these
	sink := &flaky{failures: 3}
	f := auditsink.NewFollower(st, sink, 0, func(error, string) {})
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.Run(runCtx); close(done) }()
	for range 50 {
		if _, err := svc.Encrypt(ctx, kms.EncryptInput{RingName: "r"}); err != nil {
			t.Fatal(err)
		}
		f.Notify()
	}
	end := st.Trail().Len()
	for deadline := time.Now().Add(20 * time.Second); f.Delivered() < end; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("delivered up to %d of %d", f.Delivered(), end)
		}
	}
	cancel()
	<-done
	got := sink.seqs(t)
	if len(got) != int(end-start) {
		t.Fatalf("the sink has %d records, want %d", len(got), end-start)
	}
	for i, seq := range got {
		if seq != start+1+uint64(i) {
			t.Fatalf("record %d has seq %d, want %d: a gap or a repeat", i, seq, start+1+uint64(i))
		}
	}

	// From a seq: what a sink that restarts asks for.
	again := &flaky{}
	g := auditsink.NewFollower(st, again, 2, func(error, string) {})
	runCtx, cancel = context.WithCancel(context.Background())
	cancel()
	g.Run(runCtx) // delivers what was committed, and returns
	if s := again.seqs(t); len(s) != int(end-1) || s[0] != 2 {
		t.Fatalf("from seq 2: %d records from %v, want %d from 2", len(s), s[:1], end-1)
	}
}

// TestFileSinkRotates: the file sink starts a new file at its size limit
// and keeps the newest rotated files.
func TestFileSinkRotates(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.jsonl")
	s, err := auditsink.Parse("file:"+path, nil, 100, 2)
	if err != nil {
		t.Fatal(err)
	}
	line := []byte(`{"seq":1,"action":"encrypt","padding":"0123456789012345678901234567890123456789"}` + "\n")
	for range 10 {
		if err := s.Write(line); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond) // distinct rotation names
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	rotated, _ := filepath.Glob(path + ".*")
	if len(rotated) != 2 {
		t.Fatalf("%d rotated files, want the newest 2", len(rotated))
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Size() > 100 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("current file: %v, %v", fi, err)
	}
	for _, bad := range []string{"", "file:", "syslog+udp://", "http://x", "stdout2"} {
		if _, err := auditsink.Parse(bad, nil, 0, 0); err == nil {
			t.Errorf("Parse(%q) succeeded", bad)
		}
	}
}
