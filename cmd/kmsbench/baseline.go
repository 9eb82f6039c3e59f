package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// The baseline is the floor under kmsd's figures: a Go net/http server
// that does the work of a trivial JSON API endpoint and nothing else. It
// decodes the same request bodies kmsd gets and answers a small JSON
// object, with no authentication, crypto or store, so the distance
// between the two rows is what kmsd itself costs.

// baselineHandler decodes a JSON body of at most 1 MiB and answers a
// small JSON object; a body that is not JSON is a 400.
func baselineHandler() http.Handler {
	var seq atomic.Int64
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			json.NewEncoder(w).Encode(map[string]string{"message": "method not allowed"})
			return
		}
		var in struct {
			RingName string `json:"ringname"`
			Hash     string `json:"hash"`
			Header   string `json:"header"`
		}
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&in); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			json.NewEncoder(w).Encode(map[string]string{"message": "invalid JSON body"})
			return
		}
		json.NewEncoder(w).Encode(struct {
			ID       string `json:"id"`
			RingName string `json:"ringname"`
			OK       bool   `json:"ok"`
		}{strconv.FormatInt(seq.Add(1), 10), in.RingName, true})
	})
}

// startBaseline serves baselineHandler on 127.0.0.1:0, with kmsd's
// server timeouts, and returns its URL and a function that stops it.
func startBaseline() (url string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{
		Handler:           baselineHandler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	go srv.Serve(ln)
	return "http://" + ln.Addr().String(), func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if srv.Shutdown(ctx) != nil {
			srv.Close()
		}
	}, nil
}
