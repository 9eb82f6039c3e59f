package k8s_test

import (
	"context"
	"os"
	"testing"

	kmsapi "k8s.io/kms/apis/v2"

	"github.com/ringkms/kms/integration/internal/harness"
	"github.com/ringkms/kms/internal/kmsdtest"
	"github.com/ringkms/kms/internal/netproxy"
	"github.com/ringkms/kms/internal/pgtest"
)

// TestKmsdStopped: while kmsd is stopped, an API server that starts has
// no DEK: it stores nothing (an error, no plaintext), cannot read what
// another stored, and its health check fails; an API server that was
// running cannot read a value whose DEK it never saw. Once kmsd starts
// again on the same data and socket, both recover without being
// rebuilt: healthy, and they write and read. Killed, it starts again in
// place of the socket file it left.
func TestKmsdStopped(t *testing.T) {
	t.Parallel()
	n := startNode(t, harness.New(t), socketPath(t))
	writer := loadAPIServer(t, n.socket)
	body, secret := secretOf(t, "kept")
	stored := writer.mustWrite(t, etcdKey("kept"), body, secret)
	running := loadAPIServer(t, n.socket) // its own DEK, not writer's

	n.p.Stop(t)
	if out, _, err := running.read(etcdKey("kept"), stored); err == nil {
		t.Fatalf("an API server read, with kmsd stopped, a Secret whose DEK it never decrypted: %d bytes", len(out))
	}
	fresh := loadAPIServer(t, n.socket)
	if out, err := fresh.write(etcdKey("new"), body); err == nil || len(out) != 0 {
		t.Fatalf("an API server started with kmsd stopped stored a Secret: %d bytes, %v; want an error and nothing stored", len(out), err)
	}
	if out, _, err := fresh.read(etcdKey("kept"), stored); err == nil {
		t.Fatalf("an API server started with kmsd stopped read a stored Secret: %d bytes", len(out))
	}
	if err := fresh.check(); err == nil {
		t.Fatal("the KMS health check of an API server started with kmsd stopped passes")
	}

	n.start(t)
	kmsdtest.WaitFor(t, probeBound, "the API server started during the outage to be healthy", func() bool { return fresh.check() == nil })
	fresh.mustRead(t, etcdKey("kept"), stored, body)
	again := fresh.mustWrite(t, etcdKey("new"), body, secret)
	fresh.mustRead(t, etcdKey("new"), again, body)
	writer.mustRead(t, etcdKey("new"), again, body)
	running.mustRead(t, etcdKey("kept"), stored, body)

	// Killed, kmsd leaves its socket file behind; it takes its place when
	// it starts again, and the API servers reach it there.
	n.p.Kill(t)
	if _, err := os.Stat(n.socket); err != nil {
		t.Fatalf("kmsd killed: %v; want its socket file left behind", err)
	}
	n.start(t)
	loadAPIServer(t, n.socket).mustRead(t, etcdKey("new"), again, body)
}

// TestStoreUnreachable: while kmsd cannot reach its database, Status
// answers that it is not healthy, with the key_id it answered last (a
// store outage is no key rotation), and the API server's health check
// fails; an API server that starts then gets no DEK sealed, so stores
// nothing. Once the database answers again, both are healthy without a
// restart, and Secrets are stored and read.
func TestStoreUnreachable(t *testing.T) {
	t.Parallel()
	proxy, store := pgtest.Proxy(t, pgtest.URL(t))
	n := startNode(t, harness.New(t), socketPath(t), "-store", store)
	api := loadAPIServer(t, n.socket)
	before := pluginStatus(t, n.socket).KeyId

	proxy.SetMode(netproxy.Refuse)
	c := plugin(t, n.socket)
	var st *kmsapi.StatusResponse
	kmsdtest.WaitFor(t, probeBound, "Status to say kmsd cannot serve", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		var err error
		st, err = c.Status(ctx, &kmsapi.StatusRequest{})
		if err != nil {
			t.Fatalf("Status with the database unreachable = %v, want an answer", err)
		}
		return st.Healthz != "ok"
	})
	if st.Version != "v2" || st.KeyId != before {
		t.Errorf("Status with the database unreachable = %+v, want version v2 and the key_id %q answered before", st, before)
	}
	kmsdtest.WaitFor(t, probeBound, "the API server's KMS health check to fail", func() bool { return api.check() != nil })
	fresh := loadAPIServer(t, n.socket)
	body, secret := secretOf(t, "outage")
	if out, err := fresh.write(etcdKey("outage"), body); err == nil || len(out) != 0 {
		t.Fatalf("an API server started with kmsd's database unreachable stored a Secret: %d bytes, %v; want an error and nothing stored", len(out), err)
	}

	proxy.SetMode(netproxy.Pass)
	kmsdtest.WaitFor(t, probeBound, "the API servers to be healthy again", func() bool { return api.check() == nil && fresh.check() == nil })
	stored := fresh.mustWrite(t, etcdKey("outage"), body, secret)
	api.mustRead(t, etcdKey("outage"), stored, body)
}
