package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/httpapi"
	"github.com/ringkms/kms/kmstest"
)

// TestRunSettingsTLS loads a running kmsd (the real handler, in process)
// over HTTPS with a certificate no system trusts, configured by the
// settings every client reads: KMS_ADDR, KMS_API_KEY, KMS_CACERT. Without
// KMS_CACERT, kmsbench says the certificate is not trusted and how to
// trust it.
func TestRunSettingsTLS(t *testing.T) {
	k := kmstest.New(t, kmstest.MemoryStore(t), kms.Options{})
	srv, _, caFile := kmstest.ServeTLS(t, httpapi.New(k.Service, httpapi.Options{}))
	vars := map[string]string{"KMS_ADDR": srv.URL, "KMS_API_KEY": k.RootKey}
	getenv := func(k string) string { return vars[k] }
	args := []string{"-c", "2", "-n", "20", "-warmup", "0", "-mode", "mix", "-pool", "4"}

	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := run(ctx, args, getenv, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "certificate is not trusted") || !strings.Contains(err.Error(), "-ca-cert FILE or KMS_CACERT=FILE") {
		t.Fatalf("run without KMS_CACERT = %v, want the certificate not trusted and how to trust it", err)
	}

	vars["KMS_CACERT"] = caFile
	sum, _ := runJSON(t, getenv, args...)
	if len(sum.Rows) != 1 || sum.Rows[0].URL != srv.URL || sum.Rows[0].Requests != 20 || sum.Rows[0].Errors != 0 {
		t.Fatalf("rows = %+v, want 20 requests to %s without an error", sum.Rows, srv.URL)
	}
}
