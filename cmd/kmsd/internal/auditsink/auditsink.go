// Package auditsink streams the activity trail, as JSON lines, to an
// outside system (a SIEM): a file, rotated by size; standard output; or
// syslog. It follows the trail rather than the journal: a Follower reads
// the records committed since the last it delivered, wakes when the
// service commits more (Notify), and retries a sink that fails, from the
// same record, so that a slow or absent sink never holds up a call and
// misses no record while kmsd runs. The trail stays the system of record:
// after a restart the Follower begins at a sequence number given to it
// (the trail's end by default), and kmsd audit export fills any gap.
package auditsink

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/syslog"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ringkms/kms"
)

// Sink takes the lines of the records, one Write per batch of lines, each
// ending in a newline.
type Sink interface {
	Write(lines []byte) error
	Close() error
}

// Parse returns the sink that spec names:
//
//	stdout                        standard output (w)
//	file:PATH                     JSON lines appended to PATH, rotated at maxSize
//	syslog                        the local syslog daemon
//	syslog+udp://host:port        a remote one, over UDP (or syslog+tcp://)
func Parse(spec string, w io.Writer, maxSize int64, keep int) (Sink, error) {
	switch {
	case spec == "stdout":
		return &writerSink{w: w}, nil
	case strings.HasPrefix(spec, "file:"):
		path := strings.TrimPrefix(spec, "file:")
		if path == "" {
			return nil, errors.New("file: needs a path, as file:/var/log/kmsd/audit.jsonl")
		}
		return openFile(path, maxSize, keep)
	case spec == "syslog":
		return dialSyslog("", "")
	case strings.HasPrefix(spec, "syslog+udp://"), strings.HasPrefix(spec, "syslog+tcp://"):
		u, err := url.Parse(spec)
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("%q: want syslog+udp://host:port or syslog+tcp://host:port", spec)
		}
		return dialSyslog(strings.TrimPrefix(u.Scheme, "syslog+"), u.Host)
	}
	return nil, fmt.Errorf("%q: want stdout, file:PATH, syslog, syslog+udp://host:port or syslog+tcp://host:port", spec)
}

type writerSink struct{ w io.Writer }

func (s *writerSink) Write(lines []byte) error { _, err := s.w.Write(lines); return err }
func (s *writerSink) Close() error             { return nil }

// fileSink appends to a file and rotates it once it reaches maxSize: the
// file is renamed PATH.<UTC time> and a new PATH started; of the rotated
// files, the newest keep stay.
type fileSink struct {
	path    string
	maxSize int64
	keep    int
	f       *os.File
	size    int64
}

func openFile(path string, maxSize int64, keep int) (*fileSink, error) {
	s := &fileSink{path: path, maxSize: maxSize, keep: keep}
	return s, s.open()
}

func (s *fileSink) open() error {
	f, err := os.OpenFile(s.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	s.f, s.size = f, fi.Size()
	return nil
}

func (s *fileSink) Write(lines []byte) error {
	if s.f == nil {
		if err := s.open(); err != nil {
			return err
		}
	}
	if s.maxSize > 0 && s.size > 0 && s.size+int64(len(lines)) > s.maxSize {
		if err := s.rotate(); err != nil {
			return err
		}
	}
	n, err := s.f.Write(lines)
	s.size += int64(n)
	if err != nil {
		// A part written stays: the next attempt starts the batch again,
		// and a reader sees a record twice (the same seq), never a gap.
		return err
	}
	return nil
}

func (s *fileSink) rotate() error {
	if err := s.f.Close(); err != nil {
		return err
	}
	s.f = nil
	rotated := s.path + "." + time.Now().UTC().Format("20060102T150405.000000000Z")
	if err := os.Rename(s.path, rotated); err != nil {
		return err
	}
	if s.keep > 0 {
		old, _ := filepath.Glob(s.path + ".*")
		sort.Strings(old)
		for len(old) > s.keep {
			os.Remove(old[0])
			old = old[1:]
		}
	}
	return s.open()
}

func (s *fileSink) Close() error {
	if s.f == nil {
		return nil
	}
	return s.f.Close()
}

// syslogSink sends each line as one message, facility auth, tag kmsd.
type syslogSink struct{ w *syslog.Writer }

func dialSyslog(network, addr string) (*syslogSink, error) {
	w, err := syslog.Dial(network, addr, syslog.LOG_INFO|syslog.LOG_AUTH, "kmsd")
	if err != nil {
		return nil, fmt.Errorf("syslog: %w", err)
	}
	return &syslogSink{w: w}, nil
}

func (s *syslogSink) Write(lines []byte) error {
	for len(lines) > 0 {
		line, rest, _ := bytes.Cut(lines, []byte{'\n'})
		if err := s.w.Info(string(line)); err != nil {
			return err
		}
		lines = rest
	}
	return nil
}

func (s *syslogSink) Close() error { return s.w.Close() }

// Follower delivers the trail's records to a Sink.
type Follower struct {
	st    kms.Store
	sink  Sink
	next  uint64 // the seq of the next record to deliver
	wake  chan struct{}
	log   func(err error, msg string)
	retry time.Duration

	mu        sync.Mutex
	delivered uint64 // the last seq delivered
}

// NewFollower delivers the records of st's trail from seq from (0: from
// the end of the trail as it is now) to sink. log reports sink failures.
func NewFollower(st kms.Store, sink Sink, from uint64, log func(err error, msg string)) *Follower {
	if from == 0 {
		from = st.Trail().Len() + 1
	}
	return &Follower{st: st, sink: sink, next: from, wake: make(chan struct{}, 1), log: log, retry: time.Second}
}

// Notify tells the Follower that records were committed. It never blocks:
// call it from the journal's observer.
func (f *Follower) Notify() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// Delivered returns the seq of the last record delivered (0: none yet).
func (f *Follower) Delivered() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.delivered
}

// Run delivers records until ctx is done; then it delivers what was
// committed up to then (within a few seconds) and closes the sink.
func (f *Follower) Run(ctx context.Context) {
	defer f.sink.Close()
	tick := time.NewTicker(time.Second) // a notification missed costs a second at most
	defer tick.Stop()
	for {
		if err := f.deliver(ctx); err != nil && ctx.Err() == nil {
			f.log(err, fmt.Sprintf("audit sink: delivering from record %d failed; retrying", f.next))
			select {
			case <-ctx.Done():
			case <-time.After(f.retry):
			}
		}
		select {
		case <-ctx.Done():
			final, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := f.deliver(final); err != nil {
				f.log(err, fmt.Sprintf("audit sink: records from %d were not delivered at shutdown; kmsd audit export -from %d gives them", f.next, f.next))
			}
			cancel()
			return
		case <-f.wake:
		case <-tick.C:
		}
	}
}

// deliver writes the records from f.next on, in batches of lines.
func (f *Follower) deliver(ctx context.Context) error {
	var buf []byte
	var last uint64
	flush := func() error {
		if len(buf) == 0 {
			return nil
		}
		if err := f.sink.Write(buf); err != nil {
			return err
		}
		buf = buf[:0]
		f.next = last + 1
		f.mu.Lock()
		f.delivered = last
		f.mu.Unlock()
		return nil
	}
	err := kms.ExportActivity(ctx, f.st, f.next, func(a *kms.Activity) error {
		line, err := json.Marshal(a)
		if err != nil {
			return err
		}
		buf = append(append(buf, line...), '\n')
		last = a.Seq
		if len(buf) >= 256<<10 {
			return flush()
		}
		return nil
	})
	if err != nil {
		return err
	}
	return flush()
}
