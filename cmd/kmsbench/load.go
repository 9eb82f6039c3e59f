package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// maxAnswerBytes caps how much of an answer is read; kmsd's answers are
// a few KiB.
const maxAnswerBytes = 8 << 20 // a batch of 1,000 encrypt answers is under 1 MiB

// A request is one call of the load: a POST of a JSON body.
type request struct {
	path string
	body []byte
}

// load is one measured run against one target: concurrency workers send
// calls one after the other until duration has passed, requests have
// been sent (when above zero), or ctx is done, whichever comes first.
// Worker w sends its calls to node w % nodes of the target.
type load struct {
	calls       caller
	nodes       int // the target's nodes
	concurrency int
	duration    time.Duration
	requests    int64

	// progress, when not nil, gets a line a second: label, elapsed time,
	// ops/s over the last second and errors so far. With tty set, the
	// line is rewritten in place.
	progress io.Writer
	label    string
	tty      bool
}

// caller sends the calls of a load: kmsd's HTTP API (httpCalls) or its
// Kubernetes KMS plugin's socket (k8sCalls). It is safe for concurrent
// use; each worker has an rng of its own.
type caller interface {
	// call sends one call to node (0 to the target's nodes - 1) and
	// tells how it went.
	call(ctx context.Context, node int, rng *rand.Rand) outcome
}

// outcome is how one call went.
type outcome struct {
	// answered is set when an answer came, error answers included: its
	// latency counts in the quantiles.
	answered bool
	latency  time.Duration
	// failure is empty for a call that did what was asked; else the name
	// its errors are counted under: an HTTP status ("500"), "transport"
	// for no answer, a gRPC code ("Unavailable"), or what was wrong with
	// an answer ("mismatch").
	failure string
}

// stats is the outcome of a load.
type stats struct {
	requests int64            // answered or failed, not counting those cut short by ctx
	errors   int64            // answers other than 200, and transport errors
	byStatus map[string]int64 // errors by outcome.failure
	elapsed  time.Duration
	hist     Histogram   // latency of every answered request
	nodes    []nodeCount // requests and errors of each node, in the order of the target's
	// cpu is the CPU time that each node's process spent during the
	// measured loads, in the order of the nodes; nil when not known. The
	// caller that reads it (bench.measure) sets it; add leaves it.
	cpu []time.Duration
	// clientCPU is the CPU time kmsbench spent sending the measured
	// loads and reading their answers, when clientKnown. Set as cpu is.
	clientCPU   time.Duration
	clientKnown bool
}

// nodeCount is what one node of a target was sent.
type nodeCount struct {
	requests, errors int64
}

// newClient returns the HTTP client of every target: one keep-alive
// Transport with room for concurrency connections per host, no proxy (the
// traffic must stay on the address given), no redirects, and timeout on
// each request. With roots (the run's certificate of -tls, or the CA
// certificates of -ca-cert), it trusts them and no other, over HTTP/1.1
// as without.
func newClient(concurrency int, timeout time.Duration, roots *x509.CertPool) *http.Client {
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        2 * concurrency,
		MaxIdleConnsPerHost: concurrency,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	if roots != nil {
		tr.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	}
	return &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Timeout:       timeout,
	}
}

// run runs the load and returns what it measured. It returns early, with
// what was measured so far, when ctx is done.
func (l *load) run(ctx context.Context) *stats {
	var (
		issued, done, failed atomic.Int64
		wg                   sync.WaitGroup
		results              = make([]*stats, l.concurrency)
	)
	start := time.Now()
	deadline := start.Add(l.duration)
	seed := rand.Uint64()
	for w := range l.concurrency {
		s := &stats{byStatus: map[string]int64{}, nodes: make([]nodeCount, l.nodes)}
		results[w] = s
		node := w % l.nodes
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			for ctx.Err() == nil && time.Now().Before(deadline) {
				if l.requests > 0 && issued.Add(1) > l.requests {
					return
				}
				out := l.calls.call(ctx, node, rng)
				if ctx.Err() != nil {
					return // cut short: neither a result nor an error
				}
				s.requests++
				s.nodes[node].requests++
				done.Add(1)
				if out.answered {
					s.hist.Record(out.latency)
				}
				if out.failure != "" {
					s.errors++
					s.nodes[node].errors++
					s.byStatus[out.failure]++
					failed.Add(1)
				}
			}
		})
	}

	stopProgress := make(chan struct{})
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		if l.progress != nil {
			l.report(start, &done, &failed, stopProgress)
		}
	}()
	wg.Wait()
	elapsed := time.Since(start)
	close(stopProgress)
	<-progressDone

	total := &stats{byStatus: map[string]int64{}, elapsed: elapsed, nodes: make([]nodeCount, l.nodes)}
	for _, s := range results {
		total.add(s)
	}
	return total
}

// add adds the requests, errors, time, latencies and counts by node of o
// to s.
func (s *stats) add(o *stats) {
	s.requests += o.requests
	s.errors += o.errors
	for k, v := range o.byStatus {
		s.byStatus[k] += v
	}
	s.elapsed += o.elapsed
	s.hist.Merge(&o.hist)
	for i, n := range o.nodes {
		if i == len(s.nodes) {
			s.nodes = append(s.nodes, nodeCount{})
		}
		s.nodes[i].requests += n.requests
		s.nodes[i].errors += n.errors
	}
}

// httpCalls are the calls of kmsd's HTTP API (and of the baseline): the
// POSTs of a workload to the target's nodes.
type httpCalls struct {
	client *http.Client
	urls   []string    // the target's nodes, without a trailing slash
	auth   string      // the Authorization header; empty sends none
	work   []*workload // what node i is sent: work[i % len(work)]
}

// newHTTPCalls returns the calls of work to the nodes urls, with the
// bearer API key key (none when empty).
func newHTTPCalls(client *http.Client, urls []string, key string, work []*workload) *httpCalls {
	h := &httpCalls{client: client, urls: urls, work: work}
	if key != "" {
		h.auth = "Bearer " + key
	}
	return h
}

// call sends the next request of the node's workload. An answer other
// than 200 fails under its status; no answer, or one that cannot be read,
// under "transport".
func (h *httpCalls) call(ctx context.Context, node int, rng *rand.Rand) outcome {
	status, latency, err := h.do(ctx, h.urls[node], h.work[node%len(h.work)].pick(rng))
	switch {
	case err != nil:
		return outcome{failure: "transport"}
	case status != http.StatusOK:
		return outcome{answered: true, latency: latency, failure: strconv.Itoa(status)}
	}
	return outcome{answered: true, latency: latency}
}

// do sends one request to the node at base and reads the answer. A
// transport error, or an answer that cannot be read, returns an error and
// status 0.
func (h *httpCalls) do(ctx context.Context, base string, r request) (status int, latency time.Duration, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+r.path, bytes.NewReader(r.body))
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	if h.auth != "" {
		req.Header.Set("Authorization", h.auth)
	}
	t0 := time.Now()
	resp, err := h.client.Do(req)
	if err != nil {
		return 0, 0, err
	}
	_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswerBytes))
	resp.Body.Close()
	latency = time.Since(t0)
	if err != nil {
		return 0, latency, err
	}
	return resp.StatusCode, latency, nil
}

// report writes a progress line every second until stop is closed.
func (l *load) report(start time.Time, done, failed *atomic.Int64, stop <-chan struct{}) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	last, lastAt := int64(0), start
	printed := false
	for {
		select {
		case <-stop:
			if printed && l.tty {
				fmt.Fprintln(l.progress)
			}
			return
		case now := <-tick.C:
			n := done.Load()
			rate := float64(n-last) / now.Sub(lastAt).Seconds()
			last, lastAt = n, now
			line := fmt.Sprintf("%-14s %6.0fs %10.0f ops/s %8d errors", l.label, now.Sub(start).Seconds(), rate, failed.Load())
			if l.tty {
				fmt.Fprintf(l.progress, "\r%s", line)
			} else {
				fmt.Fprintln(l.progress, line)
			}
			printed = true
		}
	}
}
