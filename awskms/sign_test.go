package awskms_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"strings"
	"testing"

	"filippo.io/mldsa"

	"github.com/ringkms/kms"
)

// makeKey makes a key of spec and answers its ID.
func (c *client) makeKey(t *testing.T, spec string) string {
	t.Helper()
	var made struct{ KeyMetadata struct{ KeyId string } }
	if code, typ := c.do(t, "CreateKey", map[string]any{"KeySpec": spec}, &made); code != 200 {
		t.Fatalf("CreateKey %s: %d %s", spec, code, typ)
	}
	return made.KeyMetadata.KeyId
}

// Signatures verify offline with GetPublicKey's key, with AWS's
// algorithms (PSS with a salt as long as the digest), RAW and DIGEST; a
// wrong one answers KMSInvalidSignatureException.
func TestSignVerify(t *testing.T) {
	c, _ := newClient(t, kms.Flags{"*": true})
	msg := []byte("the message")
	digest := sha256.Sum256(msg)
	for _, tt := range []struct{ spec, alg string }{
		{"ECC_NIST_P256", "ECDSA_SHA_256"},
		{"RSA_2048", "RSASSA_PSS_SHA_256"},
		{"RSA_2048", "RSASSA_PKCS1_V1_5_SHA_256"},
		{"ML_DSA_65", "ML_DSA_SHAKE_256"},
	} {
		id := c.makeKey(t, tt.spec)
		var pub struct {
			PublicKey         []byte
			SigningAlgorithms []string
		}
		if code, typ := c.do(t, "GetPublicKey", map[string]any{"KeyId": id}, &pub); code != 200 {
			t.Fatalf("GetPublicKey %s: %d %s", tt.spec, code, typ)
		}
		types := []string{"RAW"}
		if tt.spec != "ML_DSA_65" {
			types = append(types, "DIGEST")
		}
		for _, mt := range types {
			in := msg
			if mt == "DIGEST" {
				in = digest[:]
			}
			var signed struct{ Signature []byte }
			if code, typ := c.do(t, "Sign", map[string]any{"KeyId": id, "Message": in, "MessageType": mt, "SigningAlgorithm": tt.alg}, &signed); code != 200 {
				t.Fatalf("Sign %s %s %s: %d %s", tt.spec, tt.alg, mt, code, typ)
			}
			if !verifyOffline(t, pub.PublicKey, tt.alg, msg, digest[:], signed.Signature) {
				t.Errorf("%s %s %s: the signature does not verify offline with GetPublicKey's key", tt.spec, tt.alg, mt)
			}
			var ok struct{ SignatureValid bool }
			if code, typ := c.do(t, "Verify", map[string]any{"KeyId": id, "Message": in, "MessageType": mt, "SigningAlgorithm": tt.alg, "Signature": signed.Signature}, &ok); code != 200 || !ok.SignatureValid {
				t.Errorf("Verify %s %s %s: %d %s", tt.spec, tt.alg, mt, code, typ)
			}
			bad := append([]byte(nil), signed.Signature...)
			bad[len(bad)/2] ^= 1
			if code, typ := c.do(t, "Verify", map[string]any{"KeyId": id, "Message": in, "MessageType": mt, "SigningAlgorithm": tt.alg, "Signature": bad}, nil); typ != "KMSInvalidSignatureException" {
				t.Errorf("Verify of an altered signature, %s %s: %d %s", tt.spec, tt.alg, code, typ)
			}
		}
	}
	sym := c.makeKey(t, "SYMMETRIC_DEFAULT")
	if _, typ := c.do(t, "Sign", map[string]any{"KeyId": sym, "Message": msg, "SigningAlgorithm": "ECDSA_SHA_256"}, nil); typ != "InvalidKeyUsageException" {
		t.Errorf("Sign with a symmetric key: %s", typ)
	}
}

func verifyOffline(t *testing.T, der []byte, alg string, msg, digest, sig []byte) bool {
	t.Helper()
	if alg == "ML_DSA_SHAKE_256" {
		var spki struct {
			Algorithm pkix.AlgorithmIdentifier
			PublicKey asn1.BitString
		}
		if _, err := asn1.Unmarshal(der, &spki); err != nil || !spki.Algorithm.Algorithm.Equal(asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 3, 18}) {
			t.Fatalf("ML-DSA-65 SubjectPublicKeyInfo: %v %v", spki.Algorithm.Algorithm, err)
		}
		pub, err := mldsa.NewPublicKey(mldsa.MLDSA65(), spki.PublicKey.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		return mldsa.Verify(pub, msg, sig, nil) == nil
	}
	pub, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		t.Fatalf("GetPublicKey's key: %v", err)
	}
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		return ecdsa.VerifyASN1(k, digest, sig)
	case *rsa.PublicKey:
		if alg == "RSASSA_PSS_SHA_256" {
			return rsa.VerifyPSS(k, crypto.SHA256, digest, sig, &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash}) == nil
		}
		return rsa.VerifyPKCS1v15(k, crypto.SHA256, digest, sig) == nil
	}
	return false
}

// MACs, and the rotation of a symmetric key: its older ciphertexts still
// open.
func TestMacAndRotation(t *testing.T) {
	c, _ := newClient(t, kms.Flags{"*": true})
	id := c.makeKey(t, "HMAC_256")
	var mac struct{ Mac []byte }
	if code, typ := c.do(t, "GenerateMac", map[string]any{"KeyId": id, "Message": []byte("m"), "MacAlgorithm": "HMAC_SHA_256"}, &mac); code != 200 || len(mac.Mac) != 32 {
		t.Fatalf("GenerateMac: %d %s", code, typ)
	}
	var ok struct{ MacValid bool }
	if code, typ := c.do(t, "VerifyMac", map[string]any{"KeyId": id, "Message": []byte("m"), "MacAlgorithm": "HMAC_SHA_256", "Mac": mac.Mac}, &ok); code != 200 || !ok.MacValid {
		t.Fatalf("VerifyMac: %d %s", code, typ)
	}
	if _, typ := c.do(t, "VerifyMac", map[string]any{"KeyId": id, "Message": []byte("n"), "MacAlgorithm": "HMAC_SHA_256", "Mac": mac.Mac}, nil); typ != "KMSInvalidMacException" {
		t.Errorf("VerifyMac of another message: %s", typ)
	}
	if _, typ := c.do(t, "EnableKeyRotation", map[string]any{"KeyId": id}, nil); typ != "UnsupportedOperationException" {
		t.Errorf("EnableKeyRotation of an HMAC key: %s", typ)
	}

	sym := c.makeKey(t, "SYMMETRIC_DEFAULT")
	var enc struct{ CiphertextBlob []byte }
	c.do(t, "Encrypt", map[string]any{"KeyId": sym, "Plaintext": []byte("before")}, &enc)
	if code, typ := c.do(t, "EnableKeyRotation", map[string]any{"KeyId": sym, "RotationPeriodInDays": 90}, nil); code != 200 {
		t.Fatalf("EnableKeyRotation: %d %s", code, typ)
	}
	var st struct {
		KeyRotationEnabled   bool
		RotationPeriodInDays int
	}
	if c.do(t, "GetKeyRotationStatus", map[string]any{"KeyId": sym}, &st); !st.KeyRotationEnabled || st.RotationPeriodInDays != 90 {
		t.Fatalf("GetKeyRotationStatus = %+v", st)
	}
	if code, typ := c.do(t, "RotateKeyOnDemand", map[string]any{"KeyId": sym}, nil); code != 200 {
		t.Fatalf("RotateKeyOnDemand: %d %s", code, typ)
	}
	var rots struct{ Rotations []struct{ KeyId string } }
	if c.do(t, "ListKeyRotations", map[string]any{"KeyId": sym}, &rots); len(rots.Rotations) != 1 {
		t.Fatalf("ListKeyRotations = %+v, want one", rots)
	}
	var dec struct{ Plaintext []byte }
	if code, typ := c.do(t, "Decrypt", map[string]any{"CiphertextBlob": enc.CiphertextBlob}, &dec); code != 200 || string(dec.Plaintext) != "before" {
		t.Fatalf("Decrypt of a ciphertext from before the rotation: %d %s", code, typ)
	}
	if code, typ := c.do(t, "DisableKeyRotation", map[string]any{"KeyId": sym}, nil); code != 200 {
		t.Fatalf("DisableKeyRotation: %d %s", code, typ)
	}
	if c.do(t, "GetKeyRotationStatus", map[string]any{"KeyId": sym}, &st); st.KeyRotationEnabled {
		t.Fatal("rotation still enabled")
	}
}

// An algorithm that does not go with the key's spec, or a MAC with a key
// that is not an HMAC key, is refused (InvalidKeyUsageException) and
// nothing is made; an alias answers with its key's ARN.
func TestKeyUsage(t *testing.T) {
	c, env := newClient(t, kms.Flags{"*": true})
	p256 := c.makeKey(t, "ECC_NIST_P256")
	rsaKey := c.makeKey(t, "RSA_2048")
	sym := c.makeKey(t, "SYMMETRIC_DEFAULT")
	for _, tt := range []struct{ op, key, alg string }{
		{"Sign", p256, "ECDSA_SHA_384"}, {"Sign", p256, "RSASSA_PSS_SHA_256"}, {"Sign", rsaKey, "ECDSA_SHA_256"},
		{"Sign", rsaKey, "ML_DSA_SHAKE_256"}, {"Verify", p256, "RSASSA_PKCS1_V1_5_SHA_256"},
	} {
		in := map[string]any{"KeyId": tt.key, "Message": []byte("m"), "SigningAlgorithm": tt.alg, "Signature": []byte("s")}
		if _, typ := c.do(t, tt.op, in, nil); typ != "InvalidKeyUsageException" {
			t.Errorf("%s with %s on a key it does not go with: %q", tt.op, tt.alg, typ)
		}
	}
	for _, op := range []string{"GenerateMac", "VerifyMac"} {
		if _, typ := c.do(t, op, map[string]any{"KeyId": sym, "Message": []byte("m"), "MacAlgorithm": "HMAC_SHA_256", "Mac": []byte("x")}, nil); typ != "InvalidKeyUsageException" {
			t.Errorf("%s with a symmetric key: %q", op, typ)
		}
	}
	// A key that does not encrypt neither encrypts nor makes data keys,
	// nor opens a blob as the key KeyId names.
	hmacKey := c.makeKey(t, "HMAC_256")
	var enc struct{ CiphertextBlob []byte }
	c.do(t, "Encrypt", map[string]any{"KeyId": sym, "Plaintext": []byte("p")}, &enc)
	for _, key := range []string{p256, hmacKey} {
		for op, in := range map[string]map[string]any{
			"Encrypt":                         {"KeyId": key, "Plaintext": []byte("p")},
			"GenerateDataKey":                 {"KeyId": key, "KeySpec": "AES_256"},
			"GenerateDataKeyWithoutPlaintext": {"KeyId": key, "NumberOfBytes": 32},
			"ReEncrypt":                       {"CiphertextBlob": enc.CiphertextBlob, "DestinationKeyId": key},
			"Decrypt":                         {"CiphertextBlob": enc.CiphertextBlob, "KeyId": key},
		} {
			if status, typ := c.do(t, op, in, nil); typ != "InvalidKeyUsageException" || status != 400 {
				t.Errorf("%s with a key that does not encrypt: %d %q, want 400 InvalidKeyUsageException", op, status, typ)
			}
		}
	}
	// Other invalid requests are not a key's usage.
	for _, keyID := range []string{"bad name!", strings.Repeat("k", 300), "alias/" + strings.Repeat("a", 300)} {
		if status, typ := c.do(t, "Encrypt", map[string]any{"KeyId": keyID, "Plaintext": []byte("p")}, nil); typ != "ValidationException" || status != 400 {
			t.Errorf("Encrypt with the KeyId %.20q...: %d %q, want 400 ValidationException", keyID, status, typ)
		}
	}

	recs, _ := env.Service.SearchActivity(env.RootCtx, kms.ActivityFilter{Action: "transit.sign"}, kms.PageRequest{})
	for _, r := range recs.Data {
		if r.Props["result"] == "ok" || r.Props["version"] != nil {
			t.Errorf("a refused signature was made: %+v", r)
		}
	}
	c.do(t, "CreateAlias", map[string]any{"AliasName": "alias/signer", "TargetKeyId": p256}, nil)
	var pub struct{ KeyId string }
	if c.do(t, "GetPublicKey", map[string]any{"KeyId": "alias/signer"}, &pub); pub.KeyId != "arn:aws:kms:eu-west-3:000000000000:key/"+p256 {
		t.Errorf("GetPublicKey by alias answered KeyId %q, want the key's ARN", pub.KeyId)
	}
}
