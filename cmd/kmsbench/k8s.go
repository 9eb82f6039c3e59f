package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	mathrand "math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ringkms/kms/k8skms"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	kmsapi "k8s.io/kms/apis/v2"
)

// The k8s modes are the Kubernetes API server calling kmsd's KMS v2
// plugin (kmsd -k8s-kms-socket, package k8skms) over gRPC on its Unix
// socket, with the plugin API's own client: k8s-encrypt seals a random
// 32-byte data key a call, as the API server seals each data key it
// makes; k8s-decrypt opens data keys sealed first, as the API server
// does for a data key it has not cached, and checks that each opens to
// the key sealed. The -c clients of a socket share one connection, as
// the API server holds one to its plugin.

// k8sMode reports whether mode calls the KMS plugin's socket rather than
// kmsd's HTTP API.
func k8sMode(mode string) bool { return mode == "k8s-encrypt" || mode == "k8s-decrypt" }

// dataKeySize is the size of the data keys the API server seals.
const dataKeySize = 32

// validateK8s checks the flags of the k8s modes: a running kmsd's socket
// (-k8s-socket), which stands for -url, or -start; none of the flags of
// the HTTP calls. It sets o.urls to the socket's unix:// address.
func (o *options) validateK8s(set map[string]bool) error {
	switch {
	case o.start && set["k8s-socket"]:
		return errors.New("-k8s-socket and -start exclude each other: kmsbench gives each kmsd it starts a socket of its own")
	case !o.start && o.k8sSocket == "":
		return fmt.Errorf("-mode %s needs -k8s-socket PATH, the KMS plugin socket of a running kmsd (kmsd -k8s-kms-socket), or -start", o.mode)
	case set["url"] || set["key"] || set["ca-cert"]:
		return fmt.Errorf("-url, -key and -ca-cert go with the HTTP modes: -mode %s calls the KMS plugin's socket (-k8s-socket)", o.mode)
	case o.baseline || o.tls || o.asset || set["ring"] || o.batch > 1:
		return fmt.Errorf("-baseline, -tls, -asset, -ring and -batch go with the HTTP modes: -mode %s calls the KMS plugin's socket, one data key a call, sealed with kmsd's -k8s-kms-key", o.mode)
	}
	if !o.start {
		path, err := filepath.Abs(o.k8sSocket)
		if err != nil {
			return fmt.Errorf("-k8s-socket: %w", err)
		}
		o.urls = []string{"unix://" + path}
	}
	return nil
}

// runningPIDs are the process IDs of the running kmsd that kmsbench
// loads, when it can know them: in the k8s modes, the owner of the
// plugin's socket (socketOwner); over HTTP, none.
func (b *bench) runningPIDs() []int {
	if !k8sMode(b.o.mode) {
		return nil
	}
	addr := b.o.urls[0]
	pid, err := socketOwner(strings.TrimPrefix(addr, "unix://"))
	if err != nil {
		b.notef("kmsd: no CPU figures: the process serving %s is not known: %v", addr, err)
		return nil
	}
	b.notef("kmsd (pid %d) serves %s", pid, addr)
	return []int{pid}
}

// k8sCalls are the calls of the k8s modes to the plugin sockets of a
// target's nodes.
type k8sCalls struct {
	clients []*k8skms.Client // one per node, in order
	timeout time.Duration    // of each call (-timeout)
	// sealed are the data keys to decrypt, in k8s-decrypt; none in
	// k8s-encrypt.
	sealed sealedPools
	uids   atomic.Uint64
}

// dialK8s returns the calls to the sockets at addrs (unix://...), one
// connection each; nothing is sent yet.
func dialK8s(addrs []string, timeout time.Duration) (*k8sCalls, error) {
	k := &k8sCalls{timeout: timeout}
	for _, a := range addrs {
		c, err := k8skms.Dial(a)
		if err != nil {
			k.Close()
			return nil, fmt.Errorf("%s: %w", a, err)
		}
		k.clients = append(k.clients, c)
	}
	return k, nil
}

// Close closes the connections.
func (k *k8sCalls) Close() error {
	var errs []error
	for _, c := range k.clients {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// closeCalls closes the calls of targets that hold connections of their
// own (the k8s modes').
func closeCalls(targets []target) {
	for _, t := range targets {
		if c, ok := t.calls.(io.Closer); ok {
			c.Close()
		}
	}
}

// uid is the uid of a call: the API server names each of its calls so.
func (k *k8sCalls) uid() string {
	return "kmsbench-" + strconv.FormatUint(k.uids.Add(1), 10)
}

// call seals a new data key on node (k8s-encrypt), or opens one of the
// node's sealed keys and checks what it opens to (k8s-decrypt).
func (k *k8sCalls) call(ctx context.Context, node int, rng *mathrand.Rand) outcome {
	return sealOrOpen(ctx, k, k.sealed, node, rng, func(err error) outcome {
		// The client itself fails a call that got no answer: a
		// connection lost or refused, or -timeout passed.
		code := status.Code(err)
		noAnswer := code == codes.Unavailable || code == codes.DeadlineExceeded || code == codes.Canceled
		return outcome{answered: !noAnswer, failure: code.String()}
	})
}

// seal asks node to Encrypt a new random data key, and returns it
// with what Encrypt answered, and the call's latency.
func (k *k8sCalls) seal(ctx context.Context, node int) (sealedKey, time.Duration, error) {
	dk := make([]byte, dataKeySize)
	rand.Read(dk)
	req := &kmsapi.EncryptRequest{Plaintext: dk, Uid: k.uid()}
	res, latency, err := timed(ctx, k, k.clients[node].Encrypt, req)
	switch {
	case err != nil:
		return sealedKey{}, latency, err
	case len(res.Ciphertext) == 0 || res.KeyId == "":
		return sealedKey{}, latency, errIncomplete
	}
	return sealedKey{plaintext: dk, ciphertext: res.Ciphertext, keyID: res.KeyId}, latency, nil
}

// open asks node to Decrypt s and checks that it opens to s's data key.
// It returns the call's latency.
func (k *k8sCalls) open(ctx context.Context, node int, s sealedKey) (time.Duration, error) {
	req := &kmsapi.DecryptRequest{Ciphertext: s.ciphertext, KeyId: s.keyID, Uid: k.uid()}
	res, latency, err := timed(ctx, k, k.clients[node].Decrypt, req)
	return latency, s.opened(res.GetPlaintext(), err)
}

// timed makes the plugin call call of req within -timeout and returns
// its answer and latency.
func timed[Req, Res any](ctx context.Context, k *k8sCalls, call func(context.Context, Req, ...grpc.CallOption) (Res, error), req Req) (Res, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, k.timeout)
	defer cancel()
	t0 := time.Now()
	res, err := call(ctx, req)
	return res, time.Since(t0), err
}

// ready asks node's plugin for its Status, which must be healthy, and
// returns the key_id it answers.
func (k *k8sCalls) ready(ctx context.Context, node int) (string, error) {
	st, _, err := timed(ctx, k, k.clients[node].Status, &kmsapi.StatusRequest{})
	switch {
	case err != nil:
		return "", fmt.Errorf("Status: %w (is kmsd serving its KMS plugin there, -k8s-kms-socket?)", err)
	case st.Version != "v2":
		return "", fmt.Errorf("Status answers version %q, want v2", st.Version)
	case st.Healthz != "ok":
		return "", fmt.Errorf("Status answers that the plugin is not healthy: %s", st.Healthz)
	}
	return st.KeyId, nil
}

// prepareK8s is prepare for the k8s modes: it connects to the plugin
// socket of each node of t, checks that each is healthy (Status) and,
// for k8s-decrypt, seals the pool of data keys to decrypt through t's
// first node, or each node when they are apart.
func (b *bench) prepareK8s(ctx context.Context, t target) (caller, error) {
	o := b.o
	k, err := dialK8s(t.urls, o.timeout)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", t.name, err)
	}
	for i, u := range t.urls {
		keyID, err := k.ready(ctx, i)
		if err != nil {
			k.Close()
			return nil, b.cause(ctx, fmt.Errorf("%s: the KMS plugin at %s: %w", t.name, u, err))
		}
		b.notef("%s: the KMS plugin at %s encrypts with key_id %s", t.name, u, keyID)
	}
	if o.mode != "k8s-decrypt" {
		return k, nil
	}
	if k.sealed, err = b.sealPools(ctx, t, "sealed data keys", k); err != nil {
		k.Close()
		return nil, err
	}
	return k, nil
}
