package httpapi

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/julienschmidt/httprouter"
	"github.com/rs/zerolog"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/benchcpu"
	"github.com/ringkms/kms/kmstest"
)

// discardWriter is a ResponseWriter that keeps nothing: the layers are
// measured without a network or net/http's connection handling.
type discardWriter struct {
	h      http.Header
	status int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) WriteHeader(status int)      { w.status = status }

// BenchmarkLayers separates the server's cost of a call, in process (no
// network, no TLS), from 64 concurrent callers, on an on-disk store with
// the request log at info level as kmsd runs by default:
//
//   - bare: a net/http JSON handler that decodes the request and encodes
//     a small answer, the floor kmsbench's baseline stands for;
//   - auth: kmsd's router, request log, rate-limit check and API key
//     authentication on a route that does nothing;
//   - encrypt: POST /ks/encrypt, all of it.
//
// The kms package's BenchmarkEncryptLayers splits encrypt's domain work
// from its journal (durable record and header signature).
func BenchmarkLayers(b *testing.B) {
	k := kmstest.New(b, kmstest.DiskStore(b), kms.Options{})
	log := zerolog.New(io.Discard).Level(zerolog.InfoLevel).With().Timestamp().Logger()
	noop := route{method: http.MethodPost, path: "/bench/noop", handle: func(r *http.Request, _ httprouter.Params) (any, error) {
		var in struct {
			RingName string `json:"ringname"`
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			return nil, err
		}
		return struct {
			OK bool `json:"ok"`
		}{true}, nil
	}}
	h := newHandler(k.Service, Options{Logger: &log}, []route{noop})
	if code := serveOnce(h, "/ks/keyrings", `{"name":"bench","kem":"x25519"}`, k.RootKey); code != http.StatusOK {
		b.Fatalf("create ring: %d", code)
	}
	bare := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			RingName string `json:"ringname"`
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"ok": true, "ringname": in.RingName})
	})
	for _, layer := range []struct {
		name, path string
		h          http.Handler
	}{
		{"bare", "/bare", bare},
		{"auth", "/bench/noop", h},
		{"encrypt", "/ks/encrypt", h},
	} {
		b.Run(layer.name, func(b *testing.B) {
			b.SetParallelism(32)
			b.ReportAllocs()
			b.ResetTimer()
			defer benchcpu.Start(b)()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if code := serveOnce(layer.h, layer.path, `{"ringname":"bench"}`, k.RootKey); code != http.StatusOK {
						b.Errorf("%s: %d", layer.path, code)
						return
					}
				}
			})
		})
	}
}

// serveOnce serves one POST of body to path with the API key secret.
func serveOnce(h http.Handler, path, body, secret string) int {
	r, _ := http.NewRequest(http.MethodPost, path, bytes.NewReader([]byte(body)))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Authorization", "Bearer "+secret)
	r.RemoteAddr = "127.0.0.1:40000"
	w := &discardWriter{h: http.Header{}, status: http.StatusOK}
	h.ServeHTTP(w, r)
	return w.status
}
