// Package sigv4 verifies and makes AWS Signature Version 4 signatures of
// HTTP requests, in the Authorization header as AWS's SDKs, the AWS CLI
// and the tools built on them (SOPS) send it:
//
//	Authorization: AWS4-HMAC-SHA256 Credential=AKID/20150830/us-east-1/kms/aws4_request,
//	    SignedHeaders=content-type;host;x-amz-date;x-amz-target, Signature=<64 hex digits>
//	X-Amz-Date: 20150830T123600Z
//
// It knows nothing of who holds which key: a server calls Parse, looks up
// the secret of the access key ID Parse answers, reads the body under its
// cap and calls Verify with both. Sign is the client's half, for load
// tools and tests.
//
// # What is checked
//
// Parse refuses, before any secret is looked up, a request without an
// Authorization header (KindMissing); one whose header is malformed, lacks
// Credential, SignedHeaders or Signature, names another algorithm, has a
// malformed credential scope, lacks X-Amz-Date or does not sign host and
// x-amz-date (KindIncomplete); and one whose scope names another service
// or another day than X-Amz-Date's, or whose X-Amz-Date is more than
// MaxSkew (5 minutes) away from the server's clock, either way
// (KindInvalid), as it does a query string that does not decode. Verify
// refuses a signature that is not the one the secret makes for the
// request and its body, and an X-Amz-Content-Sha256 header that is not
// the body's hash (KindInvalid). The kinds are the names of
// the exceptions AWS answers with, and the messages its wording.
//
// The region is any the client chose: it is part of the scope the key is
// derived for, and Request answers it.
//
// # The canonical request
//
// As AWS's specification makes it for services other than S3:
//
//   - the method;
//   - the path as it came on the wire (escaped), normalized (empty and "."
//     segments dropped, ".." removing the segment before it, a trailing
//     slash kept) and each segment URI-encoded once more, so that a byte
//     escaped on the wire is encoded twice ("/a%20b" is signed as
//     "/a%2520b"); POST / is "/";
//   - the query: each name and value decoded and URI-encoded (RFC 3986's
//     unreserved characters as they are, every other byte as %XX), sorted
//     by name, then value;
//   - the signed headers in the order SignedHeaders gives them, each as its
//     name, ":", and its values (leading and trailing spaces trimmed, runs
//     of spaces made one) joined by commas; then SignedHeaders itself;
//   - the hexadecimal SHA-256 of the body.
//
// Headers the signature does not cover may be added or changed on the way:
// they are not read.
//
// # Secrets
//
// Verify takes the secret as bytes for the one call and keeps no
// reference to it or to the keys derived from it, whose buffers it clears. Signing keys are not cached: their
// derivation is four HMACs, a few microseconds. No error holds a secret, a signature or the
// Authorization header's value.
//
// # Not supported
//
// Signatures in the query string (presigned URLs), the Date header in
// place of X-Amz-Date, unsigned and streamed (chunked) payloads, and
// Signature Version 4A: none is what AWS's SDKs send to a KMS endpoint.
package sigv4
