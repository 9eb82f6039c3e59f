package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

// bench holds what every step of a run needs.
type bench struct {
	o      *options
	client *http.Client
	stderr io.Writer // notes and progress
	tty    bool      // stderr is a terminal
}

func (b *bench) notef(format string, args ...any) {
	fmt.Fprintf(b.stderr, "kmsbench: "+format+"\n", args...)
}

// startKmsd builds kmsd unless -kmsd names it, and starts it.
func (b *bench) startKmsd(ctx context.Context) (*kmsd, error) {
	bin := b.o.kmsd
	if bin == "" {
		dir, err := os.MkdirTemp("", "kmsbench-bin-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir) // once kmsd runs, it needs the file no more
		b.notef("building kmsd")
		if bin, err = buildKmsd(ctx, dir); err != nil {
			return nil, err
		}
	}
	k, err := startKmsd(ctx, bin, b.o.logLevel, b.o.rss)
	if err != nil {
		return nil, err
	}
	b.notef("kmsd (pid %d) listening on %s", k.cmd.Process.Pid, k.url)
	return k, nil
}

// measureKmsd prepares the ring (and the decrypt pool), warms kmsd up and
// measures it. k is the kmsd kmsbench started, or nil; when it exits, the
// load stops. It returns the workload, for the baseline to send the same
// bodies.
func (b *bench) measureKmsd(ctx context.Context, k *kmsd) (*row, *workload, error) {
	if k != nil {
		var cancel context.CancelCauseFunc
		ctx, cancel = context.WithCancelCause(ctx)
		defer cancel(nil)
		go func() {
			select {
			case <-k.exited:
				cancel(fmt.Errorf("kmsd exited during the run (%v); its last lines:\n%s", k.cmd.ProcessState, k.tail))
			case <-ctx.Done():
			}
		}()
	}
	o := b.o
	created, err := ensureRing(ctx, b.client, o.url, o.key, o.ring)
	if err != nil {
		return nil, nil, b.cause(ctx, fmt.Errorf("ring %s: %w", o.ring, err))
	}
	if created {
		b.notef("created ring %s (KEM x25519)", o.ring)
	}
	work := &workload{mode: o.mode, mix: o.mix, encrypt: newEncrypt(o.ring, o.asset)}
	if o.mode != "encrypt" {
		t0 := time.Now()
		work.pool, err = makePool(ctx, b.client, o.url, o.key, work.encrypt, o.pool, o.concurrency)
		if err != nil {
			return nil, nil, b.cause(ctx, err)
		}
		b.notef("made %d (hash, header) pairs to decrypt in %.1fs", len(work.pool), time.Since(t0).Seconds())
	}
	r, err := b.measure(ctx, "kmsd", o.url, o.key, work)
	return r, work, b.cause(ctx, err)
}

// cause returns ctx's cause when ctx is done (kmsd exited, or Ctrl-C),
// else err.
func (b *bench) cause(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return err
}

// measureBaseline starts the baseline server and measures it with the
// requests of work.
func (b *bench) measureBaseline(ctx context.Context, work *workload) (_ *row, err error) {
	srv, err := startBaseline(ctx)
	if err != nil {
		return nil, fmt.Errorf("baseline: %w", err)
	}
	defer func() {
		if serr := srv.terminate(); serr != nil && err == nil {
			err = fmt.Errorf("baseline: %w", serr)
		}
	}()
	b.notef("baseline (pid %d, a process of its own) listening on %s", srv.cmd.Process.Pid, srv.url)
	return b.measure(ctx, "baseline", srv.url, "", work)
}

// measure warms target up for -warmup, then loads it for -d or -n. When
// ctx is done meanwhile, it returns what it measured and ctx's error.
func (b *bench) measure(ctx context.Context, target, url, key string, work *workload) (*row, error) {
	o := b.o
	l := &load{
		client:      b.client,
		url:         url,
		key:         key,
		pick:        work.pick,
		concurrency: o.concurrency,
	}
	if o.warmup > 0 {
		l.duration = o.warmup
		st := l.run(ctx)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		b.notef("%s: warm-up %v: %d requests, %d errors%s", target, o.warmup, st.requests, st.errors, byStatusText(st.byStatus))
	}
	l.duration, l.requests = o.duration, o.requests
	l.progress, l.label, l.tty = b.stderr, target, b.tty
	st := l.run(ctx)
	r := newRow(target, url, o, st)
	if ctx.Err() != nil {
		return &r, ctx.Err()
	}
	if st.requests == 0 {
		return &r, errors.New(target + ": no request completed")
	}
	return &r, nil
}
