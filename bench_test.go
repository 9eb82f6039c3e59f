package kms_test

import (
	"encoding/binary"
	"sync/atomic"
	"testing"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/benchcpu"
	"github.com/ringkms/kms/kmstest"
)

// benchEnv is a Service on an on-disk Badger store with durable writes, as
// kmsd runs it, and a ring to encrypt with.
func benchEnv(b *testing.B) (*env, kms.Store) {
	b.Helper()
	st := kmstest.DiskStore(b)
	e := newEnvOn(b, st, kms.Options{MasterKey: kms.GenerateMasterKey()})
	if _, err := e.svc.CreateKeyRing(e.root, kms.CreateKeyRingInput{Name: "bench"}); err != nil {
		b.Fatal(err)
	}
	if _, err := e.svc.CreateKeyRing(e.root, kms.CreateKeyRingInput{Name: "bench-split", DataKeys: kms.DataKeysSplit}); err != nil {
		b.Fatal(err)
	}
	return e, st
}

// parallel runs op from 64 concurrent callers (b.SetParallelism with
// GOMAXPROCS 2) until the benchmark ends or op fails, counting
// allocations and timing nothing before it.
func parallel(b *testing.B, op func() error) {
	b.Helper()
	b.SetParallelism(32)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := op(); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkEncrypt is in-process Encrypt with its durable activity record,
// from 64 concurrent callers (b.SetParallelism with GOMAXPROCS 2).
func BenchmarkEncrypt(b *testing.B) {
	e, _ := benchEnv(b)
	parallel(b, func() error {
		_, err := e.svc.Encrypt(e.root, kms.EncryptInput{RingName: "bench"})
		return err
	})
}

// BenchmarkEncryptLayers separates the domain's share of an encrypt call:
// "domain" is Encrypt with the journal answering at once (no record, no
// commit, no header signature); "journal" is Encrypt as it runs, durable
// record and signature included. With httpapi's BenchmarkLayers, the
// table of docs/BENCHMARKS.md of where a call's microseconds go.
// "domain-split" is "domain" on a ring with split data keys: what the
// key share adds.
func BenchmarkEncryptLayers(b *testing.B) {
	for _, layer := range []string{"domain", "domain-split", "journal"} {
		b.Run(layer, func(b *testing.B) {
			e, _ := benchEnv(b)
			ring := "bench"
			if layer != "journal" {
				kms.SkipJournal(e.svc)
			}
			if layer == "domain-split" {
				ring = "bench-split"
			}
			defer benchcpu.Start(b)()
			parallel(b, func() error {
				_, err := e.svc.Encrypt(e.root, kms.EncryptInput{RingName: ring})
				return err
			})
		})
	}
}

// BenchmarkDecrypt is in-process Decrypt with its durable activity record,
// from 64 concurrent callers.
func BenchmarkDecrypt(b *testing.B) {
	e, _ := benchEnv(b)
	res, err := e.svc.Encrypt(e.root, kms.EncryptInput{RingName: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	in := kms.DecryptInput{Hash: res.Hash, Header: res.Header}
	parallel(b, func() error {
		_, err := e.svc.Decrypt(e.root, in)
		return err
	})
}

// BenchmarkStoreCommit is the store's own floor: one small record per
// durable transaction, from 64 concurrent callers.
func BenchmarkStoreCommit(b *testing.B) {
	st := kmstest.DiskStore(b)
	var n atomic.Uint64
	val := make([]byte, 200)
	b.SetParallelism(32)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			key := binary.BigEndian.AppendUint64([]byte("bench/"), n.Add(1))
			if err := st.Update(b.Context(), func(tx kms.Txn) error { return tx.Set(key, val) }); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkAuthenticate is the credential check of every HTTP call: an API
// key whose principal is cached, from 64 concurrent callers.
func BenchmarkAuthenticate(b *testing.B) {
	e := newEnv(b)
	k, err := e.svc.CreateAPIKey(e.root, kms.APIKeyInput{AccountID: e.acct, Flags: kms.Flags{kms.FlagRoot: true}})
	if err != nil {
		b.Fatal(err)
	}
	parallel(b, func() error {
		_, err := e.svc.Authenticate(b.Context(), k.Key)
		return err
	})
}

// BenchmarkEncryptTransit is in-process EncryptTransit of a 32-byte
// plaintext (a data key, as SOPS and KMS plugins send) with its durable
// activity record, from 64 concurrent callers, beside BenchmarkEncrypt;
// BenchmarkDecryptTransit decrypts such ciphertexts.
func BenchmarkEncryptTransit(b *testing.B) {
	e, _ := benchEnv(b)
	in := kms.HeldEncryptInput{Name: "bench-transit", Create: true, Items: []kms.HeldPlaintext{{Plaintext: make([]byte, 32)}}}
	if _, err := e.svc.EncryptWithHeldKey(e.root, in); err != nil {
		b.Fatal(err)
	}
	parallel(b, func() error {
		out, err := e.svc.EncryptWithHeldKey(e.root, in)
		if err == nil {
			err = out[0].Err
		}
		return err
	})
}

func BenchmarkDecryptTransit(b *testing.B) {
	e, _ := benchEnv(b)
	out, err := e.svc.EncryptWithHeldKey(e.root, kms.HeldEncryptInput{Name: "bench-transit", Create: true,
		Items: []kms.HeldPlaintext{{Plaintext: make([]byte, 32)}}})
	if err != nil || out[0].Err != nil {
		b.Fatal(err, out)
	}
	in := kms.HeldDecryptInput{Name: "bench-transit", Items: []kms.HeldSealed{{KeyVersion: out[0].KeyVersion, Ciphertext: out[0].Ciphertext}}}
	parallel(b, func() error {
		res, err := e.svc.DecryptWithHeldKey(e.root, in)
		if err == nil {
			err = res[0].Err
		}
		return err
	})
}
