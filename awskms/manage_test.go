package awskms_test

import (
	"testing"

	"github.com/ringkms/kms"
)

// A key disabled refuses its uses (DisabledException) and enabled again
// serves; scheduled for deletion it is PendingDeletion, and cancelled it
// is left Disabled.
func TestKeyStateAndDeletion(t *testing.T) {
	c, _ := newClient(t, kms.Flags{"*": true})
	id := c.makeKey(t, "SYMMETRIC_DEFAULT")
	encrypt := func() string {
		_, typ := c.do(t, "Encrypt", map[string]any{"KeyId": id, "Plaintext": []byte("x")}, nil)
		return typ
	}
	state := func() (string, bool) {
		var d struct {
			KeyMetadata struct {
				KeyState string
				Enabled  bool
			}
		}
		c.do(t, "DescribeKey", map[string]any{"KeyId": id}, &d)
		return d.KeyMetadata.KeyState, d.KeyMetadata.Enabled
	}
	if code, typ := c.do(t, "DisableKey", map[string]any{"KeyId": id}, nil); code != 200 {
		t.Fatalf("DisableKey: %d %s", code, typ)
	}
	if typ := encrypt(); typ != "DisabledException" {
		t.Fatalf("Encrypt with a disabled key: %q", typ)
	}
	if s, on := state(); s != "Disabled" || on {
		t.Fatalf("DescribeKey of a disabled key: %s %v", s, on)
	}
	c.do(t, "EnableKey", map[string]any{"KeyId": id}, nil)
	if typ := encrypt(); typ != "" {
		t.Fatalf("Encrypt enabled again: %q", typ)
	}
	if _, typ := c.do(t, "ScheduleKeyDeletion", map[string]any{"KeyId": id, "PendingWindowInDays": 6}, nil); typ != "ValidationException" {
		t.Errorf("a window of 6 days: %q", typ)
	}
	var sched struct {
		KeyState            string
		PendingWindowInDays int
		DeletionDate        float64
	}
	if code, typ := c.do(t, "ScheduleKeyDeletion", map[string]any{"KeyId": id, "PendingWindowInDays": 7}, &sched); code != 200 || sched.KeyState != "PendingDeletion" || sched.DeletionDate == 0 {
		t.Fatalf("ScheduleKeyDeletion: %d %s %+v", code, typ, sched)
	}
	if typ := encrypt(); typ != "DisabledException" && typ != "KMSInvalidStateException" {
		t.Fatalf("Encrypt with a key pending deletion: %q", typ)
	}
	if _, typ := c.do(t, "EnableKey", map[string]any{"KeyId": id}, nil); typ != "KMSInvalidStateException" {
		t.Errorf("EnableKey of a key pending deletion: %q", typ)
	}
	if code, typ := c.do(t, "CancelKeyDeletion", map[string]any{"KeyId": id}, nil); code != 200 {
		t.Fatalf("CancelKeyDeletion: %d %s", code, typ)
	}
	if s, _ := state(); s != "Disabled" {
		t.Fatalf("a key whose deletion was cancelled is %s, want Disabled", s)
	}
	if _, typ := c.do(t, "CancelKeyDeletion", map[string]any{"KeyId": id}, nil); typ != "KMSInvalidStateException" {
		t.Errorf("CancelKeyDeletion of a key not pending deletion: %q, want KMSInvalidStateException", typ)
	}
}

// Tags and aliases: an alias names its key wherever a KeyId goes.
func TestTagsAndAliases(t *testing.T) {
	c, _ := newClient(t, kms.Flags{"*": true})
	var made struct {
		KeyMetadata struct{ KeyId, Description string }
	}
	c.do(t, "CreateKey", map[string]any{"Description": "for the test", "Tags": []map[string]string{{"TagKey": "team", "TagValue": "a"}}}, &made)
	id := made.KeyMetadata.KeyId
	if made.KeyMetadata.Description != "for the test" {
		t.Errorf("CreateKey's description: %q", made.KeyMetadata.Description)
	}
	c.do(t, "TagResource", map[string]any{"KeyId": id, "Tags": []map[string]string{{"TagKey": "env", "TagValue": "prod"}}}, nil)
	c.do(t, "UntagResource", map[string]any{"KeyId": id, "TagKeys": []string{"team"}}, nil)
	var tags struct {
		Tags []struct{ TagKey, TagValue string }
	}
	if c.do(t, "ListResourceTags", map[string]any{"KeyId": id}, &tags); len(tags.Tags) != 1 || tags.Tags[0].TagKey != "env" || tags.Tags[0].TagValue != "prod" {
		t.Fatalf("ListResourceTags = %+v", tags)
	}

	if code, typ := c.do(t, "CreateAlias", map[string]any{"AliasName": "alias/app", "TargetKeyId": id}, nil); code != 200 {
		t.Fatalf("CreateAlias: %d %s", code, typ)
	}
	var enc struct{ CiphertextBlob []byte }
	if code, typ := c.do(t, "Encrypt", map[string]any{"KeyId": "alias/app", "Plaintext": []byte("x")}, &enc); code != 200 {
		t.Fatalf("Encrypt by alias: %d %s", code, typ)
	}
	if code, typ := c.do(t, "Decrypt", map[string]any{"KeyId": "arn:aws:kms:eu-west-3:000000000000:alias/app", "CiphertextBlob": enc.CiphertextBlob}, nil); code != 200 {
		t.Fatalf("Decrypt naming the alias's ARN: %d %s", code, typ)
	}
	other := c.makeKey(t, "SYMMETRIC_DEFAULT")
	if code, typ := c.do(t, "UpdateAlias", map[string]any{"AliasName": "alias/app", "TargetKeyId": other}, nil); code != 200 {
		t.Fatalf("UpdateAlias: %d %s", code, typ)
	}
	var list struct {
		Aliases []struct{ AliasName, TargetKeyId string }
	}
	if c.do(t, "ListAliases", map[string]any{}, &list); len(list.Aliases) != 1 || list.Aliases[0].AliasName != "alias/app" || list.Aliases[0].TargetKeyId != other {
		t.Fatalf("ListAliases = %+v", list)
	}
	if _, typ := c.do(t, "Decrypt", map[string]any{"KeyId": "alias/app", "CiphertextBlob": enc.CiphertextBlob}, nil); typ != "IncorrectKeyException" {
		t.Errorf("Decrypt naming the alias, now of another key: %q", typ)
	}
	for _, bad := range []string{"app", "alias/", "alias/aws/s3"} {
		if code, _ := c.do(t, "CreateAlias", map[string]any{"AliasName": bad, "TargetKeyId": id}, nil); code == 200 {
			t.Errorf("CreateAlias %q succeeded", bad)
		}
	}
	c.do(t, "DeleteAlias", map[string]any{"AliasName": "alias/app"}, nil)
	if _, typ := c.do(t, "Encrypt", map[string]any{"KeyId": "alias/app", "Plaintext": []byte("x")}, nil); typ != "NotFoundException" {
		t.Errorf("Encrypt by a deleted alias: %q", typ)
	}
}

// GenerateRandom answers the bytes asked for, to a key with the flag.
func TestGenerateRandom(t *testing.T) {
	c, _ := newClient(t, kms.Flags{kms.FlagRandom: true})
	var out struct{ Plaintext []byte }
	if code, typ := c.do(t, "GenerateRandom", map[string]any{"NumberOfBytes": 64}, &out); code != 200 || len(out.Plaintext) != 64 {
		t.Fatalf("GenerateRandom: %d %s, %d bytes", code, typ, len(out.Plaintext))
	}
	if _, typ := c.do(t, "GenerateRandom", map[string]any{"NumberOfBytes": 0}, nil); typ != "ValidationException" {
		t.Errorf("GenerateRandom of 0 bytes: %q", typ)
	}
}

// AWS's own tag keys and page sizes past 100 are refused.
func TestManageLimits(t *testing.T) {
	c, _ := newClient(t, kms.Flags{"*": true})
	id := c.makeKey(t, "SYMMETRIC_DEFAULT")
	if _, typ := c.do(t, "TagResource", map[string]any{"KeyId": id, "Tags": []map[string]string{{"TagKey": "aws:owner", "TagValue": "x"}}}, nil); typ != "TagException" {
		t.Errorf("a tag key of aws: = %q", typ)
	}
	if _, typ := c.do(t, "ListAliases", map[string]any{"Limit": 101}, nil); typ != "ValidationException" {
		t.Errorf("ListAliases with Limit 101 = %q", typ)
	}
}

// GetPublicKey of a disabled key, a DIGEST of the wrong size and a Marker
// that no page answered are refused as AWS refuses them.
func TestAWSRefusals(t *testing.T) {
	c, _ := newClient(t, kms.Flags{"*": true})
	id := c.makeKey(t, "ECC_NIST_P256")
	if _, typ := c.do(t, "Sign", map[string]any{"KeyId": id, "Message": make([]byte, 48), "MessageType": "DIGEST", "SigningAlgorithm": "ECDSA_SHA_256"}, nil); typ != "ValidationException" {
		t.Errorf("a 48-byte DIGEST for ECDSA_SHA_256: %q", typ)
	}
	c.do(t, "DisableKey", map[string]any{"KeyId": id}, nil)
	if _, typ := c.do(t, "GetPublicKey", map[string]any{"KeyId": id}, nil); typ != "DisabledException" {
		t.Errorf("GetPublicKey of a disabled key: %q", typ)
	}
	if _, typ := c.do(t, "ListAliases", map[string]any{"Marker": "not-a-marker"}, nil); typ != "InvalidMarkerException" {
		t.Errorf("ListAliases with a made-up Marker: %q", typ)
	}
}
