// Package envelope encrypts data with the keys of ringkms, the right way
// in one call: Seal and Open for byte slices, NewWriter and NewReader for
// streams of any size in constant memory.
//
// # What it does
//
// Sealing asks the service for the active key of a ring (an encrypt
// call, optionally creating or updating an Asset), unwraps it with the
// ring's private key, and encrypts the data under it in chunks of 64 KiB
// with AES-256-GCM, in the STREAM construction: every chunk has its own
// nonce, made from its index and a flag that marks the last one, so that
// chunks cannot be reordered, dropped or cut off undetected. The output
// starts with the hash and the header of the encrypt call, so it carries
// everything needed to open it except the ring's private key. Opening
// hands the hash and header back to the service (a decrypt call): a
// tampered header, a disabled or destroyed key, or an Asset changed since
// sealing refuses to open, and the service keeps the audit record of
// every seal and open. docs/FORMAT.md section "Envelope" specifies the
// bytes.
//
// On a ring whose data keys are split (kms.DataKeysSplit), the data is
// sealed with the call's data key, which the ring's key and the share of
// the encrypt answer make together (kms.DataKey); opening takes the share
// from the decrypt answer. So an envelope of such a ring opens only
// through a decrypt call, which the service authorises and records, and
// never with the ring's private key alone.
//
// # Where keys come from
//
// A Sealer takes its keys from anything with the Encrypt and Decrypt
// methods of *kms.Service (in process) and *client.Client (over HTTP),
// and unwraps them with a *kms.PrivateKey, the ring's private key as the
// service returned it at the ring's creation or as the caller keeps its
// own (PEM X25519 or RSA).
//
//	priv, err := kms.ParsePrivateKey(privateKeyText)
//	s := envelope.New(keys, priv)
//	sealed, err := s.Seal(ctx, envelope.SealInput{RingName: "documents"}, plaintext)
//	...
//	plaintext, err := s.Open(ctx, sealed, nil)
//
// # Associated data
//
// Associated data (a file name, a database row's ID) is authenticated
// with every chunk but not stored: Open and NewReader must be given the
// same bytes, or opening fails. Use it to bind a ciphertext to its
// place, so that it cannot be swapped with another.
//
// # Streams
//
// A Reader returns the plaintext of each chunk once the chunk has been
// authenticated, before it has read the rest of the stream; an error at
// the end (a stream cut off after a chunk, say) comes after data was
// returned. A consumer that must not act on part of the data buffers it
// until Read returns io.EOF, or uses Open.
//
// # Rewrapping
//
// Rewrap moves an envelope to its ring's active key: it opens it with a
// decrypt call and seals its plaintext again with a new encrypt call on
// the same ring, streaming from one to the other, and keeps the Asset the
// old header signs. Once every envelope under a key is rewrapped, the key
// can be disabled and destroyed (docs/OPERATIONS.md, "When a key leaks").
//
//	res, err := s.Rewrap(ctx, newFile, oldFile, envelope.RewrapInput{AssociatedData: ad})
//	// res.Encrypt.Key.ID is the ring's active key, res.Encrypt.Hash the new hash.
package envelope
