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
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/ringkms/kms"
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
	// master key it was made with: this example keeps its key beside the
	// data (as kmsd -dev does), so that it can run again on the same
	// directory. A real deployment keeps its master key apart from the
	// data: kmsd reads it from KMS_MASTER_KEY or a key file of mode 0600.
	masterKey, err := loadMasterKey(*data)
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

	// Every call acts for a principal, which travels in the context. The
	// application that embeds the library holds the master key, and acts
	// as itself: no API key to mint. (A server that takes calls from
	// others authenticates each caller's secret instead: Authenticate.)
	app, err := svc.Application(ctx, "inprocess-example")
	if err != nil {
		return err
	}
	ctx = kms.WithPrincipal(ctx, app)
	fmt.Printf("store in %s, acting as %s in Account %s\n", *data, app.ID, app.AccountID)

	// A key ring, named anew on each run. Its keys are wrapped for its
	// public key (X-Wing, the post-quantum hybrid, by default); the
	// private key is returned this once and the service keeps no copy.
	// Its data keys are split (the default): a call's data key needs the
	// call's share, which only its encrypt and a decrypt hand out.
	ring, err := svc.CreateKeyRing(ctx, kms.CreateKeyRingInput{Name: "documents-" + rand.Text()[:6]})
	if err != nil {
		return err
	}
	fmt.Printf("created key ring %q (%s), first key %s, data keys %s\n", ring.Ring.Name, ring.Ring.ID, ring.Key.ID, ring.Ring.DataKeys)

	// Encrypt: the active key, wrapped, with a unique hash and a signed
	// header. The Asset records what the key protects; the header signs it.
	enc, err := svc.Encrypt(ctx, kms.EncryptInput{RingName: ring.Ring.Name,
		Asset: &kms.AssetInput{Data: map[string]any{"file": "report.pdf", "owner": "finance"}}})
	if err != nil {
		return err
	}
	fmt.Printf("encrypt: key %s (%s), Asset %s, hash %s...\n", enc.Key.ID, enc.Key.KeyData.Encrypted.Key.Encoding, enc.Asset.ID, enc.Hash[:16])

	// Unwrap the key (docs/FORMAT.md section 2; kms.UnwrapKey does every
	// scheme), make the call's data key of it and the call's share
	// (section 2.1, kms.DataKey) and encrypt the document with that. Only
	// the hash and the header need to be kept with the ciphertext.
	// (Package envelope does all of this, in chunks, for data of any size:
	// examples/envelope.)
	document := []byte("Q3 revenue: up 12%")
	key, err := dataKey([]byte(ring.PrivateKey), enc.RingID, enc.Key, enc.KeyShare)
	if err != nil {
		return err
	}
	sealed, err := sealGCM(key, document)
	clear(key)
	if err != nil {
		return err
	}
	fmt.Printf("encrypted %d bytes with AES-256-GCM into %d bytes\n", len(document), len(sealed))

	// Later: decrypt gives the same key and share back from the hash and
	// header, and says whether the Asset is still what the header signed.
	dec, err := svc.Decrypt(ctx, kms.DecryptInput{Hash: enc.Hash, Header: enc.Header})
	if err != nil {
		return err
	}
	fmt.Printf("decrypt: key %s of ring %q; asset valid: %v (%s)\n", dec.Key.ID, dec.RingName, dec.Asset.Valid, dec.Asset.Message)
	key, err = dataKey([]byte(ring.PrivateKey), dec.RingID, dec.Key, dec.KeyShare)
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

// dataKey returns the data key of an encrypt call, or of the decrypt of
// its hash and header: the ring's key that k wraps, unwrapped with the
// ring's private key, and the call's share.
func dataKey(privateKey []byte, ringID string, k *kms.Key, share string) ([]byte, error) {
	ringKey, err := kms.UnwrapKey(privateKey, ringID, k)
	if err != nil {
		return nil, err
	}
	defer clear(ringKey)
	return kms.DataKey(ringKey, share)
}

// loadMasterKey returns the master key kept in dir/master.key, making it
// on first use (as kmsd -dev does). For an example only: whoever can read
// dir can then read every secret in the store.
func loadMasterKey(dir string) (kms.MasterKey, error) {
	text, err := keptSecret(dir, "master.key", func() string { return kms.GenerateMasterKey().Base64() })
	if err != nil {
		return kms.MasterKey{}, err
	}
	return kms.ParseMasterKey(text)
}

// keptSecret returns the text of dir/name, or, when there is no such file
// yet, the text of gen, which it first writes there (mode 0600).
func keptSecret(dir, name string, gen func() string) (string, error) {
	path := filepath.Join(dir, name)
	b, err := os.ReadFile(path)
	if err == nil {
		return strings.TrimSpace(string(b)), nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	text := gen()
	return text, os.WriteFile(path, []byte(text+"\n"), 0o600)
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
