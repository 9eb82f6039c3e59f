//go:build cgo

package main

import (
	"testing"

	"github.com/ringkms/kms/internal/hsmtest/hsmkey"
)

// TestRunSigningKeyPKCS11: with -signing-key-pkcs11, the kmsd kmsbench
// starts signs with a key pair in a SoftHSM2 token, and -against the same
// binary compares it with keys in memory, taking turns; every call
// succeeds on both.
func TestRunSigningKeyPKCS11(t *testing.T) {
	bin := testKmsd(t)
	_, uri := hsmkey.NewToken(t)
	sum, stderr := runJSON(t, noEnv, "-start", "-kmsd", bin, "-against", bin, "-signing-key-pkcs11", uri,
		"-kmsd-log-level", "warn", "-c", "4", "-d", "2s", "-rounds", "2", "-warmup", "100ms")
	checkStopped(t, startedPIDs(t, stderr))
	if len(sum.Rows) != 2 || sum.Rows[0].Target != "kmsd" || sum.Rows[1].Target != "against" {
		t.Fatalf("rows = %+v, want kmsd and against", sum.Rows)
	}
	for _, r := range sum.Rows {
		if r.Requests == 0 || r.Errors != 0 {
			t.Errorf("%s row: %d requests, %d errors %v; want requests, no error", r.Target, r.Requests, r.Errors, r.ErrorsByStatus)
		}
	}
}
