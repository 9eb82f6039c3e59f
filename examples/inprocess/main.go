// Command inprocess uses ringkms as a library, in process, on the embedded
// Badger store: no server, no HTTP.
//
// It creates a key ring, asks for a key to encrypt a document with (and
// records the document as an Asset), gets the same key back with the hash
// and header of that call, and unwraps it with the ring's private key using
// only the standard library (crypto/hpke, as docs/FORMAT.md describes), to
// encrypt and decrypt the document with AES-256-GCM.
//
//	go run ./examples/inprocess            # a temporary data directory
//	go run ./examples/inprocess -data DIR  # DIR, kept: run it again on it
package main

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hpke"
	"crypto/rand"
	"encoding/base64"
	"flag"
	"fmt"
	"os"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/examples/internal/devkeys"
	"github.com/ringkms/kms/store/badgerstore"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "inprocess:", err)
		os.Exit(1)
	}
}

func run() error {
	data := flag.String("data", "", "data directory of the Badger store (default: a new temporary directory, removed at the end)")
	flag.Parse()
	if *data == "" {
		dir, err := os.MkdirTemp("", "ringkms-inprocess-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		*data = dir
	}
	ctx := context.Background()

	// The store and the Service. The store opens again only under the
	// master key it was made with: this example keeps its key, and the
	// root API key's secret, beside the data (as kmsd -dev does), so that
	// it can run again on the same directory. A real deployment keeps its
	// master key apart from the data (kmsd reads it from KMS_MASTER_KEY).
	masterKey, rootSecret, err := devkeys.Load(*data)
	if err != nil {
		return err
	}
	st, err := badgerstore.OpenDir(*data)
	if err != nil {
		return err
	}
	defer st.Close()
	svc, err := kms.New(st, kms.Options{MasterKey: masterKey})
	if err != nil {
		return err
	}
	defer svc.Close() // runs before st.Close

	// Every call acts for a principal. Bootstrap creates the root API key
	// of an empty store, with the secret given (and does nothing on a
	// store that has keys); Authenticate turns the secret into the
	// principal, which travels in the context.
	boot, err := svc.Bootstrap(ctx, rootSecret)
	if err != nil {
		return err
	}
	root, err := svc.Authenticate(ctx, rootSecret)
	if err != nil {
		return err
	}
	ctx = kms.WithPrincipal(ctx, root)
	if boot.Created {
		fmt.Printf("store in %s, bootstrapped the root API key %s\n", *data, boot.KeyID)
	} else {
		fmt.Printf("store in %s, opened again with its root API key\n", *data)
	}

	// A key ring, named anew on each run. Its keys are wrapped for its
	// public key (X-Wing, the post-quantum hybrid, by default); the
	// private key is returned this once and the service keeps no copy.
	ring, err := svc.CreateKeyRing(ctx, kms.CreateKeyRingInput{Name: "documents-" + rand.Text()[:6]})
	if err != nil {
		return err
	}
	fmt.Printf("created key ring %q (%s), first key %s\n", ring.Ring.Name, ring.Ring.ID, ring.Key.ID)

	// Encrypt: the active key, wrapped, with a unique hash and a signed
	// header. The Asset records what the key protects; the header signs it.
	enc, err := svc.Encrypt(ctx, kms.EncryptInput{RingName: ring.Ring.Name,
		Asset: &kms.AssetInput{Data: map[string]any{"file": "report.pdf", "owner": "finance"}}})
	if err != nil {
		return err
	}
	fmt.Printf("encrypt: key %s (%s), Asset %s, hash %s...\n", enc.Key.ID, enc.Key.KeyData.Encrypted.Key.Encoding, enc.Asset.ID, enc.Hash[:16])

	// Unwrap the key and encrypt the document with it. Only the hash and
	// the header need to be kept with the ciphertext.
	document := []byte("Q3 revenue: up 12%")
	key, err := unwrap(ring.PrivateKey, enc.RingID, enc.Key)
	if err != nil {
		return err
	}
	sealed, err := sealGCM(key, document)
	clear(key)
	if err != nil {
		return err
	}
	fmt.Printf("encrypted %d bytes with AES-256-GCM into %d bytes\n", len(document), len(sealed))

	// Later: decrypt gives the same key back from the hash and header, and
	// says whether the Asset is still what the header signed.
	dec, err := svc.Decrypt(ctx, kms.DecryptInput{Hash: enc.Hash, Header: enc.Header})
	if err != nil {
		return err
	}
	fmt.Printf("decrypt: key %s of ring %q; asset valid: %v (%s)\n", dec.Key.ID, dec.RingName, dec.Asset.Valid, dec.Asset.Message)
	key, err = unwrap(ring.PrivateKey, dec.RingID, dec.Key)
	if err != nil {
		return err
	}
	opened, err := openGCM(key, sealed)
	clear(key)
	if err != nil {
		return err
	}
	fmt.Printf("decrypted: %q\n", opened)
	return nil
}

// unwrap opens a key's keyData with the ring's private key (standard
// base64 of the X-Wing seed), per docs/FORMAT.md section 2: HPKE base
// mode, KEM MLKEM768-X25519, HKDF-SHA256, AES-256-GCM, with the info
// string binding the key to its ring and ID.
func unwrap(privateKey, ringID string, k *kms.Key) ([]byte, error) {
	if k.KeyData.Encrypted.Key.Encoding != "hpke-xwing" {
		return nil, fmt.Errorf("key %s: encoding %q: this example unwraps hpke-xwing", k.ID, k.KeyData.Encrypted.Key.Encoding)
	}
	seed, err := base64.StdEncoding.DecodeString(privateKey)
	if err != nil {
		return nil, fmt.Errorf("private key: %w", err)
	}
	enc, err := base64.StdEncoding.DecodeString(k.KeyData.IV)
	if err != nil {
		return nil, fmt.Errorf("keyData.iv: %w", err)
	}
	ct, err := base64.StdEncoding.DecodeString(k.KeyData.Encrypted.Key.Value)
	if err != nil {
		return nil, fmt.Errorf("keyData.encrypted.key.value: %w", err)
	}
	priv, err := hpke.MLKEM768X25519().NewPrivateKey(seed)
	if err != nil {
		return nil, err
	}
	info := []byte("ringkms/keydata/v1/" + ringID + "/" + k.ID)
	r, err := hpke.NewRecipient(enc, priv, hpke.HKDFSHA256(), hpke.AES256GCM(), info)
	if err != nil {
		return nil, err
	}
	return r.Open(nil, ct)
}

// sealGCM encrypts plaintext with AES-256-GCM under key: a random nonce,
// then the ciphertext and its tag.
func sealGCM(key, plaintext []byte) ([]byte, error) {
	aead, err := newGCM(key)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, aead.NonceSize())
	rand.Read(nonce)
	return aead.Seal(nonce, nonce, plaintext, nil), nil
}

// openGCM decrypts what sealGCM made.
func openGCM(key, sealed []byte) ([]byte, error) {
	aead, err := newGCM(key)
	if err != nil {
		return nil, err
	}
	if len(sealed) < aead.NonceSize() {
		return nil, fmt.Errorf("ciphertext too short")
	}
	return aead.Open(nil, sealed[:aead.NonceSize()], sealed[aead.NonceSize():], nil)
}

func newGCM(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}
