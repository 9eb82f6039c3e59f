package kms_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/ringkms/kms"
)

// TestHeldKeyTags: a held key's description and tags, given at its
// creation and changed later, read back as they were given; the records
// of the changes name the tags' keys, never a value or the description.
func TestHeldKeyTags(t *testing.T) {
	e := newEnv(t)
	desc := "the key of the app's " + strings.Repeat("é", 10)
	k, err := e.svc.CreateHeldKey(e.root, kms.CreateHeldKeyInput{Name: "app", Description: desc,
		Tags: map[string]string{"team": "payments", "cost-center": "secret-value-1", "empty": ""}})
	if err != nil || k.Description != desc || len(k.Tags) != 3 || k.Tags["empty"] != "" {
		t.Fatalf("CreateHeldKey with a description and tags = %+v, %v", k, err)
	}
	reader := e.as(t, kms.Flags{"keyring.app.read": true})
	config := e.as(t, kms.Flags{"keyring.app.config": true})
	err = e.svc.TagHeldKey(reader, "app", map[string]string{"team": "x"})
	wantKind(t, "TagHeldKey with keyring.app.read", err, kms.KindPermissionDenied)
	if err := e.svc.TagHeldKey(config, "app", map[string]string{"team": "risk", "env": "secret-value-2"}); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.UntagHeldKey(config, "app", []string{"empty", "not-there"}); err != nil {
		t.Fatal(err)
	}
	newDesc := ""
	if _, err := e.svc.ConfigureHeldKey(config, "app", kms.HeldKeyConfig{Description: &newDesc}); err != nil {
		t.Fatal(err)
	}
	k, err = e.svc.GetHeldKey(reader, "app")
	want := map[string]string{"team": "risk", "cost-center": "secret-value-1", "env": "secret-value-2"}
	if err != nil || !maps.Equal(k.Tags, want) || k.Description != "" {
		t.Fatalf("GetHeldKey = tags %v, description %q, %v; want %v and none", k.Tags, k.Description, err, want)
	}
	k.Tags["team"] = "changed by a caller"
	if k, _ := e.svc.GetHeldKey(reader, "app"); k.Tags["team"] != "risk" {
		t.Fatalf("a change of an answer's tags reached the key: %v", k.Tags)
	}

	tag := ringRecords(t, e, "app", "transit.key.tag")
	if len(tag) != 2 || fmt.Sprint(tag[1].Props["tagKeys"]) != "[env team]" {
		t.Fatalf("transit.key.tag records = %+v, want a refusal and one naming env and team", tag)
	}
	if untag := ringRecords(t, e, "app", "transit.key.untag"); len(untag) != 1 || fmt.Sprint(untag[0].Props["tagKeys"]) != "[empty not-there]" {
		t.Fatalf("transit.key.untag records = %+v", untag)
	}
	all, err := e.svc.SearchActivity(e.root, kms.ActivityFilter{Ring: "app"}, kms.PageRequest{})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(all.Data)
	for _, secret := range []string{"secret-value", "payments", "é"} {
		if strings.Contains(string(b), secret) {
			t.Errorf("the records of key app hold %q, a tag's value or its description", secret)
		}
	}
}

// TestHeldKeyTagLimits: descriptions and tags past their bounds are
// refused, and change nothing.
func TestHeldKeyTagLimits(t *testing.T) {
	e := newEnv(t)
	if _, err := e.svc.CreateHeldKey(e.root, kms.CreateHeldKeyInput{Name: "app", Description: strings.Repeat("ß", 8192)}); err != nil {
		t.Fatalf("a description of 8192 characters = %v", err)
	}
	fifty := map[string]string{}
	for i := range 50 {
		fifty[fmt.Sprint("k", i)] = strings.Repeat("v", 256)
	}
	fifty[strings.Repeat("ü", 128)] = ""
	delete(fifty, "k0")
	if err := e.svc.TagHeldKey(e.root, "app", fifty); err != nil {
		t.Fatalf("50 tags of the longest keys and values = %v", err)
	}
	for name, call := range map[string]func() error{
		"description of 8193": func() error {
			_, err := e.svc.CreateHeldKey(e.root, kms.CreateHeldKeyInput{Name: "b", Description: strings.Repeat("a", 8193)})
			return err
		},
		"description not UTF-8": func() error {
			_, err := e.svc.ConfigureHeldKey(e.root, "app", kms.HeldKeyConfig{Description: ptr("\xff")})
			return err
		},
		"51 tags at creation": func() error {
			tags := maps.Clone(fifty)
			tags["one-more"] = ""
			_, err := e.svc.CreateHeldKey(e.root, kms.CreateHeldKeyInput{Name: "b", Tags: tags})
			return err
		},
		"a 51st tag": func() error { return e.svc.TagHeldKey(e.root, "app", map[string]string{"one-more": ""}) },
		"key of 129": func() error { return e.svc.TagHeldKey(e.root, "app", map[string]string{strings.Repeat("k", 129): ""}) },
		"empty key":  func() error { return e.svc.TagHeldKey(e.root, "app", map[string]string{"": "v"}) },
		"value of 257": func() error {
			return e.svc.TagHeldKey(e.root, "app", map[string]string{"k1": strings.Repeat("v", 257)})
		},
		"control character":  func() error { return e.svc.TagHeldKey(e.root, "app", map[string]string{"k1": "a\nb"}) },
		"no tags":            func() error { return e.svc.TagHeldKey(e.root, "app", nil) },
		"no keys":            func() error { return e.svc.UntagHeldKey(e.root, "app", nil) },
		"untag an empty key": func() error { return e.svc.UntagHeldKey(e.root, "app", []string{""}) },
	} {
		wantKind(t, name, call(), kms.KindInvalid)
	}
	k, err := e.svc.GetHeldKey(e.root, "app")
	if err != nil || !maps.Equal(k.Tags, fifty) || len([]rune(k.Description)) != 8192 {
		t.Fatalf("GetHeldKey after refused changes = %d tags, %v; want the 50 as they were", len(k.Tags), err)
	}
	if _, err := e.svc.GetHeldKey(e.root, "b"); kms.ErrorKind(err) != kms.KindNotFound {
		t.Fatalf("a key whose creation was refused = %v, want none", err)
	}
}
