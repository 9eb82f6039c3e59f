package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http/httptest"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/client"
	"github.com/ringkms/kms/httpapi"
	"github.com/ringkms/kms/store/badgerstore"
)

func Example() {
	ctx := context.Background()

	// The server side, as kmsd runs it: a Service on a store, served by
	// httpapi. Here in memory, on a test server.
	st, err := badgerstore.OpenInMemory()
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	svc, err := kms.New(st, kms.Options{MasterKey: kms.GenerateMasterKey()})
	if err != nil {
		log.Fatal(err)
	}
	defer svc.Close()
	boot, err := svc.Bootstrap(ctx, "") // the root API key
	if err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.New(svc, httpapi.Options{}))
	defer srv.Close()

	// The client side.
	c, err := client.New(srv.URL, client.WithAPIKey(boot.Secret))
	if err != nil {
		log.Fatal(err)
	}
	ring, err := c.CreateKeyRing(ctx, kms.CreateKeyRingInput{Name: "payments"})
	if err != nil {
		log.Fatal(err)
	}
	// ring.PrivateKey unwraps the keys of the ring: keep it safe.
	enc, err := c.Encrypt(ctx, kms.EncryptInput{RingName: "payments"})
	if err != nil {
		log.Fatal(err)
	}
	dec, err := c.Decrypt(ctx, kms.DecryptInput{Hash: enc.Hash, Header: enc.Header})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("ring:", ring.Ring.Name, "wrapped with", enc.Key.KeyData.Encrypted.Key.Encoding)
	fmt.Println("decrypt gives the key of encrypt:", dec.Key.ID == enc.Key.ID)

	_, err = c.GetKeyRing(ctx, kms.RingRef{Name: "receipts"})
	fmt.Println("not found:", errors.Is(err, kms.ErrNotFound))
	fmt.Println(err)
	// Output:
	// ring: payments wrapped with hpke-xwing
	// decrypt gives the key of encrypt: true
	// not found: true
	// kms: key ring "receipts" not found
}

// FromEnv configures a client as kmsctl is: KMS_ADDR, KMS_API_KEY (or
// KMS_API_KEY_FILE) and, for a private CA, KMS_CACERT.
func ExampleFromEnv() {
	c, err := client.FromEnv(client.WithUserAgent("billing/1.0"))
	if err != nil {
		log.Fatal(err) // a variable that is set but unusable, named
	}
	if err := c.Healthz(context.Background()); err != nil {
		log.Fatal(err) // an untrusted certificate says so: set KMS_CACERT
	}
}
