package kms_test

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"log"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/store/badgerstore"
)

// Each example starts the same way, with newApplication (or newRing, which
// also makes a key ring): a Service on an in-memory store, with a master
// key made for the run (in production the key comes from KMS_MASTER_KEY or
// a key file: see the package documentation), and the application acting
// as itself.

// newApplication starts a Service on an in-memory store and returns it
// with a context in which the application app acts as itself. stop closes
// the Service, then the store.
func newApplication(app string) (ctx context.Context, svc *kms.Service, stop func()) {
	st, err := badgerstore.OpenInMemory()
	if err != nil {
		log.Fatal(err)
	}
	svc, err = kms.New(st, kms.Options{MasterKey: kms.GenerateMasterKey()})
	if err != nil {
		log.Fatal(err)
	}
	p, err := svc.Application(context.Background(), app)
	if err != nil {
		log.Fatal(err)
	}
	return kms.WithPrincipal(context.Background(), p), svc, func() { svc.Close(); st.Close() }
}

// newRing is newApplication with a key ring of the application's, made as
// in ExampleService_CreateKeyRing: with no DataKeys, so its data keys are
// split.
func newRing(app, name string) (ctx context.Context, svc *kms.Service, ring *kms.CreateKeyRingResult, stop func()) {
	ctx, svc, stop = newApplication(app)
	ring, err := svc.CreateKeyRing(ctx, kms.CreateKeyRingInput{Name: name})
	if err != nil {
		log.Fatal(err)
	}
	return ctx, svc, ring, stop
}

func ExampleService_CreateKeyRing() {
	ctx, svc, stop := newApplication("billing")
	defer stop()

	// The service makes the ring's key pair (X-Wing unless KEM says
	// "x25519", or the caller brings PublicKey) and its first key. Its
	// data keys are split unless DataKeys says "ring": a call's data key
	// needs a share that only the call and a recorded decrypt get.
	ring, err := svc.CreateKeyRing(ctx, kms.CreateKeyRingInput{Name: "payments"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("ring:", ring.Ring.Name)
	fmt.Println("data keys:", ring.Ring.DataKeys)
	fmt.Println("active key is the first key:", ring.Ring.ActiveKey == ring.Key.ID)
	fmt.Println("its keys are wrapped with:", ring.Key.KeyData.Encrypted.Key.Encoding)
	// The private key comes back this once: the service keeps no copy,
	// and without it no key of the ring can be unwrapped.
	fmt.Println("private key returned:", ring.PrivateKey != "")

	// Names are unique.
	_, err = svc.CreateKeyRing(ctx, kms.CreateKeyRingInput{Name: "payments"})
	fmt.Println("again:", errors.Is(err, kms.ErrConflict))
	// Output:
	// ring: payments
	// data keys: split
	// active key is the first key: true
	// its keys are wrapped with: hpke-xwing
	// private key returned: true
	// again: true
}

func ExampleService_Encrypt() {
	ctx, svc, ring, stop := newRing("billing", "payments")
	defer stop()

	// Encrypt hands out the ring's active key, wrapped for the ring's
	// public key, the call's share of its data key, a hash unique to this
	// call and a header that signs it. Keep the hash and the header beside
	// the ciphertext: Decrypt gives the key and the share back for them.
	enc, err := svc.Encrypt(ctx, kms.EncryptInput{RingName: "payments"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("key:", enc.Key.ID == ring.Key.ID, enc.Key.KeyData.Encrypted.Key.Encoding)
	fmt.Println("share, hash and header:", enc.KeyShare != "", enc.Hash != "", enc.Header != "")

	again, err := svc.Encrypt(ctx, kms.EncryptInput{RingName: "payments"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("same key, another hash:", again.Key.ID == enc.Key.ID, again.Hash != enc.Hash)
	// Output:
	// key: true hpke-xwing
	// share, hash and header: true true true
	// same key, another hash: true true
}

func ExampleService_Decrypt() {
	ctx, svc, _, stop := newRing("billing", "payments")
	defer stop()
	// The Asset records what the key protects; the header signs it.
	enc, err := svc.Encrypt(ctx, kms.EncryptInput{RingName: "payments",
		Asset: &kms.AssetInput{Data: map[string]any{"file": "invoice-42.pdf"}}})
	if err != nil {
		log.Fatal(err)
	}

	// Later: the hash and header kept with the ciphertext give the key
	// back, once the service has checked them and the Asset.
	dec, err := svc.Decrypt(ctx, kms.DecryptInput{Hash: enc.Hash, Header: enc.Header})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("ring:", dec.RingName)
	fmt.Println("the key of encrypt:", dec.Key.ID == enc.Key.ID)
	fmt.Println("asset valid:", dec.Asset.Valid)

	// The header of another call does not open this one: the service
	// refuses, and says which check failed.
	other, err := svc.Encrypt(ctx, kms.EncryptInput{RingName: "payments"})
	if err != nil {
		log.Fatal(err)
	}
	dec, err = svc.Decrypt(ctx, kms.DecryptInput{Hash: enc.Hash, Header: other.Header})
	fmt.Println("another call's header:", kms.ErrorKind(err))
	fmt.Println("asset valid:", dec.Asset.Valid, "-", dec.Asset.Message)
	// Output:
	// ring: payments
	// the key of encrypt: true
	// asset valid: true
	// another call's header: unprocessable
	// asset valid: false - header failed verification: it was issued for another hash
}

func ExampleUnwrapKey() {
	ctx, svc, ring, stop := newRing("billing", "payments")
	defer stop()

	// The ring's private key opens the keys the service hands out wrapped
	// for the ring (here its first key, as CreateKeyRing answered it; the
	// key of an Encrypt or a Decrypt the same way): the ring's 32 bytes.
	// With a call's share they make the call's data key: see DataKey.
	ringKey, err := kms.UnwrapKey([]byte(ring.PrivateKey), ring.Ring.ID, ring.Key)
	if err != nil {
		log.Fatal(err)
	}
	defer clear(ringKey)
	fmt.Println("key bytes:", len(ringKey))

	// Another ring's private key opens nothing.
	other, err := svc.CreateKeyRing(ctx, kms.CreateKeyRingInput{Name: "receipts"})
	if err != nil {
		log.Fatal(err)
	}
	_, err = kms.UnwrapKey([]byte(other.PrivateKey), ring.Ring.ID, ring.Key)
	fmt.Println("with another ring's key:", kms.ErrorKind(err))
	// Output:
	// key bytes: 32
	// with another ring's key: unprocessable
}

func ExampleDataKey() {
	ctx, svc, stop := newApplication("payroll")
	defer stop()
	// DataKeysSplit is the default: a ring made with no DataKeys has split
	// data keys too.
	ring, err := svc.CreateKeyRing(ctx, kms.CreateKeyRingInput{Name: "salaries", DataKeys: kms.DataKeysSplit})
	if err != nil {
		log.Fatal(err)
	}
	enc, err := svc.Encrypt(ctx, kms.EncryptInput{RingName: "salaries"})
	if err != nil {
		log.Fatal(err)
	}

	// On a ring with split data keys, the call's data key is made of the
	// ring's key and the call's share; the ring's key alone is not it.
	ringKey, err := kms.UnwrapKey([]byte(ring.PrivateKey), enc.RingID, enc.Key)
	if err != nil {
		log.Fatal(err)
	}
	defer clear(ringKey)
	key, err := kms.DataKey(ringKey, enc.KeyShare)
	if err != nil {
		log.Fatal(err)
	}
	defer clear(key)
	fmt.Println("data key bytes:", len(key), "- the ring's key:", string(key) == string(ringKey))

	// It is an AES-256 key to encrypt with (here AES-256-GCM, bound to the
	// call's hash; package envelope does it all in chunks, for data of any
	// size). Keep the hash and the header beside the ciphertext.
	block, err := aes.NewCipher(key)
	if err != nil {
		log.Fatal(err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		log.Fatal(err)
	}
	nonce := make([]byte, aead.NonceSize())
	rand.Read(nonce)
	sealed := aead.Seal(nil, nonce, []byte("card ending 4242"), []byte(enc.Hash))
	opened, err := aead.Open(nil, nonce, sealed, []byte(enc.Hash))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("opened: %s\n", opened)

	// Later, a decrypt of the call's hash and header (authorised, and
	// recorded) answers the same key and the same share: the same data key.
	dec, err := svc.Decrypt(ctx, kms.DecryptInput{Hash: enc.Hash, Header: enc.Header})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("decrypt gives the same key and share:", dec.Key.ID == enc.Key.ID && dec.KeyShare == enc.KeyShare)
	// Output:
	// data key bytes: 32 - the ring's key: false
	// opened: card ending 4242
	// decrypt gives the same key and share: true
}
