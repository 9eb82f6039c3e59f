package awskms_test

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskms "github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"
)

// newSymmetricKey makes a SYMMETRIC_DEFAULT key and answers its ID and
// ARN.
func newSymmetricKey(t *testing.T, c *awskms.Client) (id, keyARN string) {
	t.Helper()
	made, err := c.CreateKey(context.Background(), &awskms.CreateKeyInput{})
	if err != nil {
		t.Fatalf("CreateKey = %v", err)
	}
	return aws.ToString(made.KeyMetadata.KeyId), aws.ToString(made.KeyMetadata.Arn)
}

// encrypt encrypts plain with the key that keyID names (its ID, ARN or
// an alias), which must be the key wantARN, and answers the blob.
func encrypt(t *testing.T, c *awskms.Client, keyID string, plain []byte, wantARN string) []byte {
	t.Helper()
	enc, err := c.Encrypt(context.Background(), &awskms.EncryptInput{KeyId: aws.String(keyID), Plaintext: plain})
	if err != nil || aws.ToString(enc.KeyId) != wantARN {
		t.Fatalf("Encrypt with %s = %v, %+v, want the key %s", keyID, err, enc, wantARN)
	}
	return enc.CiphertextBlob
}

// near is whether t is within a day of want: dates that kmsd computes
// from the clock, checked without depending on when the test runs.
func near(t *time.Time, want time.Time) bool {
	return t != nil && t.Sub(want).Abs() < 24*time.Hour
}

// TestSDKRotation: AWS's SDK for Go enables a symmetric key's rotation
// with a period, reads its status, rotates it on demand and lists the
// rotation; a blob from before the rotation still decrypts. HMAC and
// asymmetric keys do not rotate (UnsupportedOperationException).
func TestSDKRotation(t *testing.T) {
	c := sdkKit(t)
	ctx := context.Background()
	id, keyARN := newSymmetricKey(t, c)
	plain := []byte("written before the rotation")
	before := encrypt(t, c, id, plain, keyARN)

	st, err := c.GetKeyRotationStatus(ctx, &awskms.GetKeyRotationStatusInput{KeyId: aws.String(id)})
	if err != nil || st.KeyRotationEnabled || st.RotationPeriodInDays != nil {
		t.Fatalf("GetKeyRotationStatus of a new key = %v, %+v", err, st)
	}
	if _, err := c.EnableKeyRotation(ctx, &awskms.EnableKeyRotationInput{KeyId: aws.String(id), RotationPeriodInDays: aws.Int32(89)}); errorCode(err) != "ValidationException" {
		t.Errorf("EnableKeyRotation with 89 days = %v, want ValidationException", err)
	}
	if _, err := c.EnableKeyRotation(ctx, &awskms.EnableKeyRotationInput{KeyId: aws.String(keyARN), RotationPeriodInDays: aws.Int32(90)}); err != nil {
		t.Fatalf("EnableKeyRotation = %v", err)
	}
	st, err = c.GetKeyRotationStatus(ctx, &awskms.GetKeyRotationStatusInput{KeyId: aws.String(id)})
	if err != nil || !st.KeyRotationEnabled || aws.ToInt32(st.RotationPeriodInDays) != 90 || aws.ToString(st.KeyId) != keyARN ||
		!near(st.NextRotationDate, time.Now().Add(90*24*time.Hour)) {
		t.Fatalf("GetKeyRotationStatus = %v, %+v", err, st)
	}

	rot, err := c.RotateKeyOnDemand(ctx, &awskms.RotateKeyOnDemandInput{KeyId: aws.String(id)})
	if err != nil || aws.ToString(rot.KeyId) != keyARN {
		t.Fatalf("RotateKeyOnDemand = %v, %+v", err, rot)
	}
	rots, err := c.ListKeyRotations(ctx, &awskms.ListKeyRotationsInput{KeyId: aws.String(keyARN)})
	if err != nil || len(rots.Rotations) != 1 || rots.Truncated {
		t.Fatalf("ListKeyRotations = %v, %+v, want one rotation", err, rots)
	}
	if r := rots.Rotations[0]; aws.ToString(r.KeyId) != keyARN || !near(r.RotationDate, time.Now()) {
		t.Errorf("ListKeyRotations' rotation = KeyId %s, RotationDate %v", aws.ToString(r.KeyId), r.RotationDate)
	}
	after := encrypt(t, c, id, plain, keyARN)
	for what, blob := range map[string][]byte{"from before the rotation": before, "from after it": after} {
		dec, err := c.Decrypt(ctx, &awskms.DecryptInput{CiphertextBlob: blob})
		if err != nil || !bytes.Equal(dec.Plaintext, plain) || aws.ToString(dec.KeyId) != keyARN {
			t.Errorf("Decrypt of a blob %s = %v", what, err)
		}
	}

	if _, err := c.DisableKeyRotation(ctx, &awskms.DisableKeyRotationInput{KeyId: aws.String(id)}); err != nil {
		t.Fatalf("DisableKeyRotation = %v", err)
	}
	if st, err := c.GetKeyRotationStatus(ctx, &awskms.GetKeyRotationStatusInput{KeyId: aws.String(id)}); err != nil || st.KeyRotationEnabled {
		t.Fatalf("GetKeyRotationStatus after DisableKeyRotation = %v, %+v", err, st)
	}
	// A rotation on demand does not need the scheduled one.
	if _, err := c.RotateKeyOnDemand(ctx, &awskms.RotateKeyOnDemandInput{KeyId: aws.String(id)}); err != nil {
		t.Fatalf("RotateKeyOnDemand with rotation disabled = %v", err)
	}
	if rots, err := c.ListKeyRotations(ctx, &awskms.ListKeyRotationsInput{KeyId: aws.String(id)}); err != nil || len(rots.Rotations) != 2 {
		t.Fatalf("ListKeyRotations after a second rotation = %v, %+v", err, rots)
	}
	if dec, err := c.Decrypt(ctx, &awskms.DecryptInput{CiphertextBlob: before}); err != nil || !bytes.Equal(dec.Plaintext, plain) {
		t.Errorf("Decrypt of the first blob after two rotations = %v", err)
	}

	for _, spec := range []types.KeySpec{types.KeySpecHmac256, types.KeySpecEccNistP256} {
		made, err := c.CreateKey(ctx, &awskms.CreateKeyInput{KeySpec: spec})
		if err != nil {
			t.Fatalf("CreateKey %s = %v", spec, err)
		}
		if _, err := c.EnableKeyRotation(ctx, &awskms.EnableKeyRotationInput{KeyId: made.KeyMetadata.KeyId}); !errors.As(err, new(*types.UnsupportedOperationException)) {
			t.Errorf("EnableKeyRotation of a %s key = %v, want UnsupportedOperationException", spec, err)
		}
		if _, err := c.RotateKeyOnDemand(ctx, &awskms.RotateKeyOnDemandInput{KeyId: made.KeyMetadata.KeyId}); !errors.As(err, new(*types.UnsupportedOperationException)) {
			t.Errorf("RotateKeyOnDemand of a %s key = %v, want UnsupportedOperationException", spec, err)
		}
	}
	if _, err := c.GetKeyRotationStatus(ctx, &awskms.GetKeyRotationStatusInput{KeyId: aws.String("0123456789abcdef0123456789abcdef")}); !errors.As(err, new(*types.NotFoundException)) {
		t.Errorf("GetKeyRotationStatus of no key = %v, want NotFoundException", err)
	}
}

// TestSDKKeyState: AWS's SDK for Go disables a key (Encrypt is then
// DisabledException) and enables it again; a key scheduled for deletion
// is PendingDeletion with its DeletionDate and refuses its uses, and the
// deletion cancelled leaves it Disabled.
func TestSDKKeyState(t *testing.T) {
	c := sdkKit(t)
	ctx := context.Background()
	id, keyARN := newSymmetricKey(t, c)
	plain := []byte("x")
	blob := encrypt(t, c, id, plain, keyARN)
	describe := func() *types.KeyMetadata {
		t.Helper()
		d, err := c.DescribeKey(ctx, &awskms.DescribeKeyInput{KeyId: aws.String(id)})
		if err != nil {
			t.Fatalf("DescribeKey = %v", err)
		}
		return d.KeyMetadata
	}

	if _, err := c.DisableKey(ctx, &awskms.DisableKeyInput{KeyId: aws.String(keyARN)}); err != nil {
		t.Fatalf("DisableKey = %v", err)
	}
	if m := describe(); m.KeyState != types.KeyStateDisabled || m.Enabled {
		t.Fatalf("DescribeKey of a disabled key: KeyState %s, Enabled %v", m.KeyState, m.Enabled)
	}
	if _, err := c.Encrypt(ctx, &awskms.EncryptInput{KeyId: aws.String(id), Plaintext: plain}); !errors.As(err, new(*types.DisabledException)) {
		t.Fatalf("Encrypt with a disabled key = %v, want DisabledException", err)
	}
	if _, err := c.Decrypt(ctx, &awskms.DecryptInput{CiphertextBlob: blob}); !errors.As(err, new(*types.DisabledException)) {
		t.Errorf("Decrypt with a disabled key = %v, want DisabledException", err)
	}
	if _, err := c.EnableKey(ctx, &awskms.EnableKeyInput{KeyId: aws.String(id)}); err != nil {
		t.Fatalf("EnableKey = %v", err)
	}
	if m := describe(); m.KeyState != types.KeyStateEnabled || !m.Enabled {
		t.Fatalf("DescribeKey of a key enabled again: KeyState %s, Enabled %v", m.KeyState, m.Enabled)
	}
	if _, err := c.Encrypt(ctx, &awskms.EncryptInput{KeyId: aws.String(id), Plaintext: plain}); err != nil {
		t.Fatalf("Encrypt with the key enabled again = %v", err)
	}

	for _, days := range []int32{6, 31} {
		if _, err := c.ScheduleKeyDeletion(ctx, &awskms.ScheduleKeyDeletionInput{KeyId: aws.String(id), PendingWindowInDays: aws.Int32(days)}); errorCode(err) != "ValidationException" {
			t.Errorf("ScheduleKeyDeletion in %d days = %v, want ValidationException", days, err)
		}
	}
	if m := describe(); m.KeyState != types.KeyStateEnabled {
		t.Fatalf("a refused ScheduleKeyDeletion left the key %s", m.KeyState)
	}
	sched, err := c.ScheduleKeyDeletion(ctx, &awskms.ScheduleKeyDeletionInput{KeyId: aws.String(id), PendingWindowInDays: aws.Int32(7)})
	week := time.Now().Add(7 * 24 * time.Hour)
	if err != nil || aws.ToString(sched.KeyId) != keyARN || sched.KeyState != types.KeyStatePendingDeletion ||
		aws.ToInt32(sched.PendingWindowInDays) != 7 || !near(sched.DeletionDate, week) {
		t.Fatalf("ScheduleKeyDeletion in 7 days = %v, %+v", err, sched)
	}
	if m := describe(); m.KeyState != types.KeyStatePendingDeletion || m.Enabled || !near(m.DeletionDate, week) {
		t.Fatalf("DescribeKey of a key pending deletion: KeyState %s, Enabled %v, DeletionDate %v", m.KeyState, m.Enabled, m.DeletionDate)
	}
	if _, err := c.Encrypt(ctx, &awskms.EncryptInput{KeyId: aws.String(id), Plaintext: plain}); !errors.As(err, new(*types.KMSInvalidStateException)) {
		t.Fatalf("Encrypt with a key pending deletion = %v, want KMSInvalidStateException", err)
	}
	if _, err := c.Decrypt(ctx, &awskms.DecryptInput{CiphertextBlob: blob}); !errors.As(err, new(*types.KMSInvalidStateException)) {
		t.Fatalf("Decrypt with a key pending deletion = %v, want KMSInvalidStateException", err)
	}
	if _, err := c.EnableKey(ctx, &awskms.EnableKeyInput{KeyId: aws.String(id)}); !errors.As(err, new(*types.KMSInvalidStateException)) {
		t.Errorf("EnableKey of a key pending deletion = %v, want KMSInvalidStateException", err)
	}
	if m := describe(); m.KeyState != types.KeyStatePendingDeletion {
		t.Fatalf("a refused EnableKey left the key %s", m.KeyState)
	}

	cancelled, err := c.CancelKeyDeletion(ctx, &awskms.CancelKeyDeletionInput{KeyId: aws.String(keyARN)})
	if err != nil || aws.ToString(cancelled.KeyId) != keyARN {
		t.Fatalf("CancelKeyDeletion = %v, %+v", err, cancelled)
	}
	if m := describe(); m.KeyState != types.KeyStateDisabled || m.Enabled || m.DeletionDate != nil {
		t.Fatalf("DescribeKey of a key whose deletion was cancelled: KeyState %s, Enabled %v, DeletionDate %v, want Disabled without a date", m.KeyState, m.Enabled, m.DeletionDate)
	}
	if _, err := c.Encrypt(ctx, &awskms.EncryptInput{KeyId: aws.String(id), Plaintext: plain}); !errors.As(err, new(*types.DisabledException)) {
		t.Errorf("Encrypt with a key whose deletion was cancelled = %v, want DisabledException", err)
	}
	if _, err := c.EnableKey(ctx, &awskms.EnableKeyInput{KeyId: aws.String(id)}); err != nil {
		t.Fatalf("EnableKey after the deletion was cancelled = %v", err)
	}
	if dec, err := c.Decrypt(ctx, &awskms.DecryptInput{CiphertextBlob: blob}); err != nil || !bytes.Equal(dec.Plaintext, plain) {
		t.Fatalf("Decrypt once the key is enabled again = %v", err)
	}
	if _, err := c.DisableKey(ctx, &awskms.DisableKeyInput{KeyId: aws.String("0123456789abcdef0123456789abcdef")}); !errors.As(err, new(*types.NotFoundException)) {
		t.Errorf("DisableKey of no key = %v, want NotFoundException", err)
	}
}

// TestSDKTags: AWS's SDK for Go creates a key with a description and
// tags, adds, replaces and removes tags, and lists them.
func TestSDKTags(t *testing.T) {
	c := sdkKit(t)
	ctx := context.Background()
	made, err := c.CreateKey(ctx, &awskms.CreateKeyInput{Description: aws.String("the billing service's key"),
		Tags: []types.Tag{{TagKey: aws.String("team"), TagValue: aws.String("billing")}, {TagKey: aws.String("env"), TagValue: aws.String("staging")}}})
	if err != nil {
		t.Fatalf("CreateKey with tags = %v", err)
	}
	id := aws.ToString(made.KeyMetadata.KeyId)
	if d := aws.ToString(made.KeyMetadata.Description); d != "the billing service's key" {
		t.Errorf("CreateKey's Description = %q", d)
	}
	if d, err := c.DescribeKey(ctx, &awskms.DescribeKeyInput{KeyId: aws.String(id)}); err != nil || aws.ToString(d.KeyMetadata.Description) != "the billing service's key" {
		t.Errorf("DescribeKey's Description = %v, %+v", err, d)
	}
	tags := func() map[string]string {
		t.Helper()
		out, err := c.ListResourceTags(ctx, &awskms.ListResourceTagsInput{KeyId: made.KeyMetadata.Arn})
		if err != nil {
			t.Fatalf("ListResourceTags = %v", err)
		}
		m := map[string]string{}
		for _, tg := range out.Tags {
			m[aws.ToString(tg.TagKey)] = aws.ToString(tg.TagValue)
		}
		return m
	}
	if got, want := tags(), map[string]string{"team": "billing", "env": "staging"}; !maps.Equal(got, want) {
		t.Fatalf("ListResourceTags of the new key = %v, want %v", got, want)
	}
	if _, err := c.TagResource(ctx, &awskms.TagResourceInput{KeyId: aws.String(id),
		Tags: []types.Tag{{TagKey: aws.String("env"), TagValue: aws.String("prod")}, {TagKey: aws.String("cost-centre"), TagValue: aws.String("42")}}}); err != nil {
		t.Fatalf("TagResource = %v", err)
	}
	if got, want := tags(), map[string]string{"team": "billing", "env": "prod", "cost-centre": "42"}; !maps.Equal(got, want) {
		t.Fatalf("ListResourceTags after TagResource = %v, want %v", got, want)
	}
	if _, err := c.UntagResource(ctx, &awskms.UntagResourceInput{KeyId: aws.String(id), TagKeys: []string{"team", "cost-centre"}}); err != nil {
		t.Fatalf("UntagResource = %v", err)
	}
	if got, want := tags(), map[string]string{"env": "prod"}; !maps.Equal(got, want) {
		t.Fatalf("ListResourceTags after UntagResource = %v, want %v", got, want)
	}
	if _, err := c.TagResource(ctx, &awskms.TagResourceInput{KeyId: aws.String("0123456789abcdef0123456789abcdef"),
		Tags: []types.Tag{{TagKey: aws.String("a"), TagValue: aws.String("b")}}}); !errors.As(err, new(*types.NotFoundException)) {
		t.Errorf("TagResource of no key = %v, want NotFoundException", err)
	}
}

// TestSDKAliases: AWS's SDK for Go names a key by an alias, as alias/NAME
// and as the alias's ARN, wherever a KeyId goes; moves the alias to
// another key, lists aliases (all, by key, a page at a time) and deletes
// one.
func TestSDKAliases(t *testing.T) {
	c := sdkKit(t)
	ctx := context.Background()
	first, firstARN := newSymmetricKey(t, c)
	second, secondARN := newSymmetricKey(t, c)
	aliasARN := "arn:aws:kms:" + region + ":000000000000:alias/billing"

	if _, err := c.CreateAlias(ctx, &awskms.CreateAliasInput{AliasName: aws.String("alias/billing"), TargetKeyId: aws.String(first)}); err != nil {
		t.Fatalf("CreateAlias = %v", err)
	}
	if _, err := c.CreateAlias(ctx, &awskms.CreateAliasInput{AliasName: aws.String("alias/billing"), TargetKeyId: aws.String(second)}); !errors.As(err, new(*types.AlreadyExistsException)) {
		t.Errorf("CreateAlias of a taken name = %v, want AlreadyExistsException", err)
	}
	for name, want := range map[string]string{"billing": "ValidationException", "alias/": "ValidationException", "alias/aws/s3": "NotAuthorizedException"} {
		if _, err := c.CreateAlias(ctx, &awskms.CreateAliasInput{AliasName: aws.String(name), TargetKeyId: aws.String(first)}); errorCode(err) != want {
			t.Errorf("CreateAlias %q = %v, want %s", name, err, want)
		}
	}
	if _, err := c.CreateAlias(ctx, &awskms.CreateAliasInput{AliasName: aws.String("alias/orphan"), TargetKeyId: aws.String("0123456789abcdef0123456789abcdef")}); !errors.As(err, new(*types.NotFoundException)) {
		t.Errorf("CreateAlias of no key = %v, want NotFoundException", err)
	}

	plain := []byte("an invoice")
	var blobs [][]byte
	for _, name := range []string{"alias/billing", aliasARN} {
		blobs = append(blobs, encrypt(t, c, name, plain, firstARN))
		d, err := c.DescribeKey(ctx, &awskms.DescribeKeyInput{KeyId: aws.String(name)})
		if err != nil || aws.ToString(d.KeyMetadata.KeyId) != first {
			t.Errorf("DescribeKey %s = %v, %+v", name, err, d)
		}
	}
	for _, name := range []string{"alias/billing", aliasARN} {
		dec, err := c.Decrypt(ctx, &awskms.DecryptInput{CiphertextBlob: blobs[0], KeyId: aws.String(name)})
		if err != nil || !bytes.Equal(dec.Plaintext, plain) || aws.ToString(dec.KeyId) != firstARN {
			t.Errorf("Decrypt naming %s = %v, %+v", name, err, dec)
		}
	}

	if _, err := c.CreateAlias(ctx, &awskms.CreateAliasInput{AliasName: aws.String("alias/ledger"), TargetKeyId: aws.String(secondARN)}); err != nil {
		t.Fatalf("CreateAlias of the second key by its ARN = %v", err)
	}
	listed := listAliases(t, c, &awskms.ListAliasesInput{})
	if want := map[string]string{"alias/billing": first, "alias/ledger": second}; !maps.Equal(listed, want) {
		t.Fatalf("ListAliases = %v, want %v", listed, want)
	}
	for keyID, want := range map[string]map[string]string{first: {"alias/billing": first}, secondARN: {"alias/ledger": second}} {
		if got := listAliases(t, c, &awskms.ListAliasesInput{KeyId: aws.String(keyID)}); !maps.Equal(got, want) {
			t.Errorf("ListAliases of %s = %v, want %v", keyID, got, want)
		}
	}
	page, err := c.ListAliases(ctx, &awskms.ListAliasesInput{Limit: aws.Int32(1)})
	if err != nil || len(page.Aliases) != 1 || !page.Truncated || aws.ToString(page.NextMarker) == "" {
		t.Fatalf("ListAliases with Limit 1 = %v, %+v", err, page)
	}
	if a := page.Aliases[0]; aws.ToString(a.AliasName) != "alias/billing" || aws.ToString(a.AliasArn) != aliasARN || aws.ToString(a.TargetKeyId) != first || a.CreationDate == nil {
		t.Errorf("ListAliases' first entry = %s, %s, %s, %v", aws.ToString(a.AliasName), aws.ToString(a.AliasArn), aws.ToString(a.TargetKeyId), a.CreationDate)
	}
	rest, err := c.ListAliases(ctx, &awskms.ListAliasesInput{Limit: aws.Int32(1), Marker: page.NextMarker})
	if err != nil || len(rest.Aliases) != 1 || aws.ToString(rest.Aliases[0].AliasName) != "alias/ledger" || rest.Truncated || rest.NextMarker != nil {
		t.Fatalf("ListAliases' second page = %v, %+v", err, rest)
	}
	if got := listAliases(t, c, &awskms.ListAliasesInput{Limit: aws.Int32(1)}); len(got) != 2 {
		t.Errorf("ListAliases a page of one at a time through the SDK's paginator = %v", got)
	}

	if _, err := c.UpdateAlias(ctx, &awskms.UpdateAliasInput{AliasName: aws.String("alias/billing"), TargetKeyId: aws.String(second)}); err != nil {
		t.Fatalf("UpdateAlias = %v", err)
	}
	moved := encrypt(t, c, "alias/billing", plain, secondARN)
	if _, err := c.Decrypt(ctx, &awskms.DecryptInput{CiphertextBlob: blobs[1], KeyId: aws.String("alias/billing")}); !errors.As(err, new(*types.IncorrectKeyException)) {
		t.Errorf("Decrypt of the first key's blob naming the moved alias = %v, want IncorrectKeyException", err)
	}
	if dec, err := c.Decrypt(ctx, &awskms.DecryptInput{CiphertextBlob: blobs[1]}); err != nil || aws.ToString(dec.KeyId) != firstARN {
		t.Errorf("Decrypt of the first key's blob naming no key = %v", err)
	}
	if got, want := listAliases(t, c, &awskms.ListAliasesInput{KeyId: aws.String(second)}), map[string]string{"alias/billing": second, "alias/ledger": second}; !maps.Equal(got, want) {
		t.Errorf("ListAliases of the second key after UpdateAlias = %v, want %v", got, want)
	}
	if got := listAliases(t, c, &awskms.ListAliasesInput{KeyId: aws.String(first)}); len(got) != 0 {
		t.Errorf("ListAliases of the first key after UpdateAlias = %v, want none", got)
	}
	if _, err := c.UpdateAlias(ctx, &awskms.UpdateAliasInput{AliasName: aws.String("alias/none"), TargetKeyId: aws.String(first)}); !errors.As(err, new(*types.NotFoundException)) {
		t.Errorf("UpdateAlias of no alias = %v, want NotFoundException", err)
	}

	signer, err := c.CreateKey(ctx, &awskms.CreateKeyInput{KeySpec: types.KeySpecEccNistP256, KeyUsage: types.KeyUsageTypeSignVerify})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateAlias(ctx, &awskms.CreateAliasInput{AliasName: aws.String("alias/release-signer"), TargetKeyId: signer.KeyMetadata.KeyId}); err != nil {
		t.Fatalf("CreateAlias of a signing key = %v", err)
	}
	signed, err := c.Sign(ctx, &awskms.SignInput{KeyId: aws.String("alias/release-signer"), Message: plain, SigningAlgorithm: types.SigningAlgorithmSpecEcdsaSha256})
	if err != nil || aws.ToString(signed.KeyId) != aws.ToString(signer.KeyMetadata.Arn) {
		t.Fatalf("Sign with an alias = %v, %+v", err, signed)
	}
	if ok, err := c.Verify(ctx, &awskms.VerifyInput{KeyId: aws.String("arn:aws:kms:" + region + ":000000000000:alias/release-signer"), Message: plain,
		SigningAlgorithm: types.SigningAlgorithmSpecEcdsaSha256, Signature: signed.Signature}); err != nil || !ok.SignatureValid {
		t.Fatalf("Verify with an alias's ARN = %v", err)
	}
	if _, err := c.UpdateAlias(ctx, &awskms.UpdateAliasInput{AliasName: aws.String("alias/release-signer"), TargetKeyId: aws.String(first)}); errorCode(err) != "ValidationException" {
		t.Errorf("UpdateAlias of a signing key's alias to a symmetric key = %v, want ValidationException", err)
	}
	if _, err := c.DeleteAlias(ctx, &awskms.DeleteAliasInput{AliasName: aws.String("alias/release-signer")}); err != nil {
		t.Fatalf("DeleteAlias = %v", err)
	}

	if _, err := c.DeleteAlias(ctx, &awskms.DeleteAliasInput{AliasName: aws.String("alias/billing")}); err != nil {
		t.Fatalf("DeleteAlias = %v", err)
	}
	if _, err := c.Encrypt(ctx, &awskms.EncryptInput{KeyId: aws.String("alias/billing"), Plaintext: plain}); !errors.As(err, new(*types.NotFoundException)) {
		t.Errorf("Encrypt with a deleted alias = %v, want NotFoundException", err)
	}
	if _, err := c.DescribeKey(ctx, &awskms.DescribeKeyInput{KeyId: aws.String(aliasARN)}); !errors.As(err, new(*types.NotFoundException)) {
		t.Errorf("DescribeKey of a deleted alias's ARN = %v, want NotFoundException", err)
	}
	if _, err := c.DeleteAlias(ctx, &awskms.DeleteAliasInput{AliasName: aws.String("alias/billing")}); !errors.As(err, new(*types.NotFoundException)) {
		t.Errorf("DeleteAlias of a deleted alias = %v, want NotFoundException", err)
	}
	if got, want := listAliases(t, c, &awskms.ListAliasesInput{}), map[string]string{"alias/ledger": second}; !maps.Equal(got, want) {
		t.Errorf("ListAliases after DeleteAlias = %v, want %v", got, want)
	}
	if dec, err := c.Decrypt(ctx, &awskms.DecryptInput{CiphertextBlob: moved}); err != nil || aws.ToString(dec.KeyId) != secondARN {
		t.Errorf("Decrypt of a blob made through the deleted alias = %v", err)
	}
}

// listAliases walks ListAliases with the SDK's paginator and answers the
// aliases listed with their keys; no alias may be listed twice.
func listAliases(t *testing.T, c *awskms.Client, in *awskms.ListAliasesInput) map[string]string {
	t.Helper()
	out := map[string]string{}
	for pages := awskms.NewListAliasesPaginator(c, in); pages.HasMorePages(); {
		page, err := pages.NextPage(context.Background())
		if err != nil {
			t.Fatalf("ListAliases = %v", err)
		}
		for _, a := range page.Aliases {
			name := aws.ToString(a.AliasName)
			if _, dup := out[name]; dup {
				t.Fatalf("ListAliases listed %s twice", name)
			}
			out[name] = aws.ToString(a.TargetKeyId)
		}
	}
	return out
}
