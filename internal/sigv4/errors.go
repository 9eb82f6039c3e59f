package sigv4

import "fmt"

// Kind says why a request's signature was refused. Its value is the name
// of the exception AWS answers with in that case (in the JSON protocols'
// "__type"), so that a protocol can answer it as it is; AWS answers each
// with HTTP status 400. The set only ever grows.
type Kind string

const (
	// KindMissing: the request has no Authorization header (or an empty
	// one): it is not signed at all.
	KindMissing Kind = "MissingAuthenticationTokenException"
	// KindIncomplete: the Authorization header is malformed or lacks a
	// part (its algorithm, Credential, SignedHeaders, Signature, a well
	// formed credential scope), X-Amz-Date is missing or malformed, or
	// the signature does not cover host and x-amz-date.
	KindIncomplete Kind = "IncompleteSignatureException"
	// KindInvalid: a well-formed signature that does not hold: scoped to
	// another service or to another day than the request's date, made
	// more than MaxSkew away from the server's clock, or not the
	// signature of this request under the secret.
	KindInvalid Kind = "InvalidSignatureException"
)

// Error is a refusal. Message is AWS's wording of it, safe to answer to
// the client: it never holds a secret, a signature or the Authorization
// header's value.
type Error struct {
	Kind    Kind
	Message string
}

func (e *Error) Error() string { return "sigv4: " + e.Message }

func refuse(k Kind, format string, args ...any) *Error {
	return &Error{Kind: k, Message: fmt.Sprintf(format, args...)}
}

// MismatchMessage is AWS's message when the signature is not the one the
// secret makes for the request.
const MismatchMessage = "The request signature we calculated does not match the signature you provided. " +
	"Check your AWS Secret Access Key and signing method. Consult the service documentation for details."
