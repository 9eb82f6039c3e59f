package awskms_test

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/kms/types"
)

// TestCLISign: the AWS CLI makes an ECC_NIST_P256 key in kmsd -aws-kms,
// signs a file with it (RAW, and its digest as DIGEST), and verifies the
// signature, which a tampered file fails (KMSInvalidSignatureException);
// the signature verifies offline with the key get-public-key printed.
// Only options that the CLI's versions 1 and 2 both have are used.
func TestCLISign(t *testing.T) {
	c := newCLI(t)
	var made struct {
		KeyMetadata struct {
			KeyId, Arn, KeySpec, KeyUsage string
			SigningAlgorithms             []string
		}
	}
	if errOut, err := c.run(&made, "create-key", "--key-spec", "ECC_NIST_P256", "--key-usage", "SIGN_VERIFY", "--description", "cli signer"); err != nil ||
		made.KeyMetadata.KeySpec != "ECC_NIST_P256" || made.KeyMetadata.KeyUsage != "SIGN_VERIFY" || strings.Join(made.KeyMetadata.SigningAlgorithms, ",") != "ECDSA_SHA_256" {
		t.Fatalf("aws kms create-key --key-spec ECC_NIST_P256 = %v %+v\n%s", err, made, errOut)
	}
	keyARN := made.KeyMetadata.Arn
	var pub struct{ KeyId, PublicKey, KeySpec, KeyUsage string }
	if errOut, err := c.run(&pub, "get-public-key", "--key-id", made.KeyMetadata.KeyId); err != nil || pub.KeyId != keyARN ||
		pub.KeySpec != "ECC_NIST_P256" || pub.KeyUsage != "SIGN_VERIFY" {
		t.Fatalf("aws kms get-public-key = %v %+v\n%s", err, pub, errOut)
	}
	der := c.unbase64(pub.PublicKey)

	const alg = types.SigningAlgorithmSpecEcdsaSha256
	msg := []byte("release v1.2.3 of the command line\n")
	message := c.file("message", msg)
	for mt, in := range map[string]string{"RAW": message, "DIGEST": c.file("digest", digestOf(alg, msg))} {
		var signed struct{ KeyId, Signature, SigningAlgorithm string }
		if errOut, err := c.run(&signed, "sign", "--key-id", keyARN, "--message", in, "--message-type", mt, "--signing-algorithm", string(alg)); err != nil ||
			signed.KeyId != keyARN || signed.SigningAlgorithm != string(alg) {
			t.Fatalf("aws kms sign --message-type %s = %v %+v\n%s", mt, err, signed, errOut)
		}
		sig := c.unbase64(signed.Signature)
		if err := verifyOffline(der, alg, msg, sig); err != nil {
			t.Errorf("the CLI's %s signature does not verify offline with get-public-key's key: %v", mt, err)
		}
		signature := c.file("signature", sig)
		var ok struct {
			KeyId            string
			SignatureValid   bool
			SigningAlgorithm string
		}
		if errOut, err := c.run(&ok, "verify", "--key-id", made.KeyMetadata.KeyId, "--message", in, "--message-type", mt,
			"--signing-algorithm", string(alg), "--signature", signature); err != nil || !ok.SignatureValid || ok.KeyId != keyARN {
			t.Fatalf("aws kms verify --message-type %s = %v %+v\n%s", mt, err, ok, errOut)
		}
		tampered := c.file("tampered", append([]byte("not "), msg...))
		if errOut, err := c.run(nil, "verify", "--key-id", keyARN, "--message", tampered, "--message-type", "RAW",
			"--signing-algorithm", string(alg), "--signature", signature); err == nil || !strings.Contains(errOut, "KMSInvalidSignatureException") {
			t.Fatalf("aws kms verify of a tampered message with the %s signature = %v\n%s\nwant KMSInvalidSignatureException", mt, err, errOut)
		}
	}
}
