// Package k8skms serves the Kubernetes KMS v2 plugin API
// (k8s.io/kms/apis/v2: Status, Encrypt, Decrypt, over gRPC) with one held
// key of a *kms.Service, so that a cluster's API server encrypts its
// Secrets at rest under a key that ringkms holds and never hands out.
//
//	srv := k8skms.New(k8skms.Options{Key: "kubernetes"})
//	go srv.Serve(ln) // a Unix socket only the API server's user can open
//	err := srv.Attach(ctx, svc)
//
// The API server makes a data key of its own and asks Encrypt to seal
// it; it keeps the sealed data key beside each value it writes, with the
// key_id that Encrypt answered, and asks Decrypt to open it again when
// it reads a value whose data key it has not cached. It polls Status for
// the key_id of the key's current version: when it changes (the key was
// rotated, by its rotation period or by an operator), it makes a new
// data key for the writes that follow.
//
// # Mapping
//
// A call acts as the service's local caller Principal (kms.LocalCaller):
// whoever can open the socket, which is the plugin API's own model. It
// may read the key, and encrypt and decrypt with it, nothing else.
//
//	Status   kms.Service.HeldKeyReady: healthz "ok" and the key_id of the
//	         version that encrypts now, or the reason it cannot
//	Encrypt  kms.Service.EncryptWithHeldKey with the latest version
//	Decrypt  kms.Service.DecryptWithHeldKey with the version the
//	         ciphertext names, whatever the request's key_id: every
//	         version the key's policy still allows opens
//
// The ciphertext (format.go) is a format byte, the version and the
// AEAD's nonce, ciphertext and tag: 62 bytes for a 32-byte data key, far
// under the API server's limit of 1 KiB. It needs no annotation.
//
// A key_id is "<key>:v<version>:<key ID>": the key's ID tells the
// version of a key made again under the same name (after a deletion)
// from the version it replaced, so that the API server never takes one
// for the other.
//
// Errors answer gRPC codes by the kind of the service's error
// (errors.go); their messages are the service's and never hold a
// plaintext or a data key.
package k8skms
