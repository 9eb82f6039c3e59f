// Command envelope encrypts a file with ringkms the one-line way: package
// envelope seals it under a ring's key, in chunks, with the hash and header
// of the encrypt call inside, and opens it again through the service, which
// checks the header and keeps the audit record of both.
//
// It runs the library in process on the embedded Badger store and acts as
// the application itself (kms.Service.Application): it holds the master
// key, so it needs no API key.
//
//	go run ./examples/envelope                    # a temporary data directory
//	go run ./examples/envelope -data DIR          # DIR, kept: run it again on it
//	go run ./examples/envelope -in FILE -data DIR # seal FILE instead of a sample
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/envelope"
	"github.com/ringkms/kms/store/badgerstore"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "envelope:", err)
		os.Exit(1)
	}
}

const ringName = "files"

func run() error {
	data := flag.String("data", "", "data directory of the Badger store (default: a new temporary directory, removed at the end)")
	in := flag.String("in", "", "file to seal (default: 3 MiB of sample data)")
	flag.Parse()
	if *data == "" {
		dir, err := os.MkdirTemp("", "ringkms-envelope-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		*data = dir
	}
	ctx := context.Background()

	// The Service, in process, acting as the application: no API key.
	// The master key is kept beside the data so that a later run opens
	// the same store; a real deployment keeps it apart from the data.
	mk, err := loadMasterKey(*data)
	if err != nil {
		return err
	}
	st, err := badgerstore.OpenDir(filepath.Join(*data, "store"))
	if err != nil {
		return err
	}
	defer st.Close()
	svc, err := kms.New(st, kms.Options{MasterKey: mk})
	if err != nil {
		return err
	}
	defer svc.Close()
	app, err := svc.Application(ctx, "envelope-example")
	if err != nil {
		return err
	}
	ctx = kms.WithPrincipal(ctx, app)

	// The ring, and its private key, which the service does not keep:
	// this example keeps it beside the data (a real one keeps it apart).
	privateKey, err := ringKey(ctx, svc, filepath.Join(*data, ringName+".key"))
	if err != nil {
		return err
	}
	sealer := envelope.New(svc, privateKey)

	// Seal: a stream, in constant memory whatever its size. The Asset
	// records what the key protects, and the header signs it.
	src, name, err := input(*in)
	if err != nil {
		return err
	}
	defer src.Close()
	sealedPath := filepath.Join(*data, name+".sealed")
	out, err := os.Create(sealedPath)
	if err != nil {
		return err
	}
	ad := []byte(name) // binds the envelope to the file's name
	w, err := sealer.NewWriter(ctx, out, envelope.SealInput{RingName: ringName, AssociatedData: ad,
		Asset: &kms.AssetInput{Data: map[string]any{"file": name}}})
	if err != nil {
		out.Close()
		return err
	}
	plainSum := sha256.New()
	n, err := io.Copy(w, io.TeeReader(src, plainSum))
	if err == nil {
		err = w.Close()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	info, _ := os.Stat(sealedPath)
	fmt.Printf("sealed %d bytes of %s into %s (%d bytes) with key %s, Asset %s\n", n, name, sealedPath, info.Size(), w.Result().Key.ID, w.Result().Asset.ID)

	// Open: the service checks the header and the Asset, and gives the key.
	f, err := os.Open(sealedPath)
	if err != nil {
		return err
	}
	defer f.Close()
	r, err := sealer.NewReader(ctx, f, ad)
	if err != nil {
		return err
	}
	openSum := sha256.New()
	if _, err := io.Copy(openSum, r); err != nil {
		return err
	}
	fmt.Printf("opened: asset valid: %v; identical: %v\n", r.Result().Asset.Valid, bytes.Equal(openSum.Sum(nil), plainSum.Sum(nil)))

	// Any change refuses to open: one bit of the sealed file, or another
	// file name as associated data.
	sealed, err := os.ReadFile(sealedPath)
	if err != nil {
		return err
	}
	sealed[len(sealed)/2] ^= 1
	if _, err := sealer.Open(ctx, sealed, ad); err != nil {
		fmt.Printf("tampered copy refused: %v\n", err)
	} else {
		return errors.New("a tampered copy opened")
	}
	sealed[len(sealed)/2] ^= 1
	if _, err := sealer.Open(ctx, sealed, []byte("other.txt")); err != nil {
		fmt.Printf("other associated data refused: %v\n", err)
	} else {
		return errors.New("the envelope opened with other associated data")
	}
	return nil
}

// ringKey returns the private key of the ring, creating the ring and
// keeping its key in path on first use.
func ringKey(ctx context.Context, svc *kms.Service, path string) (*kms.PrivateKey, error) {
	text, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		ring, err := svc.CreateKeyRing(ctx, kms.CreateKeyRingInput{Name: ringName})
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(path, []byte(ring.PrivateKey+"\n"), 0o600); err != nil {
			return nil, err
		}
		fmt.Printf("created ring %q (%s); its private key is in %s\n", ringName, ring.Key.KeyData.Encrypted.Key.Encoding, path)
		text = []byte(ring.PrivateKey)
	} else if err != nil {
		return nil, err
	} else {
		fmt.Printf("ring %q exists; its private key is in %s\n", ringName, path)
	}
	defer clear(text)
	return kms.ParsePrivateKey(text)
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

// input opens the file to seal, or makes sample data.
func input(path string) (io.ReadCloser, string, error) {
	if path != "" {
		f, err := os.Open(path)
		return f, filepath.Base(path), err
	}
	sample := make([]byte, 3<<20)
	rand.Read(sample)
	return io.NopCloser(bytes.NewReader(sample)), "sample.bin", nil
}
