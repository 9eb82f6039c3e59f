package awskms

import (
	"fmt"
	"strings"

	"github.com/ringkms/kms"
)

// The most a plaintext may have, as in AWS KMS.
const maxPlaintext = 4096

// operations are the operations served, by name.
var operations = map[string]operation{
	"CreateKey":                       createKey,
	"DescribeKey":                     describeKey,
	"ListKeys":                        listKeys,
	"Encrypt":                         encrypt,
	"Decrypt":                         decrypt,
	"ReEncrypt":                       reEncrypt,
	"GenerateDataKey":                 generateDataKey(true),
	"GenerateDataKeyWithoutPlaintext": generateDataKey(false),
	"Sign":                            produce(false),
	"Verify":                          check(false),
	"GenerateMac":                     produce(true),
	"VerifyMac":                       check(true),
	"GetPublicKey":                    getPublicKey,
	"EnableKeyRotation":               setRotation(true),
	"DisableKeyRotation":              setRotation(false),
	"EnableKey":                       setState(true),
	"DisableKey":                      setState(false),
	"ScheduleKeyDeletion":             scheduleKeyDeletion,
	"CancelKeyDeletion":               cancelKeyDeletion,
	"TagResource":                     tagging(false),
	"UntagResource":                   tagging(true),
	"ListResourceTags":                listResourceTags,
	"CreateAlias":                     setAlias(false),
	"UpdateAlias":                     setAlias(true),
	"DeleteAlias":                     deleteAlias,
	"ListAliases":                     listAliases,
	"GenerateRandom":                  generateRandom,
	"GetKeyRotationStatus":            getKeyRotationStatus,
	"RotateKeyOnDemand":               rotateKeyOnDemand,
	"ListKeyRotations":                listKeyRotations,
}

// seal encrypts plain with the key name (or alias) under ctx, answering
// the blob and the name of the key that made it.
func (a *api) seal(c *call, name string, plain []byte, ctx map[string]string) ([]byte, string, error) {
	res, err := a.svc.EncryptWithHeldKey(c.r.Context(), kms.HeldEncryptInput{Name: name,
		Items: []kms.HeldPlaintext{{Plaintext: plain, AssociatedData: contextAAD(ctx)}}})
	if err != nil { // the key, its type, the caller's flag
		return nil, "", err
	}
	if err := res[0].Err; err != nil {
		return nil, "", err
	}
	return marshalBlob(res[0].Key, res[0].KeyVersion, res[0].Ciphertext), res[0].Key, nil
}

// open decrypts blob under ctx with the key it names, or with the key
// (or alias) want when given, which must be the blob's key
// (IncorrectKeyException otherwise), answering the plaintext and the
// key's name.
func (a *api) open(c *call, blob []byte, want string, ctx map[string]string) ([]byte, string, error) {
	name, version, sealed, err := unmarshalBlob(blob)
	if err != nil {
		return nil, "", err
	}
	with := name
	if want != "" {
		if with, err = keyName(want); err != nil {
			return nil, "", err
		}
	}
	res, err := a.svc.DecryptWithHeldKey(c.r.Context(), kms.HeldDecryptInput{Name: with,
		Items: []kms.HeldSealed{{KeyVersion: version, Ciphertext: sealed, AssociatedData: contextAAD(ctx)}}})
	if err != nil { // the key, its type, the caller's flag
		return nil, "", err
	}
	it := res[0]
	switch {
	case !strings.EqualFold(it.Key, name):
		clear(it.Plaintext)
		return nil, "", fail("IncorrectKeyException", "the ciphertext was not made with the key that KeyId names")
	case it.Err != nil && (kms.ErrorKind(it.Err) == kms.KindUnprocessable || kms.ErrorKind(it.Err) == kms.KindInvalid):
		return nil, "", fail("InvalidCiphertextException", "the ciphertext does not open under its key and this encryption context: it was altered, or made with another context")
	case it.Err != nil:
		return nil, "", it.Err
	}
	return it.Plaintext, name, nil
}

func encrypt(a *api, c *call) (any, error) {
	var in struct {
		KeyId             string
		Plaintext         []byte
		EncryptionContext map[string]string
	}
	name, err := c.named(&in, &in.KeyId)
	if err != nil {
		return nil, err
	}
	if n := len(in.Plaintext); n == 0 || n > maxPlaintext {
		return nil, fail("ValidationException", fmt.Sprintf("Plaintext must have 1 to %d bytes, not %d", maxPlaintext, n))
	}
	blob, key, err := a.seal(c, name, in.Plaintext, in.EncryptionContext)
	clear(in.Plaintext)
	if err != nil {
		return nil, err
	}
	return map[string]any{"CiphertextBlob": blob, "KeyId": arn(c.region, key), "EncryptionAlgorithm": "SYMMETRIC_DEFAULT"}, nil
}

func decrypt(a *api, c *call) (any, error) {
	var in struct {
		KeyId             string
		CiphertextBlob    []byte
		EncryptionContext map[string]string
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	plain, name, err := a.open(c, in.CiphertextBlob, in.KeyId, in.EncryptionContext)
	if err != nil {
		return nil, err
	}
	return map[string]any{"Plaintext": plain, "KeyId": arn(c.region, name), "EncryptionAlgorithm": "SYMMETRIC_DEFAULT"}, nil
}

func reEncrypt(a *api, c *call) (any, error) {
	var in struct {
		CiphertextBlob               []byte
		SourceKeyId                  string
		SourceEncryptionContext      map[string]string
		DestinationKeyId             string
		DestinationEncryptionContext map[string]string
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	dest, err := keyName(in.DestinationKeyId)
	if err != nil {
		return nil, err
	}
	plain, source, err := a.open(c, in.CiphertextBlob, in.SourceKeyId, in.SourceEncryptionContext)
	if err != nil {
		return nil, err
	}
	blob, destKey, err := a.seal(c, dest, plain, in.DestinationEncryptionContext)
	clear(plain)
	if err != nil {
		return nil, err
	}
	return map[string]any{"CiphertextBlob": blob, "SourceKeyId": arn(c.region, source), "KeyId": arn(c.region, destKey),
		"SourceEncryptionAlgorithm": "SYMMETRIC_DEFAULT", "DestinationEncryptionAlgorithm": "SYMMETRIC_DEFAULT"}, nil
}

// generateDataKey is GenerateDataKey, or without its plaintext
// GenerateDataKeyWithoutPlaintext.
func generateDataKey(withPlaintext bool) operation {
	return func(a *api, c *call) (any, error) {
		var in struct {
			KeyId             string
			KeySpec           string
			NumberOfBytes     int
			EncryptionContext map[string]string
		}
		if err := c.decode(&in); err != nil {
			return nil, err
		}
		bits := 0
		switch {
		case in.KeySpec != "" && in.NumberOfBytes != 0:
			return nil, fail("ValidationException", "give KeySpec or NumberOfBytes, not both")
		case in.KeySpec == "AES_256":
			bits = 256
		case in.KeySpec == "AES_128":
			bits = 128
		case in.KeySpec != "":
			return nil, fail("ValidationException", fmt.Sprintf("KeySpec %q: use AES_256 or AES_128", in.KeySpec))
		case in.NumberOfBytes == 16 || in.NumberOfBytes == 32 || in.NumberOfBytes == 64:
			bits = in.NumberOfBytes * 8
		default:
			return nil, fail("ValidationException", "give KeySpec (AES_256, AES_128) or NumberOfBytes (16, 32 or 64)")
		}
		name, err := keyName(in.KeyId)
		if err != nil {
			return nil, err
		}
		dk, err := a.svc.GenerateHeldDataKey(c.r.Context(), kms.HeldDataKeyInput{Name: name, Bits: bits,
			AssociatedData: contextAAD(in.EncryptionContext), Plaintext: withPlaintext})
		if err != nil {
			return nil, err
		}
		out := map[string]any{"CiphertextBlob": marshalBlob(dk.Key, dk.KeyVersion, dk.Ciphertext), "KeyId": arn(c.region, dk.Key)}
		if withPlaintext {
			out["Plaintext"] = dk.Plaintext
		}
		return out, nil
	}
}

func generateRandom(a *api, c *call) (any, error) {
	var in struct{ NumberOfBytes int }
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	b, err := a.svc.GenerateRandom(c.r.Context(), in.NumberOfBytes)
	if err != nil {
		return nil, err
	}
	return map[string]any{"Plaintext": b}, nil
}
