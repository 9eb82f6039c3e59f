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
	"ML_DSA_SHAKE_256":          {kms.HeldSignOptions{}, []string{"ML_DSA_44", "ML_DSA_65", "ML_DSA_87"}},
}

var rsaSpecs = []string{"RSA_2048", "RSA_3072", "RSA_4096"}

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

// signRequest is what Sign and Verify share.
type signRequest struct {
	KeyId            string
	Message          []byte
	MessageType      string
	SigningAlgorithm string
	Signature        []byte
}

// options are the held keys' options for the request's algorithm and
// message type.
func (in *signRequest) options() (kms.HeldSignOptions, error) {
	alg, ok := signing[in.SigningAlgorithm]
	if !ok {
		names := make([]string, 0, len(signing))
		for n := range signing {
			names = append(names, n)
		}
		slices.Sort(names)
		return kms.HeldSignOptions{}, fail("ValidationException", fmt.Sprintf("SigningAlgorithm %q: use one of %s", in.SigningAlgorithm, strings.Join(names, ", ")))
	}
	if n := len(in.Message); n == 0 || n > maxMessage {
		return kms.HeldSignOptions{}, fail("ValidationException", fmt.Sprintf("Message must have 1 to %d bytes, not %d", maxMessage, n))
	}
	opts := alg.opts
	switch in.MessageType {
	case "", "RAW":
	case "DIGEST":
		if in.SigningAlgorithm == "ML_DSA_SHAKE_256" {
			return opts, fail("ValidationException", "MessageType DIGEST (an external mu) is not served for ML_DSA_SHAKE_256: send the message, RAW")
		}
		opts.Prehashed = true
	default:
		return opts, fail("ValidationException", fmt.Sprintf("MessageType %q: use RAW or DIGEST", in.MessageType))
	}
	return opts, nil
}

func sign(a *api, c *call) (any, error) {
	var in signRequest
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	opts, err := in.options()
	if err != nil {
		return nil, err
	}
	name, err := keyName(in.KeyId)
	if err != nil {
		return nil, err
	}
	res, err := a.svc.SignWithHeldKey(c.r.Context(), kms.HeldSignInput{Name: name, Options: opts, Inputs: [][]byte{in.Message}})
	if err == nil {
		err = res[0].Err
	}
	if err != nil {
		return nil, keyUsage(err)
	}
	return map[string]any{"KeyId": arn(c.region, name), "Signature": res[0].Signature, "SigningAlgorithm": in.SigningAlgorithm}, nil
}

func verify(a *api, c *call) (any, error) {
	var in signRequest
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	opts, err := in.options()
	if err != nil {
		return nil, err
	}
	name, err := keyName(in.KeyId)
	if err != nil {
		return nil, err
	}
	res, err := a.svc.VerifyWithHeldKey(c.r.Context(), kms.HeldVerifyInput{Name: name, Options: opts,
		Items: []kms.HeldCheck{{Signature: in.Signature, Input: in.Message}}})
	if err == nil {
		err = res[0].Err
	}
	switch {
	case err != nil && kms.ErrorKind(err) == kms.KindInvalid && len(in.Signature) > 0:
		return nil, fail("KMSInvalidSignatureException", "the signature does not verify")
	case err != nil:
		return nil, keyUsage(err)
	case !res[0].Valid:
		return nil, fail("KMSInvalidSignatureException", "the signature does not verify")
	}
	return map[string]any{"KeyId": arn(c.region, name), "SignatureValid": true, "SigningAlgorithm": in.SigningAlgorithm}, nil
}

// macRequest is what GenerateMac and VerifyMac share.
type macRequest struct {
	KeyId        string
	Message      []byte
	MacAlgorithm string
	Mac          []byte
}

func (in *macRequest) hash() (string, error) {
	h, ok := macs[in.MacAlgorithm]
	if !ok {
		return "", fail("ValidationException", fmt.Sprintf("MacAlgorithm %q: use HMAC_SHA_224, HMAC_SHA_256, HMAC_SHA_384 or HMAC_SHA_512", in.MacAlgorithm))
	}
	if n := len(in.Message); n == 0 || n > maxMessage {
		return "", fail("ValidationException", fmt.Sprintf("Message must have 1 to %d bytes, not %d", maxMessage, n))
	}
	return h, nil
}

func generateMac(a *api, c *call) (any, error) {
	var in macRequest
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	h, err := in.hash()
	if err != nil {
		return nil, err
	}
	name, err := keyName(in.KeyId)
	if err != nil {
		return nil, err
	}
	res, err := a.svc.HMACWithHeldKey(c.r.Context(), kms.HeldSignInput{Name: name, Options: kms.HeldSignOptions{Hash: h}, Inputs: [][]byte{in.Message}})
	if err == nil {
		err = res[0].Err
	}
	if err != nil {
		return nil, err
	}
	return map[string]any{"KeyId": arn(c.region, name), "Mac": res[0].Signature, "MacAlgorithm": in.MacAlgorithm}, nil
}

func verifyMac(a *api, c *call) (any, error) {
	var in macRequest
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	h, err := in.hash()
	if err != nil {
		return nil, err
	}
	name, err := keyName(in.KeyId)
	if err != nil {
		return nil, err
	}
	res, err := a.svc.VerifyHMACWithHeldKey(c.r.Context(), kms.HeldVerifyInput{Name: name, Options: kms.HeldSignOptions{Hash: h},
		Items: []kms.HeldCheck{{Signature: in.Mac, Input: in.Message}}})
	if err == nil {
		err = res[0].Err
	}
	switch {
	case err != nil && kms.ErrorKind(err) == kms.KindInvalid:
		return nil, fail("KMSInvalidMacException", "the MAC does not verify")
	case err != nil:
		return nil, err
	case !res[0].Valid:
		return nil, fail("KMSInvalidMacException", "the MAC does not verify")
	}
	return map[string]any{"KeyId": arn(c.region, name), "MacValid": true, "MacAlgorithm": in.MacAlgorithm}, nil
}

// keyUsage is err of a signature call: a key of a type that does not
// sign, or an algorithm its type does not take, is AWS's
// InvalidKeyUsageException.
func keyUsage(err error) error {
	if kms.ErrorKind(err) == kms.KindInvalid {
		return fail("InvalidKeyUsageException", kms.ErrorMessage(err))
	}
	return err
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
	var in struct{ KeyId string }
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	name, err := keyName(in.KeyId)
	if err != nil {
		return nil, err
	}
	k, err := a.svc.GetHeldKey(c.r.Context(), name)
	if err != nil {
		return nil, err
	}
	spec, usage := specOf(k)
	text, ok := k.PublicKeys[k.LatestVersion]
	if !ok || usage != "SIGN_VERIFY" {
		return nil, fail("UnsupportedOperationException", fmt.Sprintf("key %s is a %s key, which has no public key", name, spec))
	}
	der, err := publicKeyDER(k, text)
	if err != nil {
		return nil, err
	}
	return map[string]any{"KeyId": arn(c.region, name), "PublicKey": der, "KeySpec": spec, "CustomerMasterKeySpec": spec,
		"KeyUsage": usage, "SigningAlgorithms": signingAlgorithms(spec)}, nil
}
