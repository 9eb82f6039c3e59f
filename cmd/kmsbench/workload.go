package main

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
)

// workload is what the load sends to kmsd: the calls that make something
// (encrypt calls on one ring, or a transit key's encrypt, sign or hmac
// calls), and decrypt calls of what earlier encrypt calls made.
type workload struct {
	mode    string    // encrypt, decrypt or mix; a transit mode without "transit-"
	mix     float64   // the share of decrypt calls in mix mode
	produce request   // the call that makes something
	pool    []request // decrypt calls; none in the modes that only make
}

// newEncrypt returns the encrypt call on ring, with a new Asset when
// asset is set; with n above 1, a batch of n of them.
func newEncrypt(ring string, asset bool, n int) request {
	in := map[string]any{"ringname": ring}
	item := map[string]any{}
	if asset {
		item["asset"] = map[string]any{"data": map[string]any{"source": "kmsbench"}}
	}
	if n <= 1 {
		maps.Copy(in, item)
		body, _ := json.Marshal(in)
		return request{path: "/ks/encrypt", body: body}
	}
	if asset {
		items := make([]map[string]any, n)
		for i := range items {
			items[i] = item
		}
		in["items"] = items
	} else {
		in["count"] = n
	}
	body, _ := json.Marshal(in)
	return request{path: "/ks/encrypt/batch", body: body}
}

// batched turns the workload into batches of n items: the encrypt call
// into a batch of n, and the decrypt pool into batches of n of its pairs,
// taken in turn (at least 8 different batches, each pair in at least one).
func (w *workload) batched(ring string, asset bool, n int) {
	w.produce = newEncrypt(ring, asset, n)
	w.batchPool(n, "/ks/decrypt/batch", "items")
}

// batchPool turns the decrypt pool into batches of n of its pairs, taken
// in turn (at least 8 different batches, each pair in at least one), each
// a request to path with the pairs' bodies under field.
func (w *workload) batchPool(n int, path, field string) {
	if len(w.pool) == 0 {
		return
	}
	batches := make([]request, max(8, (len(w.pool)+n-1)/n))
	for b := range batches {
		items := make([]json.RawMessage, n)
		for i := range items {
			items[i] = w.pool[(b*n+i)%len(w.pool)].body
		}
		body, _ := json.Marshal(map[string]any{field: items})
		batches[b] = request{path: path, body: body}
	}
	w.pool = batches
}

// pick returns the next request of a worker.
func (w *workload) pick(rng *rand.Rand) request {
	switch {
	case len(w.pool) == 0: // encrypt, transit-encrypt, transit-sign, transit-hmac
		return w.produce
	case w.mode == "mix" && rng.Float64() >= w.mix:
		return w.produce
	}
	return w.pool[rng.IntN(len(w.pool))]
}

// call sends one request to kmsd and decodes a 200 answer into out (when
// not nil). Any other status is an error that carries kmsd's message.
func call(ctx context.Context, c *http.Client, base, key, method, path string, body []byte, out any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, method, base+path, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := c.Do(req)
	var unknown x509.UnknownAuthorityError
	if errors.As(err, &unknown) {
		return 0, fmt.Errorf("%w: kmsd's certificate is not trusted; if a private CA signed it, give kmsbench that CA's certificate: -ca-cert FILE or KMS_CACERT=FILE", err)
	}
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		return resp.StatusCode, fmt.Errorf("%s %s: read answer: %w", method, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Message string `json:"message"`
		}
		json.Unmarshal(raw, &e)
		return resp.StatusCode, fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, e.Message)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: decode answer: %w", method, path, err)
		}
	}
	return resp.StatusCode, nil
}

// ensureRing creates the ring (KEM x25519, split data keys) unless it
// exists. The ring names its dataKeys, the service's default, so that a
// comparison with a build from before that default (-against) measures
// the same work on both.
func ensureRing(ctx context.Context, c *http.Client, base, key, ring string) (created bool, err error) {
	status, err := call(ctx, c, base, key, http.MethodGet, "/ks/keyrings/"+url.PathEscape(ring), nil, nil)
	if err == nil {
		return false, nil
	}
	if status != http.StatusNotFound {
		return false, err
	}
	body, _ := json.Marshal(map[string]string{"name": ring, "kem": "x25519", "dataKeys": "split"})
	status, err = call(ctx, c, base, key, http.MethodPost, "/ks/keyrings", body, nil)
	if status == http.StatusConflict { // made meanwhile by someone else
		return false, nil
	}
	return err == nil, err
}

// ksDecryptOf turns the answer of POST /ks/encrypt into the decrypt call
// of its hash and header.
func ksDecryptOf(answer json.RawMessage) (request, error) {
	var out struct {
		Hash   string `json:"hash"`
		Header string `json:"header"`
	}
	if err := json.Unmarshal(answer, &out); err != nil || out.Hash == "" || out.Header == "" {
		return request{}, errors.New("encrypt answer without hash or header")
	}
	body, _ := json.Marshal(out)
	return request{path: "/ks/decrypt", body: body}, nil
}

// makePool makes size decrypt calls from as many encrypt calls, with
// concurrency workers, each turned into its decrypt call by decryptOf;
// it fails on the first error.
func makePool(ctx context.Context, c *http.Client, base, key string, encrypt request, size, concurrency int,
	decryptOf func(answer json.RawMessage) (request, error)) ([]request, error) {
	return makeAll(ctx, size, concurrency, func(ctx context.Context) (request, error) {
		var answer json.RawMessage
		if _, err := call(ctx, c, base, key, http.MethodPost, encrypt.path, encrypt.body, &answer); err != nil {
			return request{}, err
		}
		return decryptOf(answer)
	})
}

// makeAll makes size things to decrypt, each with one, called by
// concurrency workers; it stops at the first error and returns it.
func makeAll[T any](ctx context.Context, size, concurrency int, one func(context.Context) (T, error)) ([]T, error) {
	pool := make([]T, size)
	var (
		next    atomic.Int64
		wg      sync.WaitGroup
		errOnce sync.Once
		first   error
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range min(concurrency, size) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= size || ctx.Err() != nil {
					return
				}
				var err error
				if pool[i], err = one(ctx); err != nil {
					errOnce.Do(func() { first = err; cancel() })
					return
				}
			}
		})
	}
	wg.Wait()
	if first != nil {
		return nil, fmt.Errorf("decrypt pool: %w", first)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return pool, nil
}
