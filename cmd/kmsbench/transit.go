package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/ringkms/kms/internal/keytype"
)

// The transit modes call Vault's transit interface (kmsd -transit) on
// one transit key, made with the type of -key-type when missing: each
// mode sends one call, alone or as batch_input, and transit-decrypt
// decrypts the ciphertexts of earlier encrypt calls.

// transitCall is the call a transit mode sends: its route, the field of
// an item's input, the key type it makes by default and what the key's
// type must do.
type transitCall struct {
	route, field string
	defaultType  keytype.Type
	needs        string                  // what the type must do, for the error
	accepts      func(keytype.Type) bool // whether a key of the type can serve the call
}

var (
	encryptCall = transitCall{route: "encrypt", field: "plaintext", defaultType: keytype.AES256GCM96, needs: "encrypts", accepts: keytype.Type.Encrypts}
	// transitCalls are the calls of the transit modes; transit-decrypt
	// makes its ciphertexts with transit-encrypt's.
	transitCalls = map[string]transitCall{
		"transit-encrypt": encryptCall,
		"transit-decrypt": encryptCall,
		"transit-sign":    {route: "sign", field: "input", defaultType: keytype.Ed25519, needs: "signs", accepts: keytype.Type.Signs},
		"transit-hmac":    {route: "hmac", field: "input", defaultType: keytype.HMAC, needs: "computes HMACs", accepts: func(keytype.Type) bool { return true }},
	}
)

// transitMode reports whether mode drives Vault's transit interface
// (kmsd -transit) rather than /ks.
func transitMode(mode string) bool { return strings.HasPrefix(mode, "transit-") }

// transitPlaintext is the input of the transit calls, in base64: 32
// bytes, the size of the data keys that SOPS, OpenTofu and KMS plugins
// encrypt, and of a digest to sign.
var transitPlaintext = base64.StdEncoding.EncodeToString([]byte("kmsbench: a 32-byte data key...."))

// transitKey is the transit key a run makes: its type and, for ml-dsa,
// its parameter set.
type transitKey struct {
	Type         keytype.Type         `json:"type"`
	ParameterSet keytype.ParameterSet `json:"parameter_set"`
}

// String names the key as -key-type does: ml-dsa-65, ed25519...
func (k transitKey) String() string {
	if k.ParameterSet != "" {
		return string(k.Type) + "-" + string(k.ParameterSet)
	}
	return string(k.Type)
}

// parseKeyType reads -key-type s for a transit mode: a key type of
// Vault's transit (ed25519, ecdsa-p256, rsa-2048...), or ml-dsa-44,
// ml-dsa-65 or ml-dsa-87 for ml-dsa with that parameter set (ml-dsa
// alone is 65); empty is the mode's default. The type must serve the
// mode's call.
func parseKeyType(s, mode string) (transitKey, error) {
	tc := transitCalls[mode]
	if s == "" {
		s = string(tc.defaultType)
	}
	name, set := s, ""
	if rest, ok := strings.CutPrefix(s, string(keytype.MLDSA)+"-"); ok {
		name, set = string(keytype.MLDSA), rest
	}
	spec, err := keytype.NewSpec(keytype.Type(name), keytype.Params{ParameterSet: keytype.ParameterSet(set)})
	if err != nil {
		return transitKey{}, fmt.Errorf("-key-type %q: %s (ml-dsa-44, ml-dsa-65 or ml-dsa-87 for a parameter set of ml-dsa)", s, keytype.Message(err))
	}
	k := transitKey{Type: spec.Type(), ParameterSet: spec.Params().ParameterSet}
	if !tc.accepts(k.Type) {
		return k, fmt.Errorf("-key-type %s: -mode %s wants a key type that %s", s, mode, tc.needs)
	}
	return k, nil
}

// newTransitCall returns the call tc of the transit key ring: one input
// (transitPlaintext), or with n above 1 a batch_input of n.
func newTransitCall(tc transitCall, ring string, n int) request {
	path := "/v1/transit/" + tc.route + "/" + url.PathEscape(ring)
	item := map[string]any{tc.field: transitPlaintext}
	if n <= 1 {
		body, _ := json.Marshal(item)
		return request{path: path, body: body}
	}
	items := make([]map[string]any, n)
	for i := range items {
		items[i] = item
	}
	body, _ := json.Marshal(map[string]any{"batch_input": items})
	return request{path: path, body: body}
}

// transitDecryptOf turns the answer of a transit encrypt of the key ring
// into the decrypt call of its ciphertext.
func transitDecryptOf(ring string) func(json.RawMessage) (request, error) {
	return func(answer json.RawMessage) (request, error) {
		var out struct {
			Data struct {
				Ciphertext string `json:"ciphertext"`
			} `json:"data"`
		}
		if err := json.Unmarshal(answer, &out); err != nil || out.Data.Ciphertext == "" {
			return request{}, errors.New("transit encrypt answer without a ciphertext")
		}
		body, _ := json.Marshal(map[string]any{"ciphertext": out.Data.Ciphertext})
		return request{path: "/v1/transit/decrypt/" + url.PathEscape(ring), body: body}, nil
	}
}

// batchedTransit is batched for the transit modes: batch_input of n
// inputs of tc, or of n ciphertexts of the pool.
func (w *workload) batchedTransit(tc transitCall, ring string, n int) {
	w.produce = newTransitCall(tc, ring, n)
	w.batchPool(n, "/v1/transit/decrypt/"+url.PathEscape(ring), "batch_input")
}

// ensureTransitKey creates the transit key ring, of the type want,
// unless it exists; one that exists must be of that type (and parameter
// set), else the run would measure another key than it says.
func ensureTransitKey(ctx context.Context, c *http.Client, base, key, ring string, want transitKey) (created bool, err error) {
	path := "/v1/transit/keys/" + url.PathEscape(ring)
	var got struct {
		Data transitKey `json:"data"`
	}
	status, err := call(ctx, c, base, key, http.MethodGet, path, nil, &got)
	if err == nil {
		if got.Data != want {
			return false, fmt.Errorf("the key is %s, not %s (-key-type): name another key with -ring", got.Data, want)
		}
		return false, nil
	}
	if status != http.StatusNotFound {
		return false, fmt.Errorf("%w (is kmsd serving the transit interface, -transit?)", err)
	}
	in := map[string]any{"type": want.Type}
	if want.ParameterSet != "" {
		in["parameter_set"] = want.ParameterSet
	}
	body, _ := json.Marshal(in)
	_, err = call(ctx, c, base, key, http.MethodPost, path, body, nil)
	return err == nil, err
}

// prepareTransit is prepareOn for the transit modes: the transit key (an
// /asym ring) and, for transit-decrypt, the pool of ciphertexts to
// decrypt.
func (b *bench) prepareTransit(ctx context.Context, t target, first string) (*workload, error) {
	o := b.o
	created, err := ensureTransitKey(ctx, b.client, first, t.key, o.ring, o.transitKey)
	if err != nil {
		return nil, b.cause(ctx, fmt.Errorf("%s: transit key %s: %w", t.name, o.ring, err))
	}
	if created {
		b.notef("%s: created transit key %s (%s) on %s", t.name, o.ring, o.transitKey, first)
	}
	tc := transitCalls[o.mode]
	work := &workload{mode: strings.TrimPrefix(o.mode, "transit-"), produce: newTransitCall(tc, o.ring, 1)}
	if o.mode == "transit-decrypt" {
		t0 := time.Now()
		work.pool, err = makePool(ctx, b.client, first, t.key, work.produce, o.pool, o.concurrency, transitDecryptOf(o.ring))
		if err != nil {
			return nil, b.cause(ctx, fmt.Errorf("%s: %w", t.name, err))
		}
		b.notePool(t, len(work.pool), "ciphertexts", first, t0)
	}
	if o.batch > 1 {
		work.batchedTransit(tc, o.ring, o.batch)
	}
	return work, nil
}
