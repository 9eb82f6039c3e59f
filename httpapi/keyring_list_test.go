package httpapi_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/ringkms/kms"
)

// page is a list answer.
type page[T any] struct {
	Data       []T            `json:"data"`
	Pagination map[string]any `json:"pagination"`
}

// pageAll pages through path with limit, checking the pagination rules on
// every page, and returns the items in order.
func pageAll[T any](t *testing.T, e *env, path string, limit int) []T {
	t.Helper()
	var all []T
	cursor := ""
	for i := 0; ; i++ {
		if i > 100 {
			t.Fatalf("GET %s: more than 100 pages", path)
		}
		p := path + "?limit=" + strconv.Itoa(limit)
		if cursor != "" {
			p += "&cursor=" + cursor
		}
		r := e.do(t, "GET", p, e.root, nil).want(t, http.StatusOK)
		pg := decode[page[T]](t, r)
		if pg.Data == nil {
			t.Fatalf("GET %s: data = null, want an array", p)
		}
		pag := pg.Pagination
		if pag["limit"] != float64(limit) || pag["count"] != float64(len(pg.Data)) {
			t.Errorf("GET %s: pagination %v, want limit %d, count %d", p, pag, limit, len(pg.Data))
		}
		hasMore, ok := pag["hasMore"].(bool)
		if !ok {
			t.Fatalf("GET %s: pagination %v has no boolean hasMore", p, pag)
		}
		next, present := pag["nextCursor"].(string)
		if present != hasMore || (present && next == "") {
			t.Fatalf("GET %s: hasMore = %v but nextCursor = %q (present %v): nextCursor must be present exactly when hasMore", p, hasMore, next, present)
		}
		if hasMore && len(pg.Data) != limit {
			t.Errorf("GET %s: a page before the last has %d items, want %d", p, len(pg.Data), limit)
		}
		all = append(all, pg.Data...)
		if !hasMore {
			return all
		}
		cursor = next
	}
}

func TestListKeyRings(t *testing.T) {
	e := newEnv(t)
	want := map[string]bool{}
	for i := range 25 {
		name := "ring-" + strconv.Itoa(100+i)
		e.createRing(t, name)
		want[name] = true
	}

	for _, limit := range []int{7, 25, 100} {
		t.Run("limit "+strconv.Itoa(limit), func(t *testing.T) {
			rings := pageAll[kms.KeyRing](t, e, "/ks/keyrings", limit)
			seen := map[string]bool{}
			for i, r := range rings {
				if seen[r.Name] {
					t.Errorf("ring %q listed twice", r.Name)
				}
				seen[r.Name] = true
				if !want[r.Name] {
					t.Errorf("ring %q listed but not created", r.Name)
				}
				if i > 0 && rings[i-1].Name >= r.Name {
					t.Errorf("rings out of name order: %q before %q", rings[i-1].Name, r.Name)
				}
			}
			if len(seen) != len(want) {
				t.Errorf("listed %d rings, want %d", len(seen), len(want))
			}
		})
	}
	t.Run("default limit", func(t *testing.T) {
		r := e.do(t, "GET", "/ks/keyrings", e.root, nil).want(t, http.StatusOK)
		pg := decode[page[kms.KeyRing]](t, r)
		if pg.Pagination["limit"] != float64(100) || len(pg.Data) != 25 || pg.Pagination["hasMore"] != false {
			t.Errorf("GET /ks/keyrings = %v with %d items, want limit 100, 25 items, hasMore false", pg.Pagination, len(pg.Data))
		}
		if _, ok := pg.Pagination["nextCursor"]; ok {
			t.Errorf("GET /ks/keyrings: last page has nextCursor: %v", pg.Pagination)
		}
	})
	t.Run("limit 20000 is capped", func(t *testing.T) {
		r := e.do(t, "GET", "/ks/keyrings?limit=20000", e.root, nil).want(t, http.StatusOK)
		if got := decode[page[kms.KeyRing]](t, r).Pagination["limit"]; got != float64(10000) {
			t.Errorf("GET /ks/keyrings?limit=20000: pagination.limit = %v, want 10000", got)
		}
	})
	for _, limit := range []string{"0", "-1", "abc", "1.5", "%20"} {
		t.Run("400 limit "+limit, func(t *testing.T) {
			e.do(t, "GET", "/ks/keyrings?limit="+limit, e.root, nil).wantError(t, http.StatusBadRequest, "invalid")
		})
	}
	first := decode[page[kms.KeyRing]](t, e.do(t, "GET", "/ks/keyrings?limit=2", e.root, nil).want(t, http.StatusOK))
	cursor := first.Pagination["nextCursor"].(string)
	t.Run("400 tampered cursor", func(t *testing.T) {
		e.do(t, "GET", "/ks/keyrings?limit=2&cursor="+flip(cursor), e.root, nil).wantError(t, http.StatusBadRequest, "invalid")
		e.do(t, "GET", "/ks/keyrings?cursor=garbage!", e.root, nil).wantError(t, http.StatusBadRequest, "invalid")
	})
	t.Run("400 cursor of a key listing", func(t *testing.T) {
		for range 2 {
			e.do(t, "POST", "/ks/rotate", e.root, map[string]any{"ringname": "ring-100"}).want(t, http.StatusOK)
		}
		keys := decode[page[kms.Key]](t, e.do(t, "GET", "/ks/keyrings/ring-100/keys?limit=1", e.root, nil).want(t, http.StatusOK))
		kc, _ := keys.Pagination["nextCursor"].(string)
		if kc == "" {
			t.Fatalf("key listing has no nextCursor: %v", keys.Pagination)
		}
		e.do(t, "GET", "/ks/keyrings?cursor="+kc, e.root, nil).wantError(t, http.StatusBadRequest, "invalid")
		e.do(t, "GET", "/ks/keyrings/ring-100/keys?cursor="+cursor, e.root, nil).wantError(t, http.StatusBadRequest, "invalid")
	})
	e.checkAuth(t, "GET", "/ks/keyrings", nil)
	t.Run("200 with keyring.*.read", func(t *testing.T) {
		secret, _ := e.apiKey(t, "keyring.*.read")
		e.do(t, "GET", "/ks/keyrings?limit=1", secret, nil).want(t, http.StatusOK)
	})
}

func TestListKeys(t *testing.T) {
	e := newEnv(t)
	created := e.createRing(t, "keys")
	other := e.createRing(t, "other")
	ids := []string{created.Key.ID}
	for range 24 {
		r := e.do(t, "POST", "/ks/rotate", e.root, map[string]any{"ringname": "keys"}).want(t, http.StatusOK)
		ids = append(ids, decode[struct{ Key kms.Key }](t, r).Key.ID)
	}

	for _, path := range []string{"/ks/keyrings/keys/keys", "/ks/keyrings/KEYS/keys", "/ks/keyrings/" + created.Ring.ID + "/keys"} {
		t.Run(path, func(t *testing.T) {
			var items []map[string]any
			if strings.Contains(path, created.Ring.ID) {
				items = pageAllQuery(t, e, path, "id=true", 7)
			} else {
				items = pageAll[map[string]any](t, e, path, 7)
			}
			if len(items) != len(ids) {
				t.Fatalf("listed %d keys, want %d", len(items), len(ids))
			}
			// Each key once, oldest first. Key IDs start with their
			// creation time in milliseconds and the list is in ID order,
			// so keys made within one millisecond may come in any order.
			want := map[string]bool{}
			for _, id := range ids {
				want[id] = true
			}
			for i, it := range items {
				id, _ := it["id"].(string)
				if !want[id] {
					t.Errorf("key %d = %q: not a key of the ring, or listed twice", i, id)
				}
				delete(want, id)
				if i > 0 && id[:12] < items[i-1]["id"].(string)[:12] {
					t.Errorf("key %d (%s) is older than key %d (%s): want oldest first", i, id, i-1, items[i-1]["id"])
				}
				if it["type"] != "aes256" {
					t.Errorf("key %d type = %v, want aes256", i, it["type"])
				}
				if _, ok := it["keyData"]; ok {
					t.Errorf("key list item %d has keyData: %v", i, it)
				}
				if _, ok := it["props"].(map[string]any); !ok {
					t.Errorf("key list item %d has no props object: %v", i, it)
				}
			}
		})
	}

	first := decode[page[kms.Key]](t, e.do(t, "GET", "/ks/keyrings/keys/keys?limit=3", e.root, nil).want(t, http.StatusOK))
	cursor := first.Pagination["nextCursor"].(string)
	e.wantGetErrors(t, "", []getError{
		{"unknown ring", "/ks/keyrings/nope/keys", http.StatusNotFound, "not_found"},
		{"unknown ring ID", "/ks/keyrings/0123456789abcdef0123456789abcdef/keys?id=true", http.StatusNotFound, "not_found"},
		{"bad name", "/ks/keyrings/bad%20name!/keys", http.StatusBadRequest, "invalid"},
		{"malformed ID", "/ks/keyrings/xyz/keys?id=true", http.StatusNotFound, "not_found"},
		{"limit 0", "/ks/keyrings/keys/keys?limit=0", http.StatusBadRequest, "invalid"},
		{"limit -1", "/ks/keyrings/keys/keys?limit=-1", http.StatusBadRequest, "invalid"},
		{"limit abc", "/ks/keyrings/keys/keys?limit=abc", http.StatusBadRequest, "invalid"},
		{"tampered cursor", "/ks/keyrings/keys/keys?cursor=" + flip(cursor), http.StatusBadRequest, "invalid"},
		{"cursor of another ring", "/ks/keyrings/other/keys?cursor=" + cursor, http.StatusBadRequest, "invalid"},
	})
	t.Run("limit 20000 is capped", func(t *testing.T) {
		r := e.do(t, "GET", "/ks/keyrings/keys/keys?limit=20000", e.root, nil).want(t, http.StatusOK)
		pg := decode[page[kms.Key]](t, r)
		if pg.Pagination["limit"] != float64(10000) || len(pg.Data) != 25 {
			t.Errorf("GET /ks/keyrings/keys/keys?limit=20000 = %v with %d items, want limit 10000 and 25 items", pg.Pagination, len(pg.Data))
		}
	})
	t.Run("one key in another ring", func(t *testing.T) {
		pg := decode[page[kms.Key]](t, e.do(t, "GET", "/ks/keyrings/other/keys", e.root, nil).want(t, http.StatusOK))
		if len(pg.Data) != 1 || pg.Data[0].ID != other.Key.ID {
			t.Errorf("GET /ks/keyrings/other/keys = %+v, want only %s", pg.Data, other.Key.ID)
		}
	})
	e.checkAuth(t, "GET", "/ks/keyrings/keys/keys", nil)
}

// pageAllQuery is pageAll with an extra query parameter.
func pageAllQuery(t *testing.T, e *env, path, query string, limit int) []map[string]any {
	t.Helper()
	var all []map[string]any
	cursor := ""
	for range 100 {
		p := path + "?" + query + "&limit=" + strconv.Itoa(limit)
		if cursor != "" {
			p += "&cursor=" + cursor
		}
		pg := decode[page[map[string]any]](t, e.do(t, "GET", p, e.root, nil).want(t, http.StatusOK))
		all = append(all, pg.Data...)
		next, _ := pg.Pagination["nextCursor"].(string)
		if pg.Pagination["hasMore"] != true {
			if next != "" {
				t.Errorf("GET %s: last page has nextCursor", p)
			}
			return all
		}
		cursor = next
	}
	t.Fatalf("GET %s: more than 100 pages", path)
	return nil
}
