package awskms

import (
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"slices"
	"strings"

	"github.com/ringkms/kms"
)

// maxMessage is the most a message to sign or MAC may have, as in AWS
// KMS.
const maxMessage = 4096

// signing are AWS's signing algorithms: the held keys' options for each,
// and the key specs that take it.
var signing = map[string]struct {
	opts  kms.HeldSignOptions
	specs []string
}{
	"ECDSA_SHA_256":             {kms.HeldSignOptions{Hash: "sha2-256"}, []string{"ECC_NIST_P256"}},
	"ECDSA_SHA_384":             {kms.HeldSignOptions{Hash: "sha2-384"}, []string{"ECC_NIST_P384"}},
	"RSASSA_PSS_SHA_256":        {kms.HeldSignOptions{Hash: "sha2-256", Algorithm: "pss", SaltLength: "hash"}, rsaSpecs},
	"RSASSA_PSS_SHA_384":        {kms.HeldSignOptions{Hash: "sha2-384", Algorithm: "pss", SaltLength: "hash"}, rsaSpecs},
	"RSASSA_PSS_SHA_512":        {kms.HeldSignOptions{Hash: "sha2-512", Algorithm: "pss", SaltLength: "hash"}, rsaSpecs},
	"RSASSA_PKCS1_V1_5_SHA_256": {kms.HeldSignOptions{Hash: "sha2-256", Algorithm: "pkcs1v15"}, rsaSpecs},
	"RSASSA_PKCS1_V1_5_SHA_384": {kms.HeldSignOptions{Hash: "sha2-384", Algorithm: "pkcs1v15"}, rsaSpecs},
	"RSASSA_PKCS1_V1_5_SHA_512": {kms.HeldSignOptions{Hash: "sha2-512", Algorithm: "pkcs1v15"}, rsaSpecs},
	"ML_DSA_SHAKE_256":          {kms.HeldSignOptions{}, []string{"ML_DSA_65"}},
}

var rsaSpecs = []string{"RSA_2048", "RSA_3072", "RSA_4096"}

// digestSizes are the sizes of the digests of the algorithms' hashes.
var digestSizes = map[string]int{"sha2-256": 32, "sha2-384": 48, "sha2-512": 64}

// signingAlgorithms are the signing algorithms of a key spec, in name
// order.
func signingAlgorithms(spec string) []string {
	var out []string
	for name, s := range signing {
		if slices.Contains(s.specs, spec) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// macs are AWS's MAC algorithms, by the hash the held keys name.
var macs = map[string]string{"HMAC_SHA_224": "sha2-224", "HMAC_SHA_256": "sha2-256", "HMAC_SHA_384": "sha2-384", "HMAC_SHA_512": "sha2-512"}

// macAlgorithm is the MAC algorithm of an hmac key: its size's.
func macAlgorithm(k *kms.HeldKey) string { return fmt.Sprintf("HMAC_SHA_%d", k.KeySize*8) }

// msgRequest is what Sign, Verify, GenerateMac and VerifyMac take.
type msgRequest struct {
	KeyId            string
	Message          []byte
	MessageType      string
	SigningAlgorithm string
	Signature        []byte
	MacAlgorithm     string
	Mac              []byte
}

// message is a Sign, Verify, GenerateMac or VerifyMac request as read:
// the key it names, the held keys' options, the algorithm's name, the
// message, and the signature (or MAC) given, for a check.
type message struct {
	name  string
	opts  kms.HeldSignOptions
	alg   string
	input []byte
	sig   []byte
}

// readMessage decodes the call's request, for a MAC or a signature.
func readMessage(c *call, mac bool) (*message, error) {
	var in msgRequest
	name, err := c.named(&in, &in.KeyId)
	if err != nil {
		return nil, err
	}
	if n := len(in.Message); n == 0 || n > maxMessage {
		return nil, fail("ValidationException", fmt.Sprintf("Message must have 1 to %d bytes, not %d", maxMessage, n))
	}
	m := &message{name: name, input: in.Message}
	if mac {
		h, ok := macs[in.MacAlgorithm]
		if !ok {
			return nil, fail("ValidationException", fmt.Sprintf("MacAlgorithm %q: use HMAC_SHA_224, HMAC_SHA_256, HMAC_SHA_384 or HMAC_SHA_512", in.MacAlgorithm))
		}
		// AWS computes MACs with HMAC keys only.
		m.opts, m.alg, m.sig = kms.HeldSignOptions{Hash: h, KeyTypes: []string{"hmac"}}, in.MacAlgorithm, in.Mac
		return m, nil
	}
	a, ok := signing[in.SigningAlgorithm]
	if !ok {
		names := make([]string, 0, len(signing))
		for n := range signing {
			names = append(names, n)
		}
		slices.Sort(names)
		return nil, fail("ValidationException", fmt.Sprintf("SigningAlgorithm %q: use one of %s", in.SigningAlgorithm, strings.Join(names, ", ")))
	}
	m.opts, m.alg, m.sig = a.opts, in.SigningAlgorithm, in.Signature
	// An algorithm goes with the key specs that take it.
	for _, spec := range a.specs {
		if t := keySpecs[spec].Type; !slices.Contains(m.opts.KeyTypes, t) {
			m.opts.KeyTypes = append(m.opts.KeyTypes, t)
		}
	}
	switch in.MessageType {
	case "", "RAW":
	case "DIGEST":
		if in.SigningAlgorithm == "ML_DSA_SHAKE_256" {
			return nil, fail("ValidationException", "MessageType DIGEST (an external mu) is not served for ML_DSA_SHAKE_256: send the message, RAW")
		}
		if n := digestSizes[m.opts.Hash]; len(in.Message) != n {
			return nil, fail("ValidationException", fmt.Sprintf("a DIGEST for %s has %d bytes, not %d", in.SigningAlgorithm, n, len(in.Message)))
		}
		m.opts.Prehashed = true
	default:
		return nil, fail("ValidationException", fmt.Sprintf("MessageType %q: use RAW or DIGEST", in.MessageType))
	}
	return m, nil
}

// produce is Sign, or with mac GenerateMac.
func produce(mac bool) operation {
	return func(a *api, c *call) (any, error) {
		m, err := readMessage(c, mac)
		if err != nil {
			return nil, err
		}
		call, out, algName := a.svc.SignWithHeldKey, "Signature", "SigningAlgorithm"
		if mac {
			call, out, algName = a.svc.HMACWithHeldKey, "Mac", "MacAlgorithm"
		}
		res, err := call(c.r.Context(), kms.HeldSignInput{Name: m.name, Options: m.opts, Inputs: [][]byte{m.input}})
		if err == nil {
			err = res[0].Err
		}
		if err != nil {
			return nil, err
		}
		return map[string]any{"KeyId": arn(c.region, res[0].Key), out: res[0].Signature, algName: m.alg}, nil
	}
}

// check is Verify, or with mac VerifyMac: a signature (MAC) that does
// not hold, or does not read, is AWS's KMSInvalidSignatureException
// (KMSInvalidMacException).
func check(mac bool) operation {
	return func(a *api, c *call) (any, error) {
		m, err := readMessage(c, mac)
		if err != nil {
			return nil, err
		}
		call, valid, algName, invalid := a.svc.VerifyWithHeldKey, "SignatureValid", "SigningAlgorithm", fail("KMSInvalidSignatureException", "the signature does not verify")
		if mac {
			call, valid, algName, invalid = a.svc.VerifyHMACWithHeldKey, "MacValid", "MacAlgorithm", fail("KMSInvalidMacException", "the MAC does not verify")
		}
		res, err := call(c.r.Context(), kms.HeldVerifyInput{Name: m.name, Options: m.opts, Items: []kms.HeldCheck{{Signature: m.sig, Input: m.input}}})
		if err != nil { // the key, its type, the caller's flag
			return nil, err
		}
		switch err := res[0].Err; {
		case err != nil && kms.ErrorKind(err) == kms.KindInvalid && len(m.sig) > 0:
			return nil, invalid // a signature that does not read
		case err != nil:
			return nil, err
		case !res[0].Valid:
			return nil, invalid
		}
		return map[string]any{"KeyId": arn(c.region, res[0].Key), valid: true, algName: m.alg}, nil
	}
}

// oidMLDSA are the OIDs of ML-DSA's parameter sets (FIPS 204, NIST's
// arc 2.16.840.1.101.3.4.3).
var oidMLDSA = map[string]asn1.ObjectIdentifier{
	"44": {2, 16, 840, 1, 101, 3, 4, 3, 17},
	"65": {2, 16, 840, 1, 101, 3, 4, 3, 18},
	"87": {2, 16, 840, 1, 101, 3, 4, 3, 19},
}

// publicKeyDER is a version's public key as a DER SubjectPublicKeyInfo:
// the PEM's block for ecdsa and rsa, and for ml-dsa its raw key with the
// parameter set's OID.
func publicKeyDER(k *kms.HeldKey, text string) ([]byte, error) {
	if k.Type == "ml-dsa" {
		raw, err := base64.StdEncoding.DecodeString(text)
		if err != nil {
			return nil, err
		}
		return asn1.Marshal(struct {
			Algorithm pkix.AlgorithmIdentifier
			PublicKey asn1.BitString
		}{pkix.AlgorithmIdentifier{Algorithm: oidMLDSA[k.ParameterSet]}, asn1.BitString{Bytes: raw, BitLength: 8 * len(raw)}})
	}
	block, _ := pem.Decode([]byte(text))
	if block == nil {
		return nil, fmt.Errorf("public key of type %s is not PEM", k.Type)
	}
	return block.Bytes, nil
}

func getPublicKey(a *api, c *call) (any, error) {
	_, k, err := a.held(c)
	if err != nil {
		return nil, err
	}
	spec, usage := specOf(k)
	if err := usable(k); err != nil {
		return nil, err
	}
	text, ok := k.PublicKeys[k.LatestVersion]
	if !ok || usage != "SIGN_VERIFY" {
		return nil, fail("UnsupportedOperationException", fmt.Sprintf("key %s is a %s key, which has no public key", k.Name, spec))
	}
	der, err := publicKeyDER(k, text)
	if err != nil {
		return nil, err
	}
	return map[string]any{"KeyId": arn(c.region, k.Name), "PublicKey": der, "KeySpec": spec, "CustomerMasterKeySpec": spec,
		"KeyUsage": usage, "SigningAlgorithms": signingAlgorithms(spec)}, nil
}
