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
	tls    *tlsFiles // with -tls: the run's certificate
	client *http.Client
	stderr io.Writer // notes and progress
	tty    bool      // stderr is a terminal
}

func (b *bench) notef(format string, args ...any) {
	fmt.Fprintf(b.stderr, "kmsbench: "+format+"\n", args...)
}

// startClusters builds kmsd unless -kmsd names it, and starts -nodes of
// it; with -embedded, -embedded-nodes more, on the embedded store, and with
// -against, one more of the binary given, each with a master key and an
// API key of its own. When it returns an error, none runs.
func (b *bench) startClusters(ctx context.Context) ([]*cluster, error) {
	o := b.o
	bin := o.kmsd
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
	started := func(k *kmsd) {
		plugin := ""
		if k.socket != "" {
			plugin = ", its KMS plugin on " + k.addr()
		}
		b.notef("%s (pid %d) listening on %s%s", k.name, k.cmd.Process.Pid, k.url, plugin)
	}
	config := func(bin, store string) *kmsdConfig {
		c := newKmsdConfig(bin, o.logLevel, store, o.rss, b.tls)
		c.transit = transitMode(o.mode)
		c.k8s = k8sMode(o.mode)
		c.aws = awsMode(o.mode)
		return c
	}
	own := config(bin, o.store)
	own.signingKey, own.pin = o.signingKey, o.pin // the others keep their keys in memory
	cl, err := startCluster(ctx, own, o.nodes, "kmsd", started)
	if err != nil {
		return nil, err
	}
	if o.against != "" {
		other, err := startCluster(ctx, config(o.against, ""), 1, "against kmsd", started)
		if err != nil {
			cl.stop()
			return nil, err
		}
		other.target = "against"
		return []*cluster{cl, other}, nil
	}
	if !o.embedded {
		return []*cluster{cl}, nil
	}
	cl.target = "postgres"
	emb, err := startCluster(ctx, config(bin, ""), o.embNodes, "embedded kmsd", started)
	if err != nil {
		cl.stop()
		return nil, err
	}
	emb.target = "embedded"
	return []*cluster{cl, emb}, nil
}

// stopClusters stops every kmsd of cls and returns their errors. It may be
// called more than once.
func stopClusters(cls []*cluster) error {
	var errs []error
	for _, cl := range cls {
		errs = append(errs, cl.stop())
	}
	return errors.Join(errs...)
}

// target is a server that kmsbench loads: kmsd, its nodes, or the
// baseline.
type target struct {
	name string   // kmsd, postgres, embedded, against or baseline
	urls []string // its nodes: URLs, or the unix:// addresses of the KMS plugin's sockets; client i calls urls[i % len(urls)]
	key  string   // the bearer API key; empty sends none
	pids []int    // the processes serving urls, one per URL, when known
	// apart is set when each node is a service of its own (kmsd on
	// embedded stores of their own): each is sent its own workload.
	apart bool
	calls caller // what it is sent, made by prepare
}

// watchKmsd returns a context that is cancelled, with kmsd's last log
// lines as its cause, when a node of cls (started by kmsbench) exits: the
// load then stops.
func watchKmsd(ctx context.Context, cls []*cluster) (context.Context, context.CancelCauseFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	for _, cl := range cls {
		for _, k := range cl.nodes {
			go func() {
				select {
				case <-k.exited:
					cancel(fmt.Errorf("%s exited during the run (%v); its last lines:\n%s", k.name, k.cmd.ProcessState, k.tail))
				case <-ctx.Done():
				}
			}()
		}
	}
	return ctx, cancel
}

// prepare makes sure the ring exists on t and, for decrypt and mix, makes
// the pool of hashes and headers to decrypt, both through t's first node,
// or through each node when they are apart. It returns the calls to send
// t. In the k8s modes, prepareK8s does the same on the KMS plugin's
// sockets; in the aws modes, prepareAWS with AWS KMS's protocol.
func (b *bench) prepare(ctx context.Context, t target) (caller, error) {
	switch {
	case k8sMode(b.o.mode):
		return b.prepareK8s(ctx, t)
	case awsMode(b.o.mode):
		return b.prepareAWS(ctx, t)
	}
	var works []*workload
	for _, u := range firstOrEach(t) {
		w, err := b.prepareOn(ctx, t, u)
		if err != nil {
			return nil, err
		}
		works = append(works, w)
	}
	return newHTTPCalls(b.client, t.urls, t.key, works), nil
}

// firstOrEach are the nodes of t through which its workloads are made:
// the first, or each one when they are apart.
func firstOrEach(t target) []string {
	if t.apart {
		return t.urls
	}
	return t.urls[:1]
}

// prepareOn makes sure the ring exists on the node at first and, for
// decrypt and mix, makes the pool of hashes and headers to decrypt
// through it. It returns the workload.
func (b *bench) prepareOn(ctx context.Context, t target, first string) (*workload, error) {
	o := b.o
	if transitMode(o.mode) {
		return b.prepareTransit(ctx, t, first)
	}
	created, err := ensureRing(ctx, b.client, first, t.key, o.ring)
	if err != nil {
		return nil, b.cause(ctx, fmt.Errorf("%s: ring %s: %w", t.name, o.ring, err))
	}
	if created {
		b.notef("%s: created ring %s (KEM x25519) on %s", t.name, o.ring, first)
	}
	work := &workload{mode: o.mode, mix: o.mix, produce: newEncrypt(o.ring, o.asset, 1)}
	if o.mode != "encrypt" {
		t0 := time.Now()
		work.pool, err = makePool(ctx, b.client, first, t.key, work.produce, o.pool, o.concurrency, ksDecryptOf)
		if err != nil {
			return nil, b.cause(ctx, fmt.Errorf("%s: %w", t.name, err))
		}
		b.notePool(t, len(work.pool), "(hash, header) pairs", first, t0)
	}
	if o.batch > 1 {
		work.batched(o.ring, o.asset, o.batch)
	}
	return work, nil
}

// cause returns ctx's cause when ctx is done (kmsd exited, or Ctrl-C),
// else err.
func (b *bench) cause(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return err
}

// notePool notes that n things to decrypt were made on t's node at
// first since t0.
func (b *bench) notePool(t target, n int, what, first string, t0 time.Time) {
	b.notef("%s: made %d %s to decrypt on %s in %.1fs", t.name, n, what, first, time.Since(t0).Seconds())
}

// startBaseline starts the baseline server; the caller stops it with
// terminate.
func (b *bench) startBaseline(ctx context.Context) (*process, error) {
	srv, err := startBaseline(ctx, b.tls)
	if err != nil {
		return nil, fmt.Errorf("baseline: %w", err)
	}
	b.notef("baseline (pid %d, a process of its own) listening on %s", srv.cmd.Process.Pid, srv.url)
	return srv, nil
}

// measure warms every target up for -warmup, then loads them for -d (or
// -n) each: with more than one target, in -rounds rounds that take turns,
// each round loading one target for its share of -d and -n while the
// others wait, idle. Taking turns puts the targets under the same
// conditions of the machine: a slowdown that comes and goes (another
// tenant of the host, the disk) falls on all of them instead of on
// whichever ran at the time. It reads the CPU time of each target's
// processes just before and after each of its measured loads (not the
// warm-up), so that a target's figure leaves out its idle turns. It
// returns the stats of each target, in the order of targets; when ctx is
// done meanwhile, what it measured and ctx's error.
func (b *bench) measure(ctx context.Context, targets []target) ([]*stats, error) {
	o := b.o
	loads := make([]*load, len(targets))
	meters := make([]*cpuMeter, len(targets))
	selves := make([]*cpuMeter, len(targets)) // kmsbench's own CPU time, per target
	for i, t := range targets {
		loads[i] = &load{calls: t.calls, nodes: len(t.urls), concurrency: o.concurrency}
		meters[i] = newCPUMeter(t.pids)
		selves[i] = newCPUMeter([]int{os.Getpid()})
	}
	if o.warmup > 0 {
		for i, l := range loads {
			l.duration = o.warmup
			st := l.run(ctx)
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			b.notef("%s: warm-up %v: %d requests, %d errors%s", targets[i].name, o.warmup, st.requests, st.errors, byStatusText(st.byStatus))
		}
	}
	rounds := rounds(o)
	total := make([]*stats, len(targets))
	for i := range total {
		total[i] = &stats{byStatus: map[string]int64{}}
	}
	defer func() {
		for i, m := range meters {
			total[i].cpu = m.result()
			if self := selves[i].result(); self != nil {
				total[i].clientCPU, total[i].clientKnown = self[0], true
			}
		}
	}()
	for round := range rounds {
		for i, l := range loads {
			l.duration = o.duration / time.Duration(rounds)
			l.requests = share(o.requests, rounds, round)
			l.progress, l.tty = b.stderr, b.tty
			l.label = targets[i].name
			if rounds > 1 {
				l.label = fmt.Sprintf("%s %d/%d", targets[i].name, round+1, rounds)
			}
			selves[i].around(func() {
				meters[i].around(func() { total[i].add(l.run(ctx)) })
			})
			if ctx.Err() != nil {
				return total, ctx.Err()
			}
		}
	}
	for i, st := range total {
		if st.requests == 0 {
			return total, errors.New(targets[i].name + ": no request completed")
		}
	}
	return total, nil
}

// rounds is the number of rounds of a run: -rounds with -baseline or
// -embedded, else one.
func rounds(o *options) int {
	if o.takesTurns() {
		return o.rounds
	}
	return 1
}

// share is round's part of n requests spread over rounds (0 stays 0, no
// limit); the first rounds take the remainder.
func share(n int64, rounds, round int) int64 {
	if n == 0 {
		return 0
	}
	part := n / int64(rounds)
	if int64(round) < n%int64(rounds) {
		part++
	}
	return part
}
