package pgstore

import (
	"strings"
	"testing"
	"time"

	"github.com/ringkms/kms/internal/pgtest"
)

// TestDurabilityWarnings: a primary with a synchronous standby draws no
// warning, nor does a server without standbys; a URL that turns
// synchronous commit to local, standbys none of which is named
// synchronous, and a synchronous standby named but not streaming each
// draw the warning that says so.
func TestDurabilityWarnings(t *testing.T) {
	warnings := func(url string) []string {
		t.Helper()
		s := openStore(t, url, Options{})
		w, err := s.DurabilityWarnings(t.Context())
		if err != nil {
			t.Fatalf("DurabilityWarnings = %v", err)
		}
		return w
	}
	want := func(what string, got []string, part string) {
		t.Helper()
		if len(got) != 1 || !strings.Contains(got[0], part) {
			t.Errorf("%s: warnings %q, want one saying %q", what, got, part)
		}
	}
	if w := warnings(pgtest.URL(t)); len(w) != 0 {
		t.Errorf("a server without standbys: warnings %q, want none", w)
	}
	pair := pgtest.StartPair(t)
	if w := warnings(pair.PrimaryURL()); len(w) != 0 {
		t.Errorf("a primary with a synchronous standby: warnings %q, want none", w)
	}
	// The standby has the schema once it has replayed the primary's
	// commits.
	var standby *Store
	waitNil(t, 20*time.Second, "Open on the standby", func() (err error) {
		standby, err = Open(t.Context(), pair.StandbyURL(), Options{})
		return err
	})
	defer standby.Close()
	if w, err := standby.DurabilityWarnings(t.Context()); err != nil || len(w) != 0 {
		t.Errorf("a standby: warnings %q, %v; want none", w, err)
	}
	want("synchronous_commit=local in the URL", warnings(pair.PrimaryURL()+"&synchronous_commit=local"), `synchronous_commit is "local"`)
	pair.SyncStandbys("")
	want("a standby not named synchronous", warnings(pair.PrimaryURL()), "synchronous_standby_names is empty")
	pair.SyncStandbys("no_such_standby")
	want("a synchronous standby named but not streaming", warnings(pair.PrimaryURL()), "none of the 1 standby(s) streaming is synchronous")
	pair.SyncStandbys(pgtest.StandbyName)
}
