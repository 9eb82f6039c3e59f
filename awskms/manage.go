package awskms

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ringkms/kms"
)

// The state of a key as a whole: enabled, disabled, or pending deletion
// (kms.HeldKey.State), and its tags and aliases.

// keyStates are AWS's KeyState of the held keys' states.
var keyStates = map[string]string{
	kms.HeldKeyEnabled: "Enabled", "": "Enabled", kms.HeldKeyDisabled: "Disabled", kms.HeldKeyPendingDeletion: "PendingDeletion",
}

// usable refuses a key that is not enabled, as its uses are refused:
// DisabledException, or KMSInvalidStateException pending deletion.
func usable(k *kms.HeldKey) error {
	switch k.State {
	case kms.HeldKeyDisabled:
		return fail("DisabledException", fmt.Sprintf("key %s is disabled", k.Name))
	case kms.HeldKeyPendingDeletion:
		return fail("KMSInvalidStateException", fmt.Sprintf("key %s is pending deletion", k.Name))
	}
	return nil
}

// setState is EnableKey, or with enable false DisableKey.
func setState(enable bool) operation {
	return func(a *api, c *call) (any, error) {
		_, name, err := c.keyID()
		if err != nil {
			return nil, err
		}
		change := a.svc.DisableHeldKey
		if enable {
			change = a.svc.EnableHeldKey
		}
		_, err = change(c.r.Context(), name)
		return struct{}{}, err
	}
}

func scheduleKeyDeletion(a *api, c *call) (any, error) {
	var in struct {
		KeyId               string
		PendingWindowInDays int
	}
	name, err := c.named(&in, &in.KeyId)
	if err != nil {
		return nil, err
	}
	days := in.PendingWindowInDays
	if days == 0 {
		days = 30
	}
	if days < 7 || days > 30 {
		return nil, fail("ValidationException", fmt.Sprintf("PendingWindowInDays must be 7 to 30, not %d", days))
	}
	k, err := a.svc.ScheduleHeldKeyDeletion(c.r.Context(), name, time.Duration(days)*day)
	if err != nil {
		return nil, err
	}
	return map[string]any{"KeyId": arn(c.region, k.Name), "DeletionDate": epoch(k.DeletionDate), "KeyState": "PendingDeletion",
		"PendingWindowInDays": days}, nil
}

func cancelKeyDeletion(a *api, c *call) (any, error) {
	_, name, err := c.keyID()
	if err != nil {
		return nil, err
	}
	k, err := a.svc.CancelHeldKeyDeletion(c.r.Context(), name)
	if err != nil {
		return nil, err
	}
	return map[string]any{"KeyId": arn(c.region, k.Name)}, nil
}

// tag is one of AWS's tags.
type tag struct{ TagKey, TagValue string }

// tagging is TagResource, or with untag UntagResource.
func tagging(untag bool) operation {
	return func(a *api, c *call) (any, error) {
		var in struct {
			KeyId   string
			Tags    []tag
			TagKeys []string
		}
		name, err := c.named(&in, &in.KeyId)
		switch {
		case err != nil:
			return nil, err
		case untag:
			return struct{}{}, a.svc.UntagHeldKey(c.r.Context(), name, in.TagKeys)
		}
		tags := make(map[string]string, len(in.Tags))
		for _, t := range in.Tags {
			if strings.HasPrefix(strings.ToLower(t.TagKey), "aws:") {
				return nil, fail("TagException", "tag keys beginning with aws: are AWS's own")
			}
			tags[t.TagKey] = t.TagValue
		}
		return struct{}{}, a.svc.TagHeldKey(c.r.Context(), name, tags)
	}
}

func listResourceTags(a *api, c *call) (any, error) {
	_, k, err := a.held(c)
	if err != nil {
		return nil, err
	}
	return map[string]any{"Tags": tagsOf(k.Tags), "Truncated": false}, nil
}

// tagsOf are tags as AWS lists them: by key.
func tagsOf(m map[string]string) []tag {
	out := make([]tag, 0, len(m))
	for k, v := range m {
		out = append(out, tag{k, v})
	}
	slices.SortFunc(out, func(a, b tag) int { return strings.Compare(a.TagKey, b.TagKey) })
	return out
}

// aliasPrefix starts AWS's alias names; the held keys' aliases are what
// follows it.
const aliasPrefix = "alias/"

// aliasName is the held keys' alias of AWS's alias name.
func aliasName(name string) (string, error) {
	alias, ok := strings.CutPrefix(name, aliasPrefix)
	switch {
	case !ok || alias == "":
		return "", fail("ValidationException", "AliasName must begin with alias/ and name an alias")
	case strings.HasPrefix(alias, "aws/"):
		return "", fail("NotAuthorizedException", "alias/aws/ names AWS's own keys, which this service has not")
	}
	return alias, nil
}

// aliasRequest names an alias and, for its creation or update, a key.
type aliasRequest struct {
	AliasName   string
	TargetKeyId string
}

// setAlias is CreateAlias, or with update UpdateAlias.
func setAlias(update bool) operation {
	return func(a *api, c *call) (any, error) {
		var in aliasRequest
		target, err := c.named(&in, &in.TargetKeyId)
		if err != nil {
			return nil, err
		}
		alias, err := aliasName(in.AliasName)
		if err != nil {
			return nil, err
		}
		set := a.svc.CreateHeldKeyAlias
		if update {
			set = a.svc.UpdateHeldKeyAlias
		}
		_, err = set(c.r.Context(), alias, target)
		return struct{}{}, err
	}
}

func deleteAlias(a *api, c *call) (any, error) {
	var in aliasRequest
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	alias, err := aliasName(in.AliasName)
	if err != nil {
		return nil, err
	}
	return struct{}{}, a.svc.DeleteHeldKeyAlias(c.r.Context(), alias)
}

func listAliases(a *api, c *call) (any, error) {
	var in struct {
		KeyId  string
		Limit  int
		Marker string
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	if in.Limit < 0 || in.Limit > 100 {
		return nil, fail("ValidationException", fmt.Sprintf("Limit must be 1 to 100, not %d", in.Limit))
	}
	target := ""
	if in.KeyId != "" {
		var err error
		if target, err = keyName(in.KeyId); err != nil {
			return nil, err
		}
	}
	page, err := a.svc.ListHeldKeyAliases(c.r.Context(), target, kms.PageRequest{Cursor: in.Marker, Limit: in.Limit})
	if err != nil && in.Marker != "" && kms.ErrorKind(err) == kms.KindInvalid {
		return nil, fail("InvalidMarkerException", "Marker is not one that ListAliases answered")
	}
	if err != nil {
		return nil, err
	}
	type entry struct {
		AliasName, AliasArn, TargetKeyId string
		CreationDate, LastUpdatedDate    float64
	}
	out := make([]entry, 0, len(page.Data))
	for _, al := range page.Data {
		out = append(out, entry{aliasPrefix + al.Name, "arn:aws:kms:" + c.region + ":" + accountID + ":" + aliasPrefix + al.Name,
			al.Target, epoch(al.CreatedAt), epoch(al.UpdatedAt)})
	}
	res := map[string]any{"Aliases": out, "Truncated": page.Pagination.NextCursor != ""}
	if page.Pagination.NextCursor != "" {
		res["NextMarker"] = page.Pagination.NextCursor
	}
	return res, nil
}

// epoch is a time as AWS's JSON protocol writes it: seconds since 1970.
func epoch(t time.Time) float64 { return float64(t.UnixMilli()) / 1000 }
