package k8skms_test

import (
	"context"
	"net/http/httptest"
	"testing"

	kmsapi "k8s.io/kms/apis/v2"

	"github.com/ringkms/kms/internal/promtest"
	"github.com/ringkms/kms/k8skms"
	"github.com/ringkms/kms/metrics"
)

// Every call is counted by method and gRPC code.
func TestMetrics(t *testing.T) {
	m := metrics.New(metrics.Options{})
	p := newPlugin(t, k8skms.Options{Calls: m}, true)
	res := p.encrypt(t, dataKey())
	p.status(t)
	if _, err := p.decrypt(res.Ciphertext, res.KeyId); err != nil {
		t.Fatal(err)
	}
	p.decrypt([]byte("altered"), "")
	p.client.Encrypt(context.Background(), &kmsapi.EncryptRequest{})

	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	fams, err := promtest.Parse(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		labels []string
		want   float64
	}{
		{[]string{"method=Encrypt", "code=OK"}, 1},
		{[]string{"method=Encrypt", "code=InvalidArgument"}, 1},
		{[]string{"method=Decrypt", "code=OK"}, 1},
		{[]string{"method=Decrypt", "code=InvalidArgument"}, 1},
		{[]string{"method=Status", "code=OK"}, 1},
	} {
		if got := fams.Value("kms_grpc_requests_total", tt.labels...); got != tt.want {
			t.Errorf("kms_grpc_requests_total%v = %v, want %v", tt.labels, got, tt.want)
		}
	}
	if got := fams.Value("kms_grpc_request_duration_seconds", "method=Decrypt"); got != 2 {
		t.Errorf("kms_grpc_request_duration_seconds{method=Decrypt} counts %v calls, want 2", got)
	}
}
