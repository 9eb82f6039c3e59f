package kms

import (
	"context"
	"maps"
	"slices"
	"strings"
)

// Descriptions and tags of held keys: what callers say of a key, to find
// it and to know what it is for. They are metadata, never secret by
// design, and answered to whoever may read the key (HeldKey); still, no
// record or log line holds a description or a tag's value, since a
// caller may put there what it should not: a record of a change names the
// tags' keys only. A description has at most maxDescriptionLen
// characters; a key at most maxTags tags, each of a key of 1 to
// maxTagKeyLen characters and a value of at most maxTagValueLen; all in
// UTF-8, tags without control characters. They are given at the key's
// creation (CreateHeldKeyInput) and changed with keyring.<name>.config:
// the description by ConfigureHeldKey, tags by TagHeldKey and
// UntagHeldKey, recorded as transit.key.config, transit.key.tag and
// transit.key.untag. A key pending deletion changes none.

// TagHeldKey sets tags on the held key name (or the key an alias names):
// each tag's value replaces the one its key had, and the key keeps its
// other tags, at most maxTags in all. It needs keyring.<name>.config and
// is recorded as transit.key.tag, with the tags' keys.
func (s *Service) TagHeldKey(ctx context.Context, name string, tags map[string]string) error {
	if len(tags) == 0 {
		return Errorf(KindInvalid, "no tags given")
	}
	if err := checkTags(tags); err != nil {
		return err
	}
	return s.changeTags(ctx, name, transitTagAction, slices.Sorted(maps.Keys(tags)), func(t map[string]string) {
		maps.Copy(t, tags)
	})
}

// UntagHeldKey removes the tags of keys from the held key name (or the
// key an alias names); a key it does not have is no error. It needs
// keyring.<name>.config and is recorded as transit.key.untag, with the
// keys.
func (s *Service) UntagHeldKey(ctx context.Context, name string, keys []string) error {
	if len(keys) == 0 {
		return Errorf(KindInvalid, "no tag keys given")
	}
	for _, k := range keys {
		if err := checkTagText("key", k, 1, maxTagKeyLen); err != nil {
			return err
		}
	}
	return s.changeTags(ctx, name, transitUntagAction, slices.Compact(slices.Sorted(slices.Values(keys))), func(t map[string]string) {
		for _, k := range keys {
			delete(t, k)
		}
	})
}

// changeTags changes the tags of the held key name with change, recorded
// as action with the tags' keys.
func (s *Service) changeTags(ctx context.Context, name, action string, keys []string, change func(map[string]string)) error {
	p, r, err := s.resolveHeld(ctx, name, action, OpConfig)
	if err != nil {
		return err
	}
	act := s.newActivity(p, action, strings.ToLower(r.Name), true, map[string]any{"ringId": r.ID, "tagKeys": keys})
	_, err = s.changeRing(act, r.ID, func(_ Txn, cur *ringRecord) error {
		if err := notPendingDeletion(cur); err != nil {
			return err
		}
		t := cur.held() // as the transaction read it: no cache shares its tags
		tags := t.Tags
		if tags == nil {
			tags = map[string]string{}
		}
		change(tags)
		if len(tags) > maxTags {
			return Errorf(KindInvalid, "a key has at most %d tags: key %s would have %d", maxTags, cur.Name, len(tags))
		}
		if len(tags) == 0 {
			tags = nil
		}
		t.Tags = tags
		cur.Held = &t
		return nil
	})
	return err
}
