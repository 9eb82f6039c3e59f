package awskms

import (
	"fmt"
	"strings"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/ids"
)

// keySpecs maps AWS's KeySpec onto the held keys' types and parameters.
var keySpecs = map[string]kms.CreateHeldKeyInput{
	"SYMMETRIC_DEFAULT": {Type: "aes256-gcm96"},
	"HMAC_256":          {Type: "hmac", KeySize: 32},
	"ECC_NIST_P256":     {Type: "ecdsa-p256"},
	"ECC_NIST_P384":     {Type: "ecdsa-p384"},
	"RSA_2048":          {Type: "rsa-2048"},
	"RSA_3072":          {Type: "rsa-3072"},
	"RSA_4096":          {Type: "rsa-4096"},
	"ML_DSA_65":         {Type: "ml-dsa", ParameterSet: "65"},
}

// specOf is the KeySpec of a held key, and the KeyUsage it serves.
func specOf(k *kms.HeldKey) (spec, usage string) {
	switch {
	case k.Type == "aes256-gcm96":
		return "SYMMETRIC_DEFAULT", "ENCRYPT_DECRYPT"
	case k.Type == "hmac":
		return fmt.Sprintf("HMAC_%d", k.KeySize*8), "GENERATE_VERIFY_MAC"
	case k.Type == "ecdsa-p256":
		return "ECC_NIST_P256", "SIGN_VERIFY"
	case k.Type == "ecdsa-p384":
		return "ECC_NIST_P384", "SIGN_VERIFY"
	case strings.HasPrefix(k.Type, "rsa-"):
		return "RSA_" + strings.TrimPrefix(k.Type, "rsa-"), "SIGN_VERIFY"
	case k.Type == "ml-dsa":
		return "ML_DSA_" + k.ParameterSet, "SIGN_VERIFY"
	}
	return strings.ToUpper(strings.ReplaceAll(k.Type, "-", "_")), "ENCRYPT_DECRYPT"
}

// keyName is the held key (or alias: the service resolves it) that a
// KeyId names: a KeyId, alias/<name>, or the ARN of either,
// arn:aws:kms:<region>:<account>:key/<KeyId> or ...:alias/<name>.
func keyName(id string) (string, error) {
	if id == "" {
		return "", fail("ValidationException", "KeyId is required")
	}
	if rest, ok := strings.CutPrefix(id, "arn:"); ok {
		parts := strings.SplitN(rest, ":", 5)
		if len(parts) != 5 || parts[1] != "kms" {
			return "", fail("NotFoundException", "KeyId is not a key ARN of AWS KMS")
		}
		if name, ok := strings.CutPrefix(parts[4], "key/"); ok && name != "" {
			return name, nil
		}
		id = parts[4]
	}
	if strings.HasPrefix(id, aliasPrefix) {
		return aliasName(id)
	}
	if strings.Contains(id, "/") {
		return "", fail("NotFoundException", "KeyId is neither a key ID, an alias/ name nor the ARN of either")
	}
	return id, nil
}

// arn is the ARN of the key name in region.
func arn(region, name string) string {
	return "arn:aws:kms:" + region + ":" + accountID + ":key/" + name
}

// keyMetadata is AWS's KeyMetadata of k.
type keyMetadata struct {
	AWSAccountID          string   `json:"AWSAccountId"`
	KeyID                 string   `json:"KeyId"`
	Arn                   string   `json:"Arn"`
	CreationDate          float64  `json:"CreationDate"`
	Enabled               bool     `json:"Enabled"`
	Description           string   `json:"Description"`
	KeyUsage              string   `json:"KeyUsage"`
	KeyState              string   `json:"KeyState"`
	Origin                string   `json:"Origin"`
	KeyManager            string   `json:"KeyManager"`
	CustomerMasterKeySpec string   `json:"CustomerMasterKeySpec"`
	KeySpec               string   `json:"KeySpec"`
	EncryptionAlgorithms  []string `json:"EncryptionAlgorithms,omitempty"`
	SigningAlgorithms     []string `json:"SigningAlgorithms,omitempty"`
	MacAlgorithms         []string `json:"MacAlgorithms,omitempty"`
	MultiRegion           bool     `json:"MultiRegion"`
	DeletionDate          float64  `json:"DeletionDate,omitempty"`
}

func metadata(region string, k *kms.HeldKey) keyMetadata {
	spec, usage := specOf(k)
	state := keyStates[k.State]
	m := keyMetadata{AWSAccountID: accountID, KeyID: k.Name, Arn: arn(region, k.Name), Enabled: state == "Enabled",
		Description: k.Description, KeyUsage: usage, KeyState: state, Origin: "AWS_KMS", KeyManager: "CUSTOMER",
		CustomerMasterKeySpec: spec, KeySpec: spec, CreationDate: epoch(k.CreatedAt)}
	if !k.DeletionDate.IsZero() {
		m.DeletionDate = epoch(k.DeletionDate)
	}
	switch usage {
	case "ENCRYPT_DECRYPT":
		m.EncryptionAlgorithms = []string{"SYMMETRIC_DEFAULT"}
	case "GENERATE_VERIFY_MAC":
		m.MacAlgorithms = []string{macAlgorithm(k)}
	case "SIGN_VERIFY":
		m.SigningAlgorithms = signingAlgorithms(spec)
	}
	return m
}

func createKey(a *api, c *call) (any, error) {
	var in struct {
		KeySpec     string
		KeyUsage    string
		Description string
		Tags        []tag
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	if in.KeySpec == "" {
		in.KeySpec = "SYMMETRIC_DEFAULT"
	}
	create, ok := keySpecs[in.KeySpec]
	if !ok {
		return nil, fail("ValidationException", fmt.Sprintf("KeySpec %q is not served; the specs served are SYMMETRIC_DEFAULT, HMAC_256, ECC_NIST_P256, ECC_NIST_P384, RSA_2048, RSA_3072, RSA_4096 and ML_DSA_65", in.KeySpec))
	}
	if _, usage := specOf(&kms.HeldKey{Type: create.Type, KeySize: create.KeySize, ParameterSet: create.ParameterSet}); in.KeyUsage != "" && in.KeyUsage != usage {
		return nil, fail("ValidationException", fmt.Sprintf("KeyUsage %s does not go with KeySpec %s, whose usage is %s", in.KeyUsage, in.KeySpec, usage))
	}
	create.Name, create.Description = ids.New(a.now()), in.Description
	if len(in.Tags) > 0 {
		create.Tags = make(map[string]string, len(in.Tags))
		for _, t := range in.Tags {
			create.Tags[t.TagKey] = t.TagValue
		}
	}
	k, err := a.svc.CreateHeldKey(c.r.Context(), create)
	if err != nil {
		return nil, err
	}
	return map[string]any{"KeyMetadata": metadata(c.region, k)}, nil
}

func describeKey(a *api, c *call) (any, error) {
	_, k, err := a.held(c)
	if err != nil {
		return nil, err
	}
	return map[string]any{"KeyMetadata": metadata(c.region, k)}, nil
}

func listKeys(a *api, c *call) (any, error) {
	names, err := a.svc.ListHeldKeys(c.r.Context())
	if err != nil {
		return nil, err
	}
	type entry struct{ KeyId, KeyArn string }
	out := make([]entry, 0, len(names))
	for _, n := range names {
		out = append(out, entry{n, arn(c.region, n)})
	}
	return map[string]any{"Keys": out, "Truncated": false}, nil
}
