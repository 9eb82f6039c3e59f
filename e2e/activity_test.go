package e2e

import (
	"testing"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/client"
)

// activityFlow reads the activity trail that the flows before it left.
func activityFlow(t *testing.T, v *validator, root *client.Client, limited *kms.APIKey) {
	_, err := root.GetActivity(bg, "00000000000000000000000000000000")
	wantKind(t, "GetActivity of an unknown ID", err, kms.KindNotFound)

	if v.spec.doc.Paths.Find("/auth/search/activity") == nil {
		t.Log("the document has no POST /auth/search/activity yet: the activity search is not exercised")
		return
	}
	acts := allPages(t, "SearchActivity", 3, func(r kms.PageRequest) (*kms.List[*kms.Activity], error) {
		return root.SearchActivity(bg, client.ActivityFilter{Ring: "payments", Action: "encrypt"}, r)
	})
	if len(acts) < 5 {
		t.Fatalf("SearchActivity(payments, encrypt): %d records, want the flows' encrypts", len(acts))
	}
	for _, a := range acts {
		if a.Action != "encrypt" || a.Ring != "payments" {
			t.Fatalf("SearchActivity(payments, encrypt) holds %+v", a)
		}
	}
	got := must[*kms.Activity](t, "GetActivity")(root.GetActivity(bg, acts[0].ID))
	if got.ID != acts[0].ID || got.Digest != acts[0].Digest || got.Seq != acts[0].Seq {
		t.Fatalf("GetActivity = %+v, the search answered %+v", got, acts[0])
	}
	denied := false
	mine := must[*kms.List[*kms.Activity]](t, "SearchActivity denied")(root.SearchActivity(bg, client.ActivityFilter{KeyID: limited.KeyID, Valid: new(false)}, kms.PageRequest{}))
	for _, a := range mine.Data {
		denied = denied || !a.Valid && a.KeyID == limited.KeyID
		if a.Valid || a.KeyID != limited.KeyID {
			t.Fatalf("SearchActivity(keyid, valid false) holds %+v", a)
		}
	}
	if !denied {
		t.Fatalf("SearchActivity finds none of the limited key's denials")
	}
}
