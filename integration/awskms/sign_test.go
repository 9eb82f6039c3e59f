package awskms_test

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/hmac"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"filippo.io/mldsa"
	"github.com/aws/aws-sdk-go-v2/aws"
	awskms "github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"
)

// oidMLDSA65 is ML-DSA-65's OID (FIPS 204, NIST's arc).
var oidMLDSA65 = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 3, 18}

// signingHash is the hash of an ECDSA or RSA signing algorithm of AWS
// (its name's last number); zero for ML_DSA_SHAKE_256.
func signingHash(alg types.SigningAlgorithmSpec) crypto.Hash {
	switch {
	case strings.HasSuffix(string(alg), "_SHA_256"):
		return crypto.SHA256
	case strings.HasSuffix(string(alg), "_SHA_384"):
		return crypto.SHA384
	case strings.HasSuffix(string(alg), "_SHA_512"):
		return crypto.SHA512
	}
	return 0
}

// digestOf is msg's digest under alg's hash.
func digestOf(alg types.SigningAlgorithmSpec, msg []byte) []byte {
	h := signingHash(alg).New()
	h.Write(msg)
	return h.Sum(nil)
}

// verifyOffline checks with Go's crypto alone that sig is alg's
// signature of msg under der, a DER SubjectPublicKeyInfo as
// GetPublicKey answers it: PKIX's ECDSA and RSA keys, PSS with a salt as
// long as the digest, and ML-DSA-65 under its OID.
func verifyOffline(der []byte, alg types.SigningAlgorithmSpec, msg, sig []byte) error {
	if alg == types.SigningAlgorithmSpecMlDsaShake256 {
		var spki struct {
			Algorithm pkix.AlgorithmIdentifier
			PublicKey asn1.BitString
		}
		if rest, err := asn1.Unmarshal(der, &spki); err != nil || len(rest) > 0 {
			return fmt.Errorf("the public key is not a SubjectPublicKeyInfo: %v, %d bytes after it", err, len(rest))
		}
		if !spki.Algorithm.Algorithm.Equal(oidMLDSA65) || len(spki.Algorithm.Parameters.FullBytes) > 0 {
			return fmt.Errorf("the public key's algorithm is %v with parameters %x, not ML-DSA-65 (%v) without", spki.Algorithm.Algorithm, spki.Algorithm.Parameters.FullBytes, oidMLDSA65)
		}
		pub, err := mldsa.NewPublicKey(mldsa.MLDSA65(), spki.PublicKey.Bytes)
		if err != nil {
			return err
		}
		return mldsa.Verify(pub, msg, sig, nil)
	}
	pub, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return err
	}
	digest, h := digestOf(alg, msg), signingHash(alg)
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		if !strings.HasPrefix(string(alg), "ECDSA_") {
			return fmt.Errorf("an ECDSA key for %s", alg)
		}
		if !ecdsa.VerifyASN1(k, digest, sig) {
			return errors.New("the ECDSA signature does not verify")
		}
		return nil
	case *rsa.PublicKey:
		if strings.HasPrefix(string(alg), "RSASSA_PSS_") {
			return rsa.VerifyPSS(k, h, digest, sig, &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash})
		}
		if strings.HasPrefix(string(alg), "RSASSA_PKCS1_V1_5_") {
			return rsa.VerifyPKCS1v15(k, h, digest, sig)
		}
	}
	return fmt.Errorf("a %T key for %s", pub, alg)
}

// TestSDKSign: AWS's SDK for Go signs with kmsd -aws-kms's ECDSA, RSA
// and ML-DSA keys, with each of their algorithms, RAW and (but for
// ML-DSA) DIGEST; each signature verifies offline with GetPublicKey's
// key and with Verify, and an altered one is KMSInvalidSignatureException.
func TestSDKSign(t *testing.T) {
	c := sdkKit(t)
	ctx := context.Background()
	msg := []byte("a release to sign")
	pss := []types.SigningAlgorithmSpec{types.SigningAlgorithmSpecRsassaPssSha256, types.SigningAlgorithmSpecRsassaPssSha384, types.SigningAlgorithmSpecRsassaPssSha512}
	pkcs1 := []types.SigningAlgorithmSpec{types.SigningAlgorithmSpecRsassaPkcs1V15Sha256, types.SigningAlgorithmSpecRsassaPkcs1V15Sha384, types.SigningAlgorithmSpecRsassaPkcs1V15Sha512}
	for _, tc := range []struct {
		spec types.KeySpec
		algs []types.SigningAlgorithmSpec
	}{
		{types.KeySpecEccNistP256, []types.SigningAlgorithmSpec{types.SigningAlgorithmSpecEcdsaSha256}},
		{types.KeySpecEccNistP384, []types.SigningAlgorithmSpec{types.SigningAlgorithmSpecEcdsaSha384}},
		{types.KeySpecRsa2048, append(slices.Clone(pss), pkcs1...)},
		{types.KeySpecMlDsa65, []types.SigningAlgorithmSpec{types.SigningAlgorithmSpecMlDsaShake256}},
	} {
		made, err := c.CreateKey(ctx, &awskms.CreateKeyInput{KeySpec: tc.spec, KeyUsage: types.KeyUsageTypeSignVerify})
		if err != nil {
			t.Fatalf("CreateKey %s = %v", tc.spec, err)
		}
		id, keyARN := aws.ToString(made.KeyMetadata.KeyId), aws.ToString(made.KeyMetadata.Arn)
		if got := made.KeyMetadata.SigningAlgorithms; !sameAlgorithms(got, tc.algs) {
			t.Errorf("CreateKey %s's SigningAlgorithms = %v, want %v", tc.spec, got, tc.algs)
		}
		pub, err := c.GetPublicKey(ctx, &awskms.GetPublicKeyInput{KeyId: aws.String(id)})
		if err != nil {
			t.Fatalf("GetPublicKey %s = %v", tc.spec, err)
		}
		if aws.ToString(pub.KeyId) != keyARN || pub.KeySpec != tc.spec || pub.KeyUsage != types.KeyUsageTypeSignVerify ||
			!sameAlgorithms(pub.SigningAlgorithms, tc.algs) || len(pub.PublicKey) == 0 {
			t.Errorf("GetPublicKey %s = KeyId %s, KeySpec %s, KeyUsage %s, SigningAlgorithms %v", tc.spec, aws.ToString(pub.KeyId), pub.KeySpec, pub.KeyUsage, pub.SigningAlgorithms)
		}
		for _, alg := range tc.algs {
			mts := []types.MessageType{types.MessageTypeRaw, types.MessageTypeDigest}
			if alg == types.SigningAlgorithmSpecMlDsaShake256 {
				mts = mts[:1]
			}
			for _, mt := range mts {
				what := fmt.Sprintf("%s %s %s", tc.spec, alg, mt)
				in := msg
				if mt == types.MessageTypeDigest {
					in = digestOf(alg, msg)
				}
				signed, err := c.Sign(ctx, &awskms.SignInput{KeyId: aws.String(keyARN), Message: in, MessageType: mt, SigningAlgorithm: alg})
				if err != nil {
					t.Fatalf("Sign %s = %v", what, err)
				}
				if aws.ToString(signed.KeyId) != keyARN || signed.SigningAlgorithm != alg {
					t.Errorf("Sign %s answered KeyId %s, SigningAlgorithm %s", what, aws.ToString(signed.KeyId), signed.SigningAlgorithm)
				}
				if err := verifyOffline(pub.PublicKey, alg, msg, signed.Signature); err != nil {
					t.Errorf("%s: the signature does not verify offline with GetPublicKey's key: %v", what, err)
				}
				ok, err := c.Verify(ctx, &awskms.VerifyInput{KeyId: aws.String(id), Message: in, MessageType: mt, SigningAlgorithm: alg, Signature: signed.Signature})
				if err != nil || !ok.SignatureValid || aws.ToString(ok.KeyId) != keyARN || ok.SigningAlgorithm != alg {
					t.Errorf("Verify %s = %v, %+v", what, err, ok)
				}
				// A signature checks whatever the message type it
				// was made with: RAW's as DIGEST, DIGEST's as RAW.
				if alg != types.SigningAlgorithmSpecMlDsaShake256 {
					crossIn, crossType := digestOf(alg, msg), types.MessageTypeDigest
					if mt == types.MessageTypeDigest {
						crossIn, crossType = msg, types.MessageTypeRaw
					}
					if ok, err := c.Verify(ctx, &awskms.VerifyInput{KeyId: aws.String(id), Message: crossIn, MessageType: crossType, SigningAlgorithm: alg, Signature: signed.Signature}); err != nil || !ok.SignatureValid {
						t.Errorf("Verify %s's signature as %s = %v", what, crossType, err)
					}
				}
				altered := bytes.Clone(signed.Signature)
				altered[len(altered)/2] ^= 1
				if _, err := c.Verify(ctx, &awskms.VerifyInput{KeyId: aws.String(id), Message: in, MessageType: mt, SigningAlgorithm: alg, Signature: altered}); !errors.As(err, new(*types.KMSInvalidSignatureException)) {
					t.Errorf("Verify of an altered signature, %s = %v, want KMSInvalidSignatureException", what, err)
				}
				other := bytes.Clone(in)
				other[0] ^= 1
				if _, err := c.Verify(ctx, &awskms.VerifyInput{KeyId: aws.String(id), Message: other, MessageType: mt, SigningAlgorithm: alg, Signature: signed.Signature}); !errors.As(err, new(*types.KMSInvalidSignatureException)) {
					t.Errorf("Verify of another message, %s = %v, want KMSInvalidSignatureException", what, err)
				}
			}
		}
	}

	ec, err := c.CreateKey(ctx, &awskms.CreateKeyInput{KeySpec: types.KeySpecEccNistP256, KeyUsage: types.KeyUsageTypeSignVerify})
	if err != nil {
		t.Fatal(err)
	}
	mlDSA, err := c.CreateKey(ctx, &awskms.CreateKeyInput{KeySpec: types.KeySpecMlDsa65, KeyUsage: types.KeyUsageTypeSignVerify})
	if err != nil {
		t.Fatal(err)
	}
	sym, err := c.CreateKey(ctx, &awskms.CreateKeyInput{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Sign(ctx, &awskms.SignInput{KeyId: sym.KeyMetadata.KeyId, Message: msg, SigningAlgorithm: types.SigningAlgorithmSpecEcdsaSha256}); !errors.As(err, new(*types.InvalidKeyUsageException)) {
		t.Errorf("Sign with a symmetric key = %v, want InvalidKeyUsageException", err)
	}
	if _, err := c.Encrypt(ctx, &awskms.EncryptInput{KeyId: ec.KeyMetadata.KeyId, Plaintext: msg}); !errors.As(err, new(*types.InvalidKeyUsageException)) {
		t.Errorf("Encrypt with a signing key = %v, want InvalidKeyUsageException", err)
	}
	if _, err := c.GenerateDataKey(ctx, &awskms.GenerateDataKeyInput{KeyId: ec.KeyMetadata.KeyId, KeySpec: types.DataKeySpecAes256}); !errors.As(err, new(*types.InvalidKeyUsageException)) {
		t.Errorf("GenerateDataKey with a signing key = %v, want InvalidKeyUsageException", err)
	}
	if _, err := c.Sign(ctx, &awskms.SignInput{KeyId: mlDSA.KeyMetadata.KeyId, Message: digestOf(types.SigningAlgorithmSpecEcdsaSha256, msg),
		MessageType: types.MessageTypeDigest, SigningAlgorithm: types.SigningAlgorithmSpecMlDsaShake256}); errorCode(err) != "ValidationException" {
		t.Errorf("Sign with ML_DSA_SHAKE_256 of a DIGEST = %v, want ValidationException", err)
	}
	if _, err := c.Sign(ctx, &awskms.SignInput{KeyId: ec.KeyMetadata.KeyId, Message: msg, SigningAlgorithm: "ECDSA_SHA_1"}); errorCode(err) != "ValidationException" {
		t.Errorf("Sign with an unknown algorithm = %v, want ValidationException", err)
	}
	if _, err := c.Sign(ctx, &awskms.SignInput{KeyId: aws.String("0123456789abcdef0123456789abcdef"), Message: msg, SigningAlgorithm: types.SigningAlgorithmSpecEcdsaSha256}); !errors.As(err, new(*types.NotFoundException)) {
		t.Errorf("Sign with no key = %v, want NotFoundException", err)
	}
	if _, err := c.GetPublicKey(ctx, &awskms.GetPublicKeyInput{KeyId: sym.KeyMetadata.KeyId}); !errors.As(err, new(*types.UnsupportedOperationException)) {
		t.Errorf("GetPublicKey of a symmetric key = %v, want UnsupportedOperationException", err)
	}
}

// sameAlgorithms is whether got and want hold the same algorithms.
func sameAlgorithms(got, want []types.SigningAlgorithmSpec) bool {
	return len(got) == len(want) && !slices.ContainsFunc(want, func(a types.SigningAlgorithmSpec) bool { return !slices.Contains(got, a) })
}

// TestSDKMac: AWS's SDK for Go makes and checks MACs with kmsd -aws-kms's
// HMAC keys; the MAC is HMAC's, and a MAC that does not hold is
// KMSInvalidMacException.
func TestSDKMac(t *testing.T) {
	c := sdkKit(t)
	ctx := context.Background()

	made, err := c.CreateKey(ctx, &awskms.CreateKeyInput{KeySpec: types.KeySpecHmac256, KeyUsage: types.KeyUsageTypeGenerateVerifyMac})
	if err != nil {
		t.Fatalf("CreateKey HMAC_256 = %v", err)
	}
	m := made.KeyMetadata
	id, keyARN := aws.ToString(m.KeyId), aws.ToString(m.Arn)
	if m.KeySpec != types.KeySpecHmac256 || m.KeyUsage != types.KeyUsageTypeGenerateVerifyMac || !slices.Equal(m.MacAlgorithms, []types.MacAlgorithmSpec{types.MacAlgorithmSpecHmacSha256}) {
		t.Errorf("CreateKey HMAC_256's metadata: spec %s, usage %s, MacAlgorithms %v", m.KeySpec, m.KeyUsage, m.MacAlgorithms)
	}
	msg := []byte("a webhook body")
	mac, err := c.GenerateMac(ctx, &awskms.GenerateMacInput{KeyId: aws.String(id), Message: msg, MacAlgorithm: types.MacAlgorithmSpecHmacSha256})
	if err != nil || len(mac.Mac) != 32 || aws.ToString(mac.KeyId) != keyARN || mac.MacAlgorithm != types.MacAlgorithmSpecHmacSha256 {
		t.Fatalf("GenerateMac = %v, %+v", err, mac)
	}
	again, err := c.GenerateMac(ctx, &awskms.GenerateMacInput{KeyId: aws.String(keyARN), Message: msg, MacAlgorithm: types.MacAlgorithmSpecHmacSha256})
	if err != nil || !hmac.Equal(again.Mac, mac.Mac) {
		t.Errorf("GenerateMac of the same message again = %v, %x, want %x", err, again.Mac, mac.Mac)
	}
	ok, err := c.VerifyMac(ctx, &awskms.VerifyMacInput{KeyId: aws.String(id), Message: msg, MacAlgorithm: types.MacAlgorithmSpecHmacSha256, Mac: mac.Mac})
	if err != nil || !ok.MacValid || aws.ToString(ok.KeyId) != keyARN || ok.MacAlgorithm != types.MacAlgorithmSpecHmacSha256 {
		t.Fatalf("VerifyMac = %v, %+v", err, ok)
	}
	bad := bytes.Clone(mac.Mac)
	bad[0] ^= 1
	for what, in := range map[string]*awskms.VerifyMacInput{
		"an altered MAC":  {KeyId: aws.String(id), Message: msg, MacAlgorithm: types.MacAlgorithmSpecHmacSha256, Mac: bad},
		"another message": {KeyId: aws.String(id), Message: []byte("another body"), MacAlgorithm: types.MacAlgorithmSpecHmacSha256, Mac: mac.Mac},
		"a truncated MAC": {KeyId: aws.String(id), Message: msg, MacAlgorithm: types.MacAlgorithmSpecHmacSha256, Mac: mac.Mac[:16]},
		"a MAC of zeros":  {KeyId: aws.String(id), Message: msg, MacAlgorithm: types.MacAlgorithmSpecHmacSha256, Mac: make([]byte, 32)},
	} {
		if _, err := c.VerifyMac(ctx, in); !errors.As(err, new(*types.KMSInvalidMacException)) {
			t.Errorf("VerifyMac of %s = %v, want KMSInvalidMacException", what, err)
		}
	}
	if _, err := c.GenerateMac(ctx, &awskms.GenerateMacInput{KeyId: aws.String(id), Message: msg, MacAlgorithm: "HMAC_SHA_1"}); errorCode(err) != "ValidationException" {
		t.Errorf("GenerateMac with an unknown algorithm = %v, want ValidationException", err)
	}
	if _, err := c.GenerateMac(ctx, &awskms.GenerateMacInput{KeyId: aws.String("0123456789abcdef0123456789abcdef"), Message: msg, MacAlgorithm: types.MacAlgorithmSpecHmacSha256}); !errors.As(err, new(*types.NotFoundException)) {
		t.Errorf("GenerateMac with no key = %v, want NotFoundException", err)
	}
	if _, err := c.EnableKeyRotation(ctx, &awskms.EnableKeyRotationInput{KeyId: aws.String(id)}); !errors.As(err, new(*types.UnsupportedOperationException)) {
		t.Errorf("EnableKeyRotation of an HMAC key = %v, want UnsupportedOperationException", err)
	}
}
