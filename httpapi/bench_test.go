package httpapi_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/httpapi"
	"github.com/ringkms/kms/store/badgerstore"
)

// BenchmarkHTTPEncrypt is POST /ks/encrypt over real HTTP (loopback, keep-
// alive) on an on-disk Badger store with durable writes and the audit
// trail on, from 64 concurrent clients.
func BenchmarkHTTPEncrypt(b *testing.B) {
	st, err := badgerstore.OpenDir(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	svc, err := kms.New(st, kms.Options{MasterKey: kms.GenerateMasterKey()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { svc.Close() })
	boot, err := svc.Bootstrap(context.Background(), "")
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.New(svc, httpapi.Options{}))
	b.Cleanup(srv.Close)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, MaxConnsPerHost: 64}}
	post := func(path, body string) error {
		r, _ := http.NewRequest("POST", srv.URL+path, bytes.NewReader([]byte(body)))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Authorization", "Bearer "+boot.Secret)
		resp, err := client.Do(r)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != http.StatusOK {
			return &statusError{resp.StatusCode}
		}
		return nil
	}
	if err := post("/ks/keyrings", `{"name":"bench"}`); err != nil {
		b.Fatal(err)
	}
	b.SetParallelism(32)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := post("/ks/encrypt", `{"ringname":"bench"}`); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

type statusError struct{ status int }

func (e *statusError) Error() string { return http.StatusText(e.status) }
