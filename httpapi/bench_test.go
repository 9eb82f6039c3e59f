package httpapi_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/httpapi"
	"github.com/ringkms/kms/kmstest"
)

// benchServer serves the handler over real HTTP (loopback, keep-alive) on
// an on-disk Badger store with durable writes and the audit trail on, with
// a request log at info level as kmsd has by default (written to
// io.Discard), and a ring named bench. It returns a function that POSTs a
// JSON body with the root API key and decodes the 200 answer into out.
func benchServer(b *testing.B) func(path, body string, out any) error {
	b.Helper()
	k := kmstest.New(b, kmstest.DiskStore(b), kms.Options{})
	log := zerolog.New(io.Discard).Level(zerolog.InfoLevel).With().Timestamp().Logger()
	srv, _ := kmstest.Serve(b, httpapi.New(k.Service, httpapi.Options{Logger: &log}), "")
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, MaxConnsPerHost: 64}}
	post := func(path, body string, out any) error {
		r, _ := http.NewRequest("POST", srv.URL+path, bytes.NewReader([]byte(body)))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Authorization", "Bearer "+k.RootKey)
		resp, err := client.Do(r)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			io.Copy(io.Discard, resp.Body)
			return &statusError{resp.StatusCode}
		}
		if out != nil {
			return json.NewDecoder(resp.Body).Decode(out)
		}
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	if err := post("/ks/keyrings", `{"name":"bench","kem":"x25519"}`, nil); err != nil {
		b.Fatal(err)
	}
	return post
}

// BenchmarkHTTPEncrypt is POST /ks/encrypt over real HTTP (see
// benchServer) from 64 concurrent clients.
func BenchmarkHTTPEncrypt(b *testing.B) {
	post := benchServer(b)
	b.SetParallelism(32)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := post("/ks/encrypt", `{"ringname":"bench"}`, nil); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkHTTPDecrypt is POST /ks/decrypt over real HTTP (see
// benchServer) from 64 concurrent clients, of 1000 hashes and headers made
// first.
func BenchmarkHTTPDecrypt(b *testing.B) {
	post := benchServer(b)
	bodies := make([]string, 1000)
	for i := range bodies {
		var res kms.EncryptResult
		if err := post("/ks/encrypt", `{"ringname":"bench"}`, &res); err != nil {
			b.Fatal(err)
		}
		body, _ := json.Marshal(kms.DecryptInput{Hash: res.Hash, Header: res.Header})
		bodies[i] = string(body)
	}
	var next atomic.Uint64
	b.SetParallelism(32)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := post("/ks/decrypt", bodies[next.Add(1)%uint64(len(bodies))], nil); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

type statusError struct{ status int }

func (e *statusError) Error() string { return http.StatusText(e.status) }
