package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mathrand "math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/awskms"
	"github.com/ringkms/kms/internal/sigv4"
)

// The aws modes are AWS's SDKs (SOPS's --kms, the AWS CLI) calling
// kmsd's AWS KMS JSON protocol (kmsd -aws-kms, package awskms): POST /
// with X-Amz-Target: TrentService.Encrypt or .Decrypt, each call signed
// anew with Signature Version 4 (internal/sigv4) as the SDKs sign it,
// the API key's ID as the access key ID and its secret as the secret
// access key. aws-encrypt encrypts a random 32-byte plaintext a call
// under an encryption context of one pair, as SOPS encrypts a file's
// data key; aws-decrypt decrypts plaintexts encrypted first, naming the
// key and the context as SOPS does, and checks that each decrypts to
// the plaintext encrypted. The key is one that CreateKey makes at the
// start (SYMMETRIC_DEFAULT), or the key that -ring names on a running
// kmsd.

// awsMode reports whether mode calls AWS KMS's protocol.
func awsMode(mode string) bool { return mode == "aws-encrypt" || mode == "aws-decrypt" }

// awsRegion is the region the calls are signed for; kmsd serves any.
const awsRegion = "us-east-1"

// awsContext is the EncryptionContext of every call: one pair, as SOPS
// sends one it was given.
var awsContext = map[string]string{"purpose": "kmsbench"}

// validateAWS checks the flags of the aws modes: against a running kmsd,
// the ID of the API key that signs (-aws-access-key-id), whose secret is
// -key's; with -start, neither that nor -ring (kmsbench signs with the
// API key of the kmsd it starts, and makes the key with CreateKey); none
// of the flags of /ks's and transit's calls.
func (o *options) validateAWS(set map[string]bool) error {
	switch {
	case o.start && set["aws-access-key-id"]:
		return errors.New("-aws-access-key-id goes with a running kmsd (-url): with -start, kmsbench signs with the API key of the kmsd it starts")
	case o.start && set["ring"]:
		return fmt.Errorf("-ring goes with a running kmsd in -mode %s, naming a key it holds: with -start, kmsbench makes the key with CreateKey", o.mode)
	case !o.start && o.awsKeyID == "":
		return fmt.Errorf("-mode %s needs -aws-access-key-id ID, the ID of the API key whose secret is -key (or KMS_API_KEY): Signature Version 4 names the key by its ID and sends no secret", o.mode)
	case kms.LooksLikeSecret(o.awsKeyID):
		// Not quoted: it may be the secret itself.
		return errors.New("-aws-access-key-id is shaped like a secret: give the API key's ID (kmsd names it apikey_id), and its secret in KMS_API_KEY")
	case strings.ContainsAny(o.awsKeyID, ", \t/"):
		return fmt.Errorf("-aws-access-key-id %q: an API key's ID has no commas, spaces nor slashes", o.awsKeyID)
	case o.baseline || o.asset || o.batch > 1:
		return fmt.Errorf("-baseline, -asset and -batch go with the /ks and transit modes: -mode %s sends AWS KMS's Encrypt or Decrypt, one plaintext a call", o.mode)
	}
	if set["ring"] {
		o.awsKey = o.ring
	}
	return nil
}

// awsCalls are the calls of the aws modes to the nodes of a target.
type awsCalls struct {
	client *http.Client
	urls   []string // the target's nodes
	secret string   // the API key's secret, which signs
	// nodes are what node i signs with and encrypts with: nodes[i %
	// len(nodes)], one for all unless the nodes are apart.
	nodes []awsNode
	// sealed are the plaintexts to decrypt, in aws-decrypt; none in
	// aws-encrypt.
	sealed sealedPools
}

// awsNode is what the calls to one node (or to all of a target's
// nodes) sign with and encrypt with.
type awsNode struct {
	accessKeyID string // the API key's ID
	key         string // the KeyId: the key's ARN
}

// awsError is an error answer of AWS's protocol: its status and
// exception (__type).
type awsError struct {
	status       int
	typ, message string
}

func (e *awsError) Error() string {
	return fmt.Sprintf("%d %s: %s", e.status, e.typ, e.message)
}

// failure is the name the calls answered so fail under: the exception,
// or the status when the answer names none.
func (e *awsError) failure() string {
	if e.typ == "" {
		return strconv.Itoa(e.status)
	}
	return e.typ
}

// call encrypts a new plaintext on node (aws-encrypt), or decrypts one of
// the node's sealed plaintexts and checks it (aws-decrypt). An error
// answer fails under its exception; no answer, under "transport".
func (a *awsCalls) call(ctx context.Context, node int, rng *mathrand.Rand) outcome {
	return sealOrOpen(ctx, a, a.sealed, node, rng, func(err error) outcome {
		var ae *awsError
		if errors.As(err, &ae) {
			return outcome{answered: true, failure: ae.failure()}
		}
		return outcome{failure: "transport"}
	})
}

// seal encrypts a new random 32-byte plaintext with node's key under
// awsContext, and returns it with its ciphertext, and the call's
// latency.
func (a *awsCalls) seal(ctx context.Context, node int) (sealedKey, time.Duration, error) {
	key := a.nodes[node%len(a.nodes)].key
	plain := make([]byte, dataKeySize)
	rand.Read(plain)
	var out struct{ CiphertextBlob []byte }
	latency, err := a.do(ctx, node, "Encrypt", map[string]any{"KeyId": key, "Plaintext": plain, "EncryptionContext": awsContext}, &out)
	switch {
	case err != nil:
		return sealedKey{}, latency, err
	case len(out.CiphertextBlob) == 0:
		return sealedKey{}, latency, errNoBlob
	}
	return sealedKey{plaintext: plain, ciphertext: out.CiphertextBlob, keyID: key}, latency, nil
}

// errNoBlob is an Encrypt answered without a ciphertext.
const errNoBlob answerError = "no CiphertextBlob"

// open decrypts s on node, naming its key and awsContext, and checks
// that it decrypts to s's plaintext. It returns the call's latency.
func (a *awsCalls) open(ctx context.Context, node int, s sealedKey) (time.Duration, error) {
	var out struct{ Plaintext []byte }
	latency, err := a.do(ctx, node, "Decrypt", map[string]any{"KeyId": s.keyID, "CiphertextBlob": s.ciphertext, "EncryptionContext": awsContext}, &out)
	return latency, s.opened(out.Plaintext, err)
}

// do calls the operation op on node with in, signed as AWS's SDKs sign
// (anew, as of now), and decodes a 200 answer into out. Its latency
// runs from the signing to the answer read. An error answer is an
// *awsError; an answer that does not decode, an answerError.
func (a *awsCalls) do(ctx context.Context, node int, op string, in, out any) (time.Duration, error) {
	body, err := json.Marshal(in)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.urls[node]+"/", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", awskms.ContentType)
	req.Header.Set("X-Amz-Target", awskms.TargetPrefix+op)
	t0 := time.Now()
	if err := sigv4.Sign(req, body, a.nodes[node%len(a.nodes)].accessKeyID, a.secret, awsRegion, "kms", t0); err != nil {
		return 0, err
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return 0, err
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	resp.Body.Close()
	latency := time.Since(t0)
	if err != nil {
		return latency, err
	}
	if resp.StatusCode != http.StatusOK {
		e := &awsError{status: resp.StatusCode}
		var shape struct {
			Type    string `json:"__type"`
			Message string `json:"message"`
		}
		if json.Unmarshal(raw, &shape) == nil {
			e.typ, e.message = shape.Type, shape.Message
		}
		return latency, e
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return latency, answerError(op + " answer that does not decode")
	}
	return latency, nil
}

// keyMetadata is the part of AWS's KeyMetadata that kmsbench reads.
type keyMetadata struct {
	KeyMetadata struct{ KeyId, Arn, KeyUsage string }
}

// useKey makes the key the calls on node encrypt with (CreateKey, a
// SYMMETRIC_DEFAULT key), or with name checks that the key it names
// exists and encrypts (DescribeKey). It returns the key's metadata.
func (a *awsCalls) useKey(ctx context.Context, node int, name string) (*keyMetadata, error) {
	var m keyMetadata
	op, in := "CreateKey", map[string]any{"KeySpec": "SYMMETRIC_DEFAULT", "Description": "kmsbench"}
	if name != "" {
		op, in = "DescribeKey", map[string]any{"KeyId": name}
	}
	if _, err := a.do(ctx, node, op, in, &m); err != nil {
		var ae *awsError
		if errors.As(err, &ae) && ae.typ == "" {
			// An answer without AWS's exception: kmsd's own API.
			return nil, fmt.Errorf("%s: %w (is kmsd serving AWS KMS's protocol, -aws-kms?)", op, err)
		}
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if u := m.KeyMetadata.KeyUsage; u != "ENCRYPT_DECRYPT" || m.KeyMetadata.Arn == "" {
		return nil, fmt.Errorf("%s: the key %s is for %s, not ENCRYPT_DECRYPT: name a key that encrypts with -ring", op, m.KeyMetadata.KeyId, u)
	}
	return &m, nil
}

// apiKeyID asks the kmsd at base for the ID of the API key key (POST
// /auth/validate, with key itself): what kmsbench signs with on a kmsd
// it started, whose bootstrap key it knows by its secret alone.
func apiKeyID(ctx context.Context, c *http.Client, base, key string) (string, error) {
	body, _ := json.Marshal(map[string]string{"key": key})
	var out struct {
		Valid bool   `json:"valid"`
		KeyID string `json:"keyid"`
	}
	if _, err := call(ctx, c, base, key, http.MethodPost, "/auth/validate", body, &out); err != nil {
		return "", err
	}
	if !out.Valid || out.KeyID == "" {
		return "", errors.New("POST /auth/validate does not name the API key's ID")
	}
	return out.KeyID, nil
}

// prepareAWS is prepare for the aws modes: on t's first node, or on each
// when they are apart, it finds the ID of the API key (on a kmsd that
// kmsbench started) and makes or checks the key; for aws-decrypt it
// then encrypts the pool of plaintexts to decrypt.
func (b *bench) prepareAWS(ctx context.Context, t target) (caller, error) {
	o := b.o
	a := &awsCalls{client: b.client, urls: t.urls, secret: t.key}
	for i, u := range firstOrEach(t) {
		n := awsNode{accessKeyID: o.awsKeyID}
		if n.accessKeyID == "" {
			id, err := apiKeyID(ctx, b.client, u, t.key)
			if err != nil {
				return nil, b.cause(ctx, fmt.Errorf("%s: the ID of the API key: %w", t.name, err))
			}
			n.accessKeyID = id
		}
		a.nodes = append(a.nodes, n)
		m, err := a.useKey(ctx, i, o.awsKey)
		if err != nil {
			return nil, b.cause(ctx, fmt.Errorf("%s: %w", t.name, err))
		}
		a.nodes[i].key = m.KeyMetadata.Arn
		if o.awsKey == "" {
			b.notef("%s: created key %s on %s, signing as access key %s", t.name, m.KeyMetadata.KeyId, u, n.accessKeyID)
		}
	}
	if o.mode == "aws-decrypt" {
		var err error
		if a.sealed, err = b.sealPools(ctx, t, "ciphertexts", a); err != nil {
			return nil, err
		}
	}
	return a, nil
}
