package kms

import (
	"context"
	"maps"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/ringkms/kms/internal/keytype"
	"github.com/ringkms/kms/internal/wrap"
)

// checkHeldPeriod checks a rotation period given as a duration.
func checkHeldPeriod(d time.Duration) error {
	if d != 0 && d < MinRotationPeriod {
		return Errorf(KindInvalid, "auto rotate period must be 0 to disable or at least an hour")
	}
	return nil
}

// CreateHeldKeyInput makes a held key.
type CreateHeldKeyInput struct {
	Name string
	// Type is the key's type (HeldKey.Type); empty is aes256-gcm96.
	// KeySize (hmac: 32 to 512 bytes, 32 by default) and ParameterSet
	// (ml-dsa: "44", "65" or "87", "65" by default) are its parameters;
	// given for a type they do not apply to, they are refused.
	Type         string
	KeySize      int
	ParameterSet string
	// RotationPeriod is the ring's algos.aes256.rotationPeriod: zero for
	// none, else at least MinRotationPeriod.
	RotationPeriod time.Duration
	// Exportable makes a key whose versions ExportHeldKey answers, to
	// a caller with keyring.<name>.export; it can never be unset. By
	// default no route answers the key's material.
	Exportable bool
	// Description and Tags are what the caller says of the key
	// (heldkeys_tags.go, which bounds them).
	Description string
	Tags        map[string]string
}

// newHeldSettings are the settings of the key in makes: its type with
// its parameters filled in (keytype.NewSpec), which never change, whether
// it is exportable, its description and tags.
func newHeldSettings(in CreateHeldKeyInput) (*heldSettings, error) {
	t, err := keytype.Parse(in.Type)
	if err != nil {
		return nil, Errorf(KindInvalid, "%s", keytype.Message(err))
	}
	spec, err := keytype.NewSpec(t, keytype.Params{KeySize: in.KeySize, ParameterSet: keytype.ParameterSet(in.ParameterSet)})
	if err != nil {
		return nil, Errorf(KindInvalid, "%s", keytype.Message(err))
	}
	if err := checkDescription(in.Description); err != nil {
		return nil, err
	}
	if err := checkTags(in.Tags); err != nil {
		return nil, err
	}
	h := &heldSettings{Exportable: in.Exportable, KeySize: spec.Params().KeySize, ParameterSet: string(spec.Params().ParameterSet),
		Description: in.Description}
	if len(in.Tags) > 0 {
		h.Tags = maps.Clone(in.Tags)
	}
	if t != keytype.AES256GCM96 {
		h.Type = string(t) // empty reads as aes256-gcm96, as the keys made before types did
	}
	return h, nil
}

// createHeldRing makes the /asym ring of a new held key with settings,
// recorded as transit.key.create. A ring of that name made meanwhile by
// another call is answered (the caller checks that it is a held key's);
// a /ks ring of that name is an Invalid error.
func (s *Service) createHeldRing(ctx context.Context, p *Principal, name string, period time.Duration, settings *heldSettings) (*ringRecord, error) {
	priv, err := wrap.Generate(wrap.XWing)
	if err != nil {
		return nil, internalError("generate key pair", err)
	}
	raw := priv.Bytes()
	defer clear(raw)
	var algos ConfigAlgos
	if period > 0 {
		algos.AES256.RotationPeriod = formatPeriod(period)
	}
	r, _, err := s.createRing(p, ringSpec{group: groupAsym, name: name, pub: priv.Public(), private: raw,
		algos: algos, transit: settings, origin: originHeld, action: transitCreateAction})
	if ErrorKind(err) == KindConflict {
		if other, err := s.ringByName(ctx, groupAsym, name); err == nil {
			return other, nil // made meanwhile by another call
		}
		if _, err := s.ringByName(ctx, groupKS, name); err == nil {
			return nil, Errorf(KindInvalid, "key ring %q is a /ks ring, whose keys the service never holds: transit cannot use it; choose another name", name)
		}
	}
	return r, err
}

// checkDescription checks the description of a held key.
func checkDescription(d string) error {
	if !utf8.ValidString(d) {
		return Errorf(KindInvalid, "a description is text in UTF-8")
	}
	if n := utf8.RuneCountInString(d); n > maxDescriptionLen {
		return Errorf(KindInvalid, "a description has at most %d characters, not %d", maxDescriptionLen, n)
	}
	return nil
}

// checkTags checks tags, at most maxTags of them.
func checkTags(tags map[string]string) error {
	if len(tags) > maxTags {
		return Errorf(KindInvalid, "a key has at most %d tags", maxTags)
	}
	for k, v := range tags {
		if err := checkTagText("key", k, 1, maxTagKeyLen); err != nil {
			return err
		}
		if err := checkTagText("value", v, 0, maxTagValueLen); err != nil {
			return err
		}
	}
	return nil
}

// The bounds of descriptions and tags.
const (
	maxDescriptionLen = 8192
	maxTags           = 50
	maxTagKeyLen      = 128
	maxTagValueLen    = 256
)

// checkTagText checks the key (what "key") or the value ("value") of a
// tag: UTF-8 without control characters, of min to max characters. The
// error quotes neither.
func checkTagText(what, text string, min, max int) error {
	if !utf8.ValidString(text) || strings.IndexFunc(text, unicode.IsControl) >= 0 {
		return Errorf(KindInvalid, "a tag's %s is text in UTF-8 without control characters", what)
	}
	if n := utf8.RuneCountInString(text); n < min || n > max {
		return Errorf(KindInvalid, "a tag's %s has %d to %d characters, not %d", what, min, max, n)
	}
	return nil
}
