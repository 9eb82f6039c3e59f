package httpapi_test

import (
	"fmt"
	"math"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ringkms/kms"
)

// encryptAsset calls POST /ks/encrypt with an Asset as root.
func (e *env) encryptAsset(t testing.TB, ring string, asset map[string]any) kms.EncryptResult {
	t.Helper()
	r := e.do(t, "POST", "/ks/encrypt", e.root, map[string]any{"ringname": ring, "asset": asset}).want(t, http.StatusOK)
	res := decode[kms.EncryptResult](t, r)
	if res.Asset == nil || res.Asset.ID == "" {
		t.Fatalf("POST /ks/encrypt with an asset answered no asset: %s", r.body)
	}
	return res
}

func (e *env) decrypt(t testing.TB, res kms.EncryptResult) reply {
	t.Helper()
	return e.do(t, "POST", "/ks/decrypt", e.root, map[string]any{"hash": res.Hash, "header": res.Header})
}

// wantInvalidAsset checks a 422 in the decrypt shape whose message
// contains want.
func wantInvalidAsset(t testing.TB, r reply, want string) {
	t.Helper()
	r.want(t, http.StatusUnprocessableEntity)
	body := r.object(t)
	asset, _ := body["asset"].(map[string]any)
	if asset == nil || asset["valid"] != false {
		t.Fatalf("%s %s: asset = %v, want valid false", r.method, r.path, body["asset"])
	}
	if msg, _ := asset["message"].(string); !strings.Contains(msg, want) {
		t.Fatalf("%s %s: asset.message = %q, want it to contain %q", r.method, r.path, msg, want)
	}
	if body["key"] != nil {
		t.Fatalf("%s %s: a failed verification answered a key", r.method, r.path)
	}
}

func TestAssetsOverHTTP(t *testing.T) {
	e := newEnv(t)
	e.createRing(t, "files")
	parent := e.encryptAsset(t, "files", map[string]any{"data": map[string]any{"name": "raw.csv"}})
	child := e.encryptAsset(t, "files", map[string]any{"data": map[string]any{"name": "clean.csv"}, "parents": []string{parent.Asset.ID}})

	t.Run("decrypt verifies", func(t *testing.T) {
		body := e.decrypt(t, child).want(t, http.StatusOK).object(t)
		asset := body["asset"].(map[string]any)
		if asset["valid"] != true || asset["id"] != child.Asset.ID || asset["data"].(map[string]any)["name"] != "clean.csv" {
			t.Fatalf("decrypt asset = %v", asset)
		}
		// The parents, with the data, are what the header's Asset digest
		// covers: the answer alone verifies the header.
		if p, _ := asset["parents"].([]any); len(p) != 1 || p[0] != parent.Asset.ID {
			t.Fatalf("decrypt asset.parents = %v, want [%s]", asset["parents"], parent.Asset.ID)
		}
		res := decode[kms.DecryptResult](t, e.decrypt(t, child).want(t, http.StatusOK))
		keys := decode[kms.SigningKeySet](t, e.do(t, "GET", "/ks/signing-keys", "", nil).want(t, http.StatusOK))
		signed := &kms.Asset{ID: res.Asset.ID, Data: res.Asset.Data, Parents: res.Asset.Parents}
		if v, err := keys.VerifyHeader(child.Header, signed); err != nil || !v.Valid || !v.AssetChecked {
			t.Fatalf("VerifyHeader(child, the Asset of the decrypt answer) = %+v, %v; want valid", v, err)
		}
		if p, ok := e.decrypt(t, parent).want(t, http.StatusOK).object(t)["asset"].(map[string]any)["parents"].([]any); !ok || len(p) != 0 {
			t.Fatalf("decrypt of an Asset without parents: asset.parents = %v, want []", p)
		}
		hi := e.do(t, "GET", "/ks/header/"+child.Header, e.root, nil).want(t, http.StatusOK).object(t)
		if hi["hasSignedAsset"] != true || hi["valid"] != true {
			t.Fatalf("header info = %v", hi)
		}
	})
	t.Run("get", func(t *testing.T) {
		got := decode[kms.Asset](t, e.do(t, "GET", "/assets/"+child.Asset.ID, e.root, nil).want(t, http.StatusOK))
		if got.ID != child.Asset.ID || len(got.Parents) != 1 || got.Parents[0] != parent.Asset.ID || got.Data["name"] != "clean.csv" {
			t.Fatalf("GET /assets/{id} = %+v", got)
		}
		e.do(t, "GET", "/assets/01a2000000000000000000000000beef", e.root, nil).wantError(t, http.StatusNotFound, "not_found")
		e.do(t, "GET", "/assets/nope", e.root, nil).wantError(t, http.StatusNotFound, "not_found")
		e.checkAuth(t, "GET", "/assets/"+child.Asset.ID, nil)
	})
	t.Run("lineage", func(t *testing.T) {
		l := decode[kms.Lineage](t, e.do(t, "GET", "/assets/"+parent.Asset.ID+"/lineage?depth=2", e.root, nil).want(t, http.StatusOK))
		if len(l.Descendants) != 1 || l.Descendants[0].ID != child.Asset.ID || l.Depth != 2 || len(l.Ancestors) != 0 {
			t.Fatalf("lineage = %+v", l)
		}
		e.do(t, "GET", "/assets/"+parent.Asset.ID+"/lineage?depth=x", e.root, nil).wantError(t, http.StatusBadRequest, "invalid")
		e.do(t, "GET", "/assets/"+parent.Asset.ID+"/lineage?depth=99", e.root, nil).wantError(t, http.StatusBadRequest, "invalid")
	})
	t.Run("unknown parent or assetId", func(t *testing.T) {
		missing := "01a2000000000000000000000000beef"
		e.do(t, "POST", "/ks/encrypt", e.root, map[string]any{"ringname": "files", "asset": map[string]any{"parents": []string{missing}}}).
			wantError(t, http.StatusNotFound, "not_found")
		e.do(t, "POST", "/ks/encrypt", e.root, map[string]any{"ringname": "files", "asset": map[string]any{"assetId": missing}}).
			wantError(t, http.StatusNotFound, "not_found")
		e.do(t, "POST", "/ks/encrypt", e.root, map[string]any{"ringname": "files", "asset": map[string]any{"parents": "x"}}).
			wantError(t, http.StatusBadRequest, "invalid")
	})
	t.Run("422 altered header", func(t *testing.T) {
		bad := child
		bad.Header = flip(child.Header)
		wantInvalidAsset(t, e.decrypt(t, bad), "header")
	})
	t.Run("422 altered hash", func(t *testing.T) {
		bad := child
		bad.Hash = flip(child.Hash)
		wantInvalidAsset(t, e.decrypt(t, bad), "hash")
	})
	t.Run("update, then 422 data changed", func(t *testing.T) {
		upd := e.encryptAsset(t, "files", map[string]any{"assetId": child.Asset.ID, "data": map[string]any{"name": "clean-v2.csv"}})
		if upd.Asset.ID != child.Asset.ID || upd.Asset.Data["name"] != "clean-v2.csv" {
			t.Fatalf("update = %+v", upd.Asset)
		}
		wantInvalidAsset(t, e.decrypt(t, child), "changed")
		e.decrypt(t, upd).want(t, http.StatusOK)
	})
	t.Run("delete, then 422 deleted", func(t *testing.T) {
		e.do(t, "DELETE", "/assets/"+parent.Asset.ID, e.root, nil).wantError(t, http.StatusBadRequest, "conflict")
		leaf := e.encryptAsset(t, "files", map[string]any{"data": map[string]any{}})
		body := e.do(t, "DELETE", "/assets/"+leaf.Asset.ID, e.root, nil).want(t, http.StatusOK).object(t)
		if body["id"] != leaf.Asset.ID || body["deleted"] != true {
			t.Fatalf("DELETE /assets/{id} = %v", body)
		}
		wantInvalidAsset(t, e.decrypt(t, leaf), "deleted")
		e.do(t, "DELETE", "/assets/"+leaf.Asset.ID, e.root, nil).wantError(t, http.StatusNotFound, "not_found")
		e.checkAuth(t, "DELETE", "/assets/"+leaf.Asset.ID, nil)
	})
}

func TestSearchAssetsOverHTTP(t *testing.T) {
	e := newEnv(t)
	r1 := e.createRing(t, "one")
	e.createRing(t, "two")
	p := e.encryptAsset(t, "one", map[string]any{}).Asset.ID
	// The second key may name root's parent Asset: accounts.all.
	secret, keyID := e.apiKey(t, "keyring.*.encrypt", "accounts.all")
	type made struct {
		id, ring, key string
		ms            int64
		even          bool
	}
	var all []made
	for i := 0; i < 24; i++ {
		ring, sec, kid := "one", e.root, ""
		if i%3 == 0 {
			ring = "two"
		}
		if i%2 == 0 {
			sec, kid = secret, keyID
		}
		asset := map[string]any{"data": map[string]any{"i": i, "even": i%2 == 0}}
		if i%4 == 0 {
			asset["parents"] = []string{p}
		}
		res := decode[kms.EncryptResult](t, e.do(t, "POST", "/ks/encrypt", sec, map[string]any{"ringname": ring, "asset": asset}).want(t, http.StatusOK))
		all = append(all, made{res.Asset.ID, ring, kid, res.Asset.CreatedAt.UnixMilli(), i%2 == 0})
		time.Sleep(2 * time.Millisecond) // spread createdAt for the range filter
	}
	start, end := all[6].ms, all[15].ms
	tests := []struct {
		name string
		body map[string]any
		want func(m made) bool
	}{
		{"no filter", nil, func(made) bool { return true }},
		{"parents", map[string]any{"parents": []string{p}}, nil},
		{"keyringId", map[string]any{"keyringId": r1.Ring.ID}, func(m made) bool { return m.ring == "one" }},
		{"apikeyId", map[string]any{"apikeyId": keyID}, func(m made) bool { return m.key == keyID }},
		{"accountId", map[string]any{"accountId": e.account}, func(m made) bool { return m.key == keyID }},
		{"start and end", map[string]any{"start": start, "end": end}, func(m made) bool { return m.ms >= start && m.ms <= end }},
		{"data", map[string]any{"data": map[string]any{"even": false}}, func(m made) bool { return !m.even }},
		{"combined", map[string]any{"keyringId": r1.Ring.ID, "apikeyId": keyID, "start": start, "data": map[string]any{"even": true}},
			func(m made) bool { return m.ring == "one" && m.key == keyID && m.ms >= start && m.even }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := map[string]bool{}
			for i, m := range all {
				if tt.want == nil && i%4 == 0 || tt.want != nil && tt.want(m) {
					want[m.id] = true
				}
			}
			got := map[string]bool{}
			cursor := ""
			for pages := 0; ; pages++ {
				if pages > 30 {
					t.Fatal("too many pages")
				}
				path := "/assets/search?limit=5"
				if cursor != "" {
					path += "&cursor=" + cursor
				}
				var body any
				if tt.body != nil {
					body = tt.body
				}
				page := decode[kms.List[*kms.Asset]](t, e.do(t, "POST", path, e.root, body).want(t, http.StatusOK))
				for _, a := range page.Data {
					if a.ID == p {
						continue
					}
					if got[a.ID] {
						t.Fatalf("asset %s listed twice", a.ID)
					}
					got[a.ID] = true
				}
				if !page.Pagination.HasMore {
					break
				}
				cursor = page.Pagination.NextCursor
			}
			if fmt.Sprint(sortedKeys(got)) != fmt.Sprint(sortedKeys(want)) {
				t.Fatalf("search %s found %d assets, want %d", tt.name, len(got), len(want))
			}
		})
	}
	t.Run("cursor with another body", func(t *testing.T) {
		page := decode[kms.List[*kms.Asset]](t, e.do(t, "POST", "/assets/search?limit=2", e.root, map[string]any{"parents": []string{p}}).want(t, http.StatusOK))
		e.do(t, "POST", "/assets/search?limit=2&cursor="+page.Pagination.NextCursor, e.root, map[string]any{"keyringId": r1.Ring.ID}).
			wantError(t, http.StatusBadRequest, "invalid")
	})
	t.Run("bad body", func(t *testing.T) {
		e.do(t, "POST", "/assets/search", e.root, map[string]any{"start": "yesterday"}).wantError(t, http.StatusBadRequest, "invalid")
		e.do(t, "POST", "/assets/search?limit=0", e.root, nil).wantError(t, http.StatusBadRequest, "invalid")
	})
	e.checkAuth(t, "POST", "/assets/search", map[string]any{})
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestAssetAccessThroughRings checks who may update an Asset through an
// encrypt call, and who sees its data in the answers of encrypt and
// decrypt: an update needs the encrypt flag of the ring the Asset was
// created through, or assets.write; stored data goes only to a caller
// that may read the Asset (assets.read, same Account).
func TestAssetAccessThroughRings(t *testing.T) {
	e := newEnv(t)
	e.createRing(t, "ra")
	e.createRing(t, "rc")
	creator, _ := e.apiKey(t, "keyring.rc.encrypt")
	created := decode[kms.EncryptResult](t, e.do(t, "POST", "/ks/encrypt", creator,
		map[string]any{"ringname": "rc", "asset": map[string]any{"data": map[string]any{"secret": "s3.cret"}}}).want(t, http.StatusOK))
	id := created.Asset.ID
	if created.Asset.Data["secret"] != "s3.cret" {
		t.Fatalf("create answered data %v, want the data sent", created.Asset.Data)
	}
	stored := func(t *testing.T) map[string]any {
		t.Helper()
		return decode[kms.Asset](t, e.do(t, "GET", "/assets/"+id, e.root, nil).want(t, http.StatusOK)).Data
	}

	t.Run("another ring's encrypt flag neither reads nor updates", func(t *testing.T) {
		other, _ := e.apiKey(t, "keyring.ra.encrypt")
		for _, asset := range []map[string]any{
			{"assetId": id},
			{"assetId": id, "data": map[string]any{"secret": "overwritten"}},
			{"assetId": id, "parents": []string{}},
		} {
			r := e.do(t, "POST", "/ks/encrypt", other, map[string]any{"ringname": "ra", "asset": asset})
			r.wantError(t, http.StatusForbidden, "permission_denied")
			if strings.Contains(string(r.body), "s3.cret") {
				t.Fatalf("a denied update answered the Asset's data: %s", r.body)
			}
		}
		if d := stored(t); d["secret"] != "s3.cret" {
			t.Fatalf("data after denied updates = %v, want it unchanged", d)
		}
		denied := e.activity(t, func(a *kms.Activity) bool {
			return a.Action == "encrypt" && !a.Valid && a.Props["assetId"] == id
		})
		if len(denied) != 3 {
			t.Fatalf("%d denied encrypt records name the Asset, want 3", len(denied))
		}
	})
	t.Run("the creating ring's flag updates; stored data needs assets.read", func(t *testing.T) {
		r := e.do(t, "POST", "/ks/encrypt", creator, map[string]any{"ringname": "rc", "asset": map[string]any{"assetId": id, "parents": []string{}}}).
			want(t, http.StatusOK)
		res := decode[kms.EncryptResult](t, r)
		if res.Asset == nil || res.Asset.ID != id || len(res.Asset.Data) != 0 || strings.Contains(string(r.body), "s3.cret") {
			t.Fatalf("an update without data by a caller without assets.read answered %s, want the Asset without its data", r.body)
		}
		reader, _ := e.apiKey(t, "keyring.rc.encrypt", "assets.read")
		res = decode[kms.EncryptResult](t, e.do(t, "POST", "/ks/encrypt", reader, map[string]any{"ringname": "rc", "asset": map[string]any{"assetId": id}}).
			want(t, http.StatusOK))
		if res.Asset.Data["secret"] != "s3.cret" {
			t.Fatalf("an update by a caller with assets.read answered data %v, want the stored data", res.Asset.Data)
		}
	})
	var parentID string
	t.Run("assets.write updates through any ring", func(t *testing.T) {
		writer, _ := e.apiKey(t, "keyring.ra.encrypt", "assets.write")
		parent := decode[kms.EncryptResult](t, e.do(t, "POST", "/ks/encrypt", writer,
			map[string]any{"ringname": "ra", "asset": map[string]any{"data": map[string]any{}}}).want(t, http.StatusOK))
		parentID = parent.Asset.ID
		res := decode[kms.EncryptResult](t, e.do(t, "POST", "/ks/encrypt", writer,
			map[string]any{"ringname": "ra", "asset": map[string]any{"assetId": id, "data": map[string]any{"secret": "s4"}, "parents": []string{parentID}}}).want(t, http.StatusOK))
		if res.Asset.Data["secret"] != "s4" {
			t.Fatalf("an update that sets data answered data %v, want the data sent", res.Asset.Data)
		}
		if d := stored(t); d["secret"] != "s4" {
			t.Fatalf("data after an update with assets.write = %v", d)
		}
		created = res
	})
	t.Run("decrypt answers data and parents only to a caller that may read the Asset", func(t *testing.T) {
		other, err := e.svc.CreateAccount(e.rootCtx, kms.AccountInput{UID: "elsewhere"})
		if err != nil {
			t.Fatal(err)
		}
		tests := []struct {
			name   string
			secret string
			data   bool
		}{
			{"decrypt flag alone", e.keyInSecret(t, e.account, "keyring.ra.decrypt"), false},
			{"with assets.read", e.keyInSecret(t, e.account, "keyring.ra.decrypt", "assets.read"), true},
			{"assets.read of another Account", e.keyInSecret(t, other.ID, "keyring.ra.decrypt", "assets.read"), false},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				r := e.do(t, "POST", "/ks/decrypt", tt.secret, map[string]any{"hash": created.Hash, "header": created.Header}).want(t, http.StatusOK)
				res := decode[kms.DecryptResult](t, r)
				if !res.Asset.Valid || res.Asset.ID != id || res.Key == nil {
					t.Fatalf("decrypt = %s, want a verified Asset and the key", r.body)
				}
				if got := res.Asset.Data["secret"] == "s4"; got != tt.data {
					t.Fatalf("decrypt answered data %v; want data: %v", res.Asset.Data, tt.data)
				}
				if !tt.data && (res.Asset.Data == nil || len(res.Asset.Data) != 0) {
					t.Fatalf("decrypt answered data %v, want {}", res.Asset.Data)
				}
				if tt.data && (len(res.Asset.Parents) != 1 || res.Asset.Parents[0] != parentID) {
					t.Fatalf("decrypt answered parents %v, want [%s]", res.Asset.Parents, parentID)
				}
				if !tt.data && (res.Asset.Parents == nil || len(res.Asset.Parents) != 0 || strings.Contains(string(r.body), parentID)) {
					t.Fatalf("decrypt answered %s, want parents [] and no parent ID", r.body)
				}
			})
		}
	})
}

// TestSearchTimeBoundsSaturate searches Assets and activity with start and
// end at the far ends of int64 and past the times an ID can hold: a bound
// beyond every record's time acts as no bound (end) or as one that nothing
// passes (start), never as a time that wrapped around.
func TestSearchTimeBoundsSaturate(t *testing.T) {
	e := newEnv(t)
	ring := e.createRing(t, "times")
	secret, keyID := e.apiKey(t, "keyring.times.encrypt")
	const n = 3
	for i := 0; i < n; i++ {
		e.do(t, "POST", "/ks/encrypt", secret, map[string]any{"ringname": "times", "asset": map[string]any{"data": map[string]any{"i": i}}}).
			want(t, http.StatusOK)
	}
	const (
		maxInt64 = math.MaxInt64
		minInt64 = math.MinInt64
		idMax    = 1<<48 - 1 // the largest time an ID holds
	)
	tests := []struct {
		name       string
		start, end any // nil: not sent
		all        bool
	}{
		{"end max int64", nil, int64(maxInt64), true},
		{"end max int64 - 1", nil, int64(maxInt64 - 1), true},
		{"end past an ID's time", nil, int64(idMax + 1), true},
		{"end at an ID's largest time", nil, int64(idMax), true},
		{"end 2^50", nil, int64(1 << 50), true},
		{"start min int64", int64(minInt64), nil, true},
		{"start min int64, end max int64", int64(minInt64), int64(maxInt64), true},
		{"start 0, end max int64", int64(0), int64(maxInt64), true},
		{"start past an ID's time", int64(idMax + 1), nil, false},
		{"start 2^50", int64(1 << 50), nil, false},
		{"start max int64", int64(maxInt64), nil, false},
		{"end min int64", nil, int64(minInt64), false},
		{"end -1", nil, int64(-1), false},
	}
	count := func(t *testing.T, path string, body map[string]any) int {
		t.Helper()
		got, cursor := 0, ""
		for pages := 0; ; pages++ {
			if pages > 10 {
				t.Fatal("too many pages")
			}
			p := path + "?limit=2"
			if cursor != "" {
				p += "&cursor=" + cursor
			}
			page := decode[kms.List[map[string]any]](t, e.do(t, "POST", p, e.root, body).want(t, http.StatusOK))
			got += len(page.Data)
			if !page.Pagination.HasMore {
				return got
			}
			cursor = page.Pagination.NextCursor
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bounds := func(body map[string]any) map[string]any {
				if tt.start != nil {
					body["start"] = tt.start
				}
				if tt.end != nil {
					body["end"] = tt.end
				}
				return body
			}
			want := 0
			if tt.all {
				want = n
			}
			if got := count(t, "/assets/search", bounds(map[string]any{"keyringId": ring.Ring.ID})); got != want {
				t.Errorf("asset search found %d, want %d", got, want)
			}
			if got := count(t, "/assets/search", bounds(map[string]any{})); tt.all && got < n || !tt.all && got != 0 {
				t.Errorf("asset search by time alone found %d, want %s", got, map[bool]string{true: "every Asset", false: "none"}[tt.all])
			}
			if got := count(t, "/auth/search/activity", bounds(map[string]any{"keyid": keyID, "action": "encrypt"})); got != want {
				t.Errorf("activity search found %d, want %d", got, want)
			}
		})
	}
}
