package kms_test

import (
	"errors"
	"testing"

	"github.com/ringkms/kms"
)

// The signatures and HMACs of held keys through the Service, in process,
// with their durable activity records, from 64 concurrent callers, as
// BenchmarkEncryptTransit: beside internal/keytype's BenchmarkSign and
// BenchmarkVerify (the bare crypto, one caller), what the Service adds.

// heldSignKeys are the key types BenchmarkHeldSign and BenchmarkHeldVerify
// compare, those of internal/keytype's BenchmarkSign.
var heldSignKeys = []struct {
	name string
	key  kms.CreateHeldKeyInput
}{
	{"ml-dsa-65", kms.CreateHeldKeyInput{Type: "ml-dsa", ParameterSet: "65"}},
	{"ed25519", kms.CreateHeldKeyInput{Type: "ed25519"}},
	{"ecdsa-p256", kms.CreateHeldKeyInput{Type: "ecdsa-p256"}},
}

// heldInput is what the benchmarks sign, 256 bytes as internal/keytype's.
var heldInput = make([]byte, 256)

// heldKeyEnv is benchEnv with the held key "bench-held" made by key.
func heldKeyEnv(b *testing.B, key kms.CreateHeldKeyInput) *env {
	b.Helper()
	e, _ := benchEnv(b)
	key.Name = "bench-held"
	if _, err := e.svc.CreateHeldKey(e.root, key); err != nil {
		b.Fatal(err)
	}
	return e
}

// produced is the error of a call that signs (or computes the HMAC of)
// one input: the call's, else the item's.
func produced(out []kms.HeldSigned, err error) error {
	if err == nil {
		err = out[0].Err
	}
	return err
}

func BenchmarkHeldSign(b *testing.B) {
	for _, k := range heldSignKeys {
		b.Run(k.name, func(b *testing.B) {
			e := heldKeyEnv(b, k.key)
			in := kms.HeldSignInput{Name: "bench-held", Inputs: [][]byte{heldInput}}
			parallel(b, func() error { return produced(e.svc.SignWithHeldKey(e.root, in)) })
		})
	}
}

func BenchmarkHeldVerify(b *testing.B) {
	for _, k := range heldSignKeys {
		b.Run(k.name, func(b *testing.B) {
			e := heldKeyEnv(b, k.key)
			out, err := e.svc.SignWithHeldKey(e.root, kms.HeldSignInput{Name: "bench-held", Inputs: [][]byte{heldInput}})
			if err = produced(out, err); err != nil {
				b.Fatal(err)
			}
			in := kms.HeldVerifyInput{Name: "bench-held", Items: []kms.HeldCheck{{KeyVersion: out[0].KeyVersion, Signature: out[0].Signature, Input: heldInput}}}
			parallel(b, func() error {
				res, err := e.svc.VerifyWithHeldKey(e.root, in)
				switch {
				case err != nil:
					return err
				case res[0].Err != nil:
					return res[0].Err
				case !res[0].Valid:
					return errors.New("the signature does not verify")
				}
				return nil
			})
		})
	}
}

// BenchmarkHeldHMAC computes the HMAC (sha2-256) of 256 bytes with an
// hmac key.
func BenchmarkHeldHMAC(b *testing.B) {
	e := heldKeyEnv(b, kms.CreateHeldKeyInput{Type: "hmac"})
	in := kms.HeldSignInput{Name: "bench-held", Inputs: [][]byte{heldInput}}
	parallel(b, func() error { return produced(e.svc.HMACWithHeldKey(e.root, in)) })
}
