package k8s_test

import (
	"os"
	"testing"

	"github.com/ringkms/kms/integration/internal/harness"
	"github.com/ringkms/kms/internal/kmsdtest"
)

// TestKmsdStopped: while kmsd is stopped, an API server that starts has
// no DEK: it stores nothing (an error, no plaintext), cannot read what
// another stored, and its health check fails; an API server that was
// running cannot read a value whose DEK it never saw. Once kmsd starts
// again on the same data and socket, both recover without being
// rebuilt: healthy, and they write and read. Killed, it starts again in
// place of the socket file it left.
func TestKmsdStopped(t *testing.T) {
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
