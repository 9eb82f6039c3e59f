// Package kms is ringkms: a key-management service as an embeddable Go
// library. A Service keeps key rings of AES-256 keys, hands their keys out
// wrapped for each ring's public key, binds every hand-out to a unique hash
// and a signed header, checks credentials and permission flags, and keeps a
// hash-chained audit trail of every operation, over a pluggable Store.
//
// # Using it
//
// Open a store (store/badgerstore), build a Service with a master key, and
// call its methods with the caller's Principal in the context:
//
//	mk, _ := kms.ParseMasterKey(os.Getenv("KMS_MASTER_KEY")) // in a test: kms.GenerateMasterKey()
//	st, _ := badgerstore.OpenDir(dir)
//	svc, _ := kms.New(st, kms.Options{MasterKey: mk})
//	p, _ := svc.Authenticate(ctx, apiKeySecret)
//	res, _ := svc.Encrypt(kms.WithPrincipal(ctx, p), kms.EncryptInput{RingName: "payments"})
//	ringKey, _ := kms.UnwrapKey(ringPrivateKey, res.RingID, res.Key) // the ring's 32 key bytes
//	key, _ := kms.DataKey(ringKey, res.KeyShare)                      // the call's data key
//
// The master key (Options.MasterKey, required) is the root of trust: 32
// random bytes from which every key of the service is derived. A store
// opens only under the key it was made with, so a new key each run is for
// tests (GenerateMasterKey, with badgerstore.OpenInMemory). In production
// the operator makes it once (head -c 32 /dev/urandom | base64), keeps it
// apart from the data, and the program reads it with ParseMasterKey, as
// cmd/kmsd does: from KMS_MASTER_KEY, or from a key file of mode 0600
// holding that base64 (-master-key-file). Options.MasterKey is a RootKey:
// the 32 bytes are one kind, a key that never leaves a PKCS#11 token
// (kmsd -master-key-pkcs11) another, and an application may bring its own
// (a cloud KMS's), which seals and opens the store's root secret.
// docs/OPERATIONS.md, "The master key", tells how to keep and rotate it:
// Rekey, or Service.Rekey with Options.NextMasterKey while it serves.
//
// An application that embeds the library and calls it for itself holds
// the master key already: it acts as itself with Service.Application, with
// no API key to mint, and its calls are recorded under its name:
//
//	p, _ := svc.Application(ctx, "billing")
//
// Package envelope encrypts data with these keys in one call (Seal and
// Open, or streams). Package httpapi serves the same methods over HTTP;
// package client calls them there, with the same signatures; cmd/kmsd is
// the server and cmd/kmsctl its command line.
//
// # Keys
//
// Rings of the /ks group are zero-knowledge: each key is generated, wrapped
// with HPKE (X-Wing by default, X25519 or a caller's RSA key by choice) for
// the ring's public key, and stored only wrapped. The ring's private key is
// returned once at creation and never stored. A /ks ring has split data
// keys (DataKeysSplit, the default: CreateKeyRingInput.DataKeys empty): a
// call's data key is derived from the ring's key and a share of that
// call's that the service derives and hands out only to the call's
// encrypt and to an authorised decrypt (DataKey, split.go), so every read
// of data that another call sealed is a recorded decrypt. Only a ring
// made with DataKeys "ring" (DataKeysRing) hands out its key as every
// call's data key, which lets whoever may encrypt and holds its private
// key read every call's data with no decrypt. Rings of the /asym group keep their private key sealed under
// the master key and return keys in the clear. docs/FORMAT.md describes
// keyData, split data keys, hashes and headers bit for bit.
//
// # Writes and the audit trail
//
// Every write, and every activity record, goes through one journal that
// commits them in batches: the operations' writes to the Store (with
// their records kept beside them until the trail has them), the records
// to the Store's Trail, an append-only log, durably, then the records'
// index entries; each batch's headers share one Ed25519 signature. No
// call is answered before its record is durable. Records are hash-chained
// (VerifyActivityChain), and a start after a crash completes what a batch
// left undone.
//
// # Errors
//
// Every error is an *Error of a Kind; branch with errors.Is against the
// sentinels (ErrNotFound, ErrPermissionDenied...) or with ErrorKind.
package kms
