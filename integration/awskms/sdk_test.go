package awskms_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awskms "github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/aws/smithy-go"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/client"
	"github.com/ringkms/kms/integration/internal/harness"
	"github.com/ringkms/kms/internal/kmsdtest"
)

// region is the region the clients sign for; kmsd serves any.
const region = "eu-west-3"

// sdkClient is AWS's SDK for Go's KMS client of p, signing with the
// access key id and secret; nothing of the machine's AWS configuration
// is read.
func sdkClient(p *kmsdtest.Proc, id, secret string) *awskms.Client {
	return sessionClient(p, id, secret, "")
}

// sessionClient is sdkClient with a session token, as temporary
// credentials have one.
func sessionClient(p *kmsdtest.Proc, id, secret, session string) *awskms.Client {
	cfg := aws.Config{Region: region, Credentials: credentials.NewStaticCredentialsProvider(id, secret, session)}
	return awskms.NewFromConfig(cfg, func(o *awskms.Options) { o.BaseEndpoint = aws.String(p.URL) })
}

// sdkKit is AWS's SDK for Go's client of a fresh kmsd -aws-kms, signing
// with an API key that may do everything.
func sdkKit(t *testing.T) *awskms.Client {
	t.Helper()
	in := harness.New(t)
	p := in.Start(t, "-aws-kms")
	k := in.NewAPIKey(t, p, "*")
	return sdkClient(p, k.KeyID, k.Key)
}

// errorCode is the AWS error code of err, which AWS's SDK surfaces as a
// smithy.APIError.
func errorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// TestSDK: AWS's SDK for Go creates, describes and lists keys, and
// encrypts, decrypts, re-encrypts and makes data keys against kmsd
// -aws-kms, with the encryption context bound to the ciphertext.
func TestSDK(t *testing.T) {
	c := sdkKit(t)
	ctx := context.Background()

	made, err := c.CreateKey(ctx, &awskms.CreateKeyInput{Description: aws.String("sdk")})
	if err != nil {
		t.Fatalf("CreateKey = %v", err)
	}
	m := made.KeyMetadata
	id, keyARN := aws.ToString(m.KeyId), aws.ToString(m.Arn)
	if keyARN != "arn:aws:kms:"+region+":000000000000:key/"+id || m.KeySpec != types.KeySpecSymmetricDefault ||
		m.KeyUsage != types.KeyUsageTypeEncryptDecrypt || m.KeyState != types.KeyStateEnabled || !m.Enabled {
		t.Fatalf("CreateKey's metadata: id %q, arn %q, spec %s, usage %s, state %s", id, keyARN, m.KeySpec, m.KeyUsage, m.KeyState)
	}
	for _, name := range []string{id, keyARN} {
		d, err := c.DescribeKey(ctx, &awskms.DescribeKeyInput{KeyId: aws.String(name)})
		if err != nil || aws.ToString(d.KeyMetadata.KeyId) != id || d.KeyMetadata.KeySpec != types.KeySpecSymmetricDefault {
			t.Fatalf("DescribeKey(%s) = %v", name, err)
		}
	}
	signer, err := c.CreateKey(ctx, &awskms.CreateKeyInput{KeySpec: types.KeySpecEccNistP256, KeyUsage: types.KeyUsageTypeSignVerify})
	if err != nil {
		t.Fatalf("CreateKey ECC_NIST_P256 = %v", err)
	}
	d, err := c.DescribeKey(ctx, &awskms.DescribeKeyInput{KeyId: signer.KeyMetadata.Arn})
	if err != nil || d.KeyMetadata.KeySpec != types.KeySpecEccNistP256 || d.KeyMetadata.KeyUsage != types.KeyUsageTypeSignVerify {
		t.Fatalf("DescribeKey of an ECC_NIST_P256 key = %v, %+v", err, d)
	}
	if _, err := c.DescribeKey(ctx, &awskms.DescribeKeyInput{KeyId: aws.String("0123456789abcdef0123456789abcdef")}); !errors.As(err, new(*types.NotFoundException)) {
		t.Errorf("DescribeKey of no key = %v, want NotFoundException", err)
	}

	listed := map[string]string{}
	for pages := awskms.NewListKeysPaginator(c, &awskms.ListKeysInput{}); pages.HasMorePages(); {
		page, err := pages.NextPage(ctx)
		if err != nil {
			t.Fatalf("ListKeys = %v", err)
		}
		for _, e := range page.Keys {
			listed[aws.ToString(e.KeyId)] = aws.ToString(e.KeyArn)
		}
	}
	if listed[id] != keyARN || listed[aws.ToString(signer.KeyMetadata.KeyId)] != aws.ToString(signer.KeyMetadata.Arn) {
		t.Fatalf("ListKeys = %v, want %s and the signing key", listed, id)
	}

	plain := []byte("the launch codes")
	ec := map[string]string{"tenant": "a", "purpose": "test"}
	enc, err := c.Encrypt(ctx, &awskms.EncryptInput{KeyId: aws.String(keyARN), Plaintext: plain, EncryptionContext: ec})
	if err != nil || aws.ToString(enc.KeyId) != keyARN || bytes.Contains(enc.CiphertextBlob, plain) {
		t.Fatalf("Encrypt = %v, %+v", err, enc)
	}
	for name, keyID := range map[string]*string{"without KeyId": nil, "with its KeyId": aws.String(id), "with its ARN": aws.String(keyARN)} {
		dec, err := c.Decrypt(ctx, &awskms.DecryptInput{CiphertextBlob: enc.CiphertextBlob, EncryptionContext: ec, KeyId: keyID})
		if err != nil || !bytes.Equal(dec.Plaintext, plain) || aws.ToString(dec.KeyId) != keyARN {
			t.Errorf("Decrypt %s = %v, %+v", name, err, dec)
		}
	}
	altered := bytes.Clone(enc.CiphertextBlob)
	altered[len(altered)-1] ^= 1
	for name, in := range map[string]*awskms.DecryptInput{
		"with another context": {CiphertextBlob: enc.CiphertextBlob, EncryptionContext: map[string]string{"tenant": "b", "purpose": "test"}},
		"without its context":  {CiphertextBlob: enc.CiphertextBlob},
		"of an altered blob":   {CiphertextBlob: altered, EncryptionContext: ec},
	} {
		if _, err := c.Decrypt(ctx, in); !errors.As(err, new(*types.InvalidCiphertextException)) {
			t.Errorf("Decrypt %s = %v, want InvalidCiphertextException", name, err)
		}
	}

	second, err := c.CreateKey(ctx, &awskms.CreateKeyInput{})
	if err != nil {
		t.Fatal(err)
	}
	secondARN := aws.ToString(second.KeyMetadata.Arn)
	re, err := c.ReEncrypt(ctx, &awskms.ReEncryptInput{CiphertextBlob: enc.CiphertextBlob, SourceEncryptionContext: ec,
		DestinationKeyId: second.KeyMetadata.KeyId, DestinationEncryptionContext: map[string]string{"moved": "yes"}})
	if err != nil || aws.ToString(re.KeyId) != secondARN || aws.ToString(re.SourceKeyId) != keyARN {
		t.Fatalf("ReEncrypt = %v, %+v", err, re)
	}
	dec, err := c.Decrypt(ctx, &awskms.DecryptInput{CiphertextBlob: re.CiphertextBlob, EncryptionContext: map[string]string{"moved": "yes"}})
	if err != nil || !bytes.Equal(dec.Plaintext, plain) || aws.ToString(dec.KeyId) != secondARN {
		t.Fatalf("Decrypt of the re-encrypted blob = %v, %+v", err, dec)
	}
	if _, err := c.Decrypt(ctx, &awskms.DecryptInput{CiphertextBlob: re.CiphertextBlob, EncryptionContext: map[string]string{"moved": "yes"}, KeyId: aws.String(keyARN)}); !errors.As(err, new(*types.IncorrectKeyException)) {
		t.Errorf("Decrypt of the re-encrypted blob naming the first key = %v, want IncorrectKeyException", err)
	}

	dk, err := c.GenerateDataKey(ctx, &awskms.GenerateDataKeyInput{KeyId: aws.String(id), KeySpec: types.DataKeySpecAes256, EncryptionContext: ec})
	if err != nil || len(dk.Plaintext) != 32 || aws.ToString(dk.KeyId) != keyARN {
		t.Fatalf("GenerateDataKey = %v, %+v", err, dk)
	}
	dec, err = c.Decrypt(ctx, &awskms.DecryptInput{CiphertextBlob: dk.CiphertextBlob, EncryptionContext: ec})
	if err != nil || !bytes.Equal(dec.Plaintext, dk.Plaintext) {
		t.Fatalf("Decrypt of the data key = %v", err)
	}
	wp, err := c.GenerateDataKeyWithoutPlaintext(ctx, &awskms.GenerateDataKeyWithoutPlaintextInput{KeyId: aws.String(keyARN), NumberOfBytes: aws.Int32(64)})
	if err != nil || aws.ToString(wp.KeyId) != keyARN {
		t.Fatalf("GenerateDataKeyWithoutPlaintext = %v, %+v", err, wp)
	}
	if dec, err := c.Decrypt(ctx, &awskms.DecryptInput{CiphertextBlob: wp.CiphertextBlob}); err != nil || len(dec.Plaintext) != 64 {
		t.Fatalf("Decrypt of the data key made without its plaintext = %v", err)
	}

	// Importing key material is not served: the SDK surfaces AWS's
	// UnsupportedOperationException as the operation's modelled error or
	// a generic APIError.
	if _, err := c.GetParametersForImport(ctx, &awskms.GetParametersForImportInput{KeyId: made.KeyMetadata.KeyId,
		WrappingAlgorithm: "RSAES_OAEP_SHA_256", WrappingKeySpec: "RSA_2048"}); errorCode(err) != "UnsupportedOperationException" {
		t.Errorf("GetParametersForImport = %v, want UnsupportedOperationException", err)
	}
}

// TestSDKRefusals: a wrong secret, an unknown access key and an API key
// without the flag are refused with AWS's own errors, as AWS's SDK
// surfaces them.
func TestSDKRefusals(t *testing.T) {
	in := harness.New(t)
	p := in.Start(t, "-aws-kms")
	k := in.NewAPIKey(t, p, "keyring.*.read")
	ctx := context.Background()
	for _, tc := range []struct{ name, id, secret, want string }{
		{"a wrong secret", k.KeyID, k.Key + "x", "InvalidSignatureException"},
		{"an unknown access key", "0123456789abcdef0123456789abcdef", k.Key, "UnrecognizedClientException"},
	} {
		if _, err := sdkClient(p, tc.id, tc.secret).ListKeys(ctx, &awskms.ListKeysInput{}); errorCode(err) != tc.want {
			t.Errorf("ListKeys with %s = %v, want %s", tc.name, err, tc.want)
		}
	}
	c := sdkClient(p, k.KeyID, k.Key)
	if _, err := c.CreateKey(ctx, &awskms.CreateKeyInput{}); errorCode(err) != "AccessDeniedException" {
		t.Errorf("CreateKey without the flag = %v, want AccessDeniedException", err)
	}
	if _, err := c.ListKeys(ctx, &awskms.ListKeysInput{}); err != nil {
		t.Errorf("ListKeys with the read flag = %v", err)
	}
}

// TestSDKSessionToken: a User signed in to kmsd calls it with AWS's SDK
// as with temporary credentials: its ID as the access key, its access
// token as both the secret and the session token. It acts with its own
// flags; once it logs out, the token is refused.
func TestSDKSessionToken(t *testing.T) {
	in := harness.New(t)
	p := in.Start(t, "-aws-kms")
	ctx := context.Background()
	root := harness.Client(t, p, in.Bootstrap)
	u, err := root.CreateUser(ctx, kms.UserInput{Username: "ann", Email: "ann@example.com", FirstName: "Ann", LastName: "Lee",
		Flags: kms.Flags{"keyring.*.create": true, "keyring.*.encrypt": true, "keyring.*.decrypt": true}})
	if err != nil {
		t.Fatal(err)
	}
	login, err := root.Login(ctx, kms.LoginInput{Username: "ann", Password: u.Password})
	if err != nil {
		t.Fatal(err)
	}
	c := sessionClient(p, u.User.ID, login.AccessToken, login.AccessToken)
	key, err := c.CreateKey(ctx, &awskms.CreateKeyInput{})
	if err != nil {
		t.Fatalf("CreateKey with a session token = %v", err)
	}
	enc, err := c.Encrypt(ctx, &awskms.EncryptInput{KeyId: key.KeyMetadata.KeyId, Plaintext: []byte("p")})
	if err != nil {
		t.Fatalf("Encrypt with a session token = %v", err)
	}
	if dec, err := c.Decrypt(ctx, &awskms.DecryptInput{CiphertextBlob: enc.CiphertextBlob}); err != nil || string(dec.Plaintext) != "p" {
		t.Fatalf("Decrypt with a session token = %v", err)
	}
	if _, err := c.ListKeys(ctx, &awskms.ListKeysInput{}); errorCode(err) != "AccessDeniedException" {
		t.Errorf("ListKeys without the flag = %v, want AccessDeniedException", err)
	}
	if _, err := sessionClient(p, u.User.ID, "another secret", login.AccessToken).Encrypt(ctx,
		&awskms.EncryptInput{KeyId: key.KeyMetadata.KeyId, Plaintext: []byte("p")}); errorCode(err) != "InvalidSignatureException" {
		t.Errorf("Encrypt signed with another secret = %v, want InvalidSignatureException", err)
	}
	user, err := client.New(p.URL, client.WithToken(login.AccessToken))
	if err != nil {
		t.Fatal(err)
	}
	if err := user.Logout(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Encrypt(ctx, &awskms.EncryptInput{KeyId: key.KeyMetadata.KeyId, Plaintext: []byte("p")}); errorCode(err) != "UnrecognizedClientException" {
		t.Errorf("Encrypt with a token logged out = %v, want UnrecognizedClientException", err)
	}
}
