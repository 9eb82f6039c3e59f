// Package awskms serves AWS KMS's JSON 1.1 protocol over the held keys
// of a *kms.Service, so that AWS's SDKs, the AWS CLI and SOPS's --kms
// work against ringkms with an endpoint URL of its own.
//
//	h := awskms.New(svc, awskms.Options{})
//	mux.Handle("/", h) // POST / with X-Amz-Target: TrentService.<Op>
//
// # Requests
//
// Every call is POST / with X-Amz-Target: TrentService.<Operation>, a
// JSON body (application/x-amz-json-1.1) and AWS's Signature Version 4
// for the service "kms", in any region (internal/sigv4): the access key
// ID is an API key's ID, the secret access key that key's secret, which
// the service keeps sealed to check signatures
// (kms.Service.AuthenticateSigned). The request pipeline is
// internal/httpedge's, as for the service's other HTTP interfaces: its
// rate limits, request log and metrics.
//
// # Keys
//
// An AWS key is a held key (kms.HeldKey). Its KeyId is the held key's
// name: CreateKey names a new key by a new ID, as AWS does; a key made
// by Vault's transit interface is reached by its name. Its ARN is
// arn:aws:kms:<region>:<account>:key/<KeyId>, the region the request's
// signature is scoped to and the account accountID; a KeyId parameter
// takes a KeyId or a key ARN.
//
// # Ciphertexts
//
// A ciphertext blob (blob.go) names its key and version, so that Decrypt
// needs no KeyId, and binds the request's EncryptionContext (its pairs,
// sorted, framed by length) as the AEAD's associated data: a Decrypt with
// another context fails as an altered blob does, InvalidCiphertextException.
//
// # Errors
//
// Errors are AWS's: {"__type": "<Exception>", "message": "..."}, status
// 400 but for internal errors (500) and an unavailable store (503), the
// exception chosen by the kind of the service's error (errors.go).
// Operations not served answer UnsupportedOperationException naming
// those that are.
package awskms
