package kms

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/ringkms/kms/internal/jsonenc"
)

// Asset is a stored record that encrypt calls create and update, with its
// parent Assets. Headers sign an Asset's ID and a digest of its data and
// parents, so decrypt can tell whether it changed since.
type Asset struct {
	ID        string         `json:"id"`
	CreatedAt time.Time      `json:"createdAt"`
	UpdatedAt time.Time      `json:"updatedAt"`
	Data      map[string]any `json:"data"`
	Parents   []string       `json:"parents"`
	APIKeyID  string         `json:"apikeyId"`  // the API key that created it
	AccountID string         `json:"accountId"` // the Account it belongs to
	KeyRingID string         `json:"keyringId"` // the ring of the encrypt call that created it
}

// assetRecord is an Asset as stored: its data as canonical JSON, so the
// digest is computed over exactly the bytes that are kept.
type assetRecord struct {
	ID        string          `json:"id"`
	CreatedAt time.Time       `json:"createdAt"`
	UpdatedAt time.Time       `json:"updatedAt"`
	Data      json.RawMessage `json:"data"`
	Parents   []string        `json:"parents"`
	APIKeyID  string          `json:"apikeyId"`
	AccountID string          `json:"accountId"`
	KeyRingID string          `json:"keyringId"`
	// KeyIDs are the keys of the encrypt calls that created or updated
	// the Asset, sorted: the keys whose leak exposes data of the Asset.
	KeyIDs []string `json:"keyIds,omitempty"`

	sized // bytes as read by loadAsset: its size in a page
}

// Limits of one Asset.
const (
	MaxAssetParents   = 100
	MaxAssetDataBytes = 64 << 10
	MaxLineageDepth   = 16
	maxLineageNodes   = 1000
)

// Flags of the Asset store.
const (
	FlagAssetsRead   = "assets.read"   // read and search Assets, and their lineage; see their data in encrypt and decrypt answers
	FlagAssetsWrite  = "assets.write"  // update, through an encrypt call on any ring, Assets created through another
	FlagAssetsDelete = "assets.delete" // delete Assets
)

func (r *assetRecord) asset() (*Asset, error) {
	a := &Asset{ID: r.ID, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, Parents: r.Parents,
		APIKeyID: r.APIKeyID, AccountID: r.AccountID, KeyRingID: r.KeyRingID}
	if a.Parents == nil {
		a.Parents = []string{}
	}
	d := json.NewDecoder(bytes.NewReader(r.Data))
	d.UseNumber()
	if err := d.Decode(&a.Data); err != nil {
		return nil, err
	}
	if a.Data == nil {
		a.Data = map[string]any{}
	}
	return a, nil
}

// digest is what a header signs of an Asset (assetDigest).
func (r *assetRecord) digest() [32]byte { return assetDigest(r.Data, r.Parents) }

// assetDigest is what a header signs of an Asset (docs/FORMAT.md section
// 4.1): SHA-256 of a label, the canonical JSON of its data (canonicalData)
// and its parent IDs, sorted and without duplicates (cleanParents).
func assetDigest(data json.RawMessage, parents []string) [32]byte {
	h := sha256.New()
	h.Write([]byte("ringkms/asset/v1\x00"))
	h.Write(data)
	h.Write([]byte{0})
	h.Write([]byte(strings.Join(parents, ",")))
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// canonicalData returns data as canonical JSON (object members sorted,
// numbers as written), refusing data over MaxAssetDataBytes.
func canonicalData(data map[string]any) (json.RawMessage, error) {
	if data == nil {
		data = map[string]any{}
	}
	b, err := json.Marshal(data)
	if err != nil {
		return nil, Errorf(KindInvalid, "asset.data cannot be encoded: %v", err)
	}
	if bytes.Contains(b, []byte(`\ufffd`)) {
		// A string that was not UTF-8 (given through the Go API: JSON
		// decoding has replaced such bytes already) is written with
		// U+FFFD escaped, which reads back as U+FFFD and is written
		// again unescaped: the stored form is the one that reads back
		// the same, so a verifier recomputes the digest from the data
		// the service returns (docs/FORMAT.md section 4.1).
		b = jsonenc.Canonical(b)
	}
	if len(b) > MaxAssetDataBytes {
		return nil, Errorf(KindInvalid, "asset.data is %d bytes, more than the %d allowed", len(b), MaxAssetDataBytes)
	}
	return b, nil
}

// cleanParents validates parent IDs and returns them sorted, without
// duplicates.
func cleanParents(parents []string) ([]string, error) {
	if len(parents) > MaxAssetParents {
		return nil, Errorf(KindInvalid, "asset.parents: at most %d", MaxAssetParents)
	}
	out := make([]string, 0, len(parents))
	for _, p := range parents {
		if _, ok := parseID(p); !ok {
			return nil, Errorf(KindInvalid, "asset.parents: %q is not an Asset ID", p)
		}
		out = append(out, p)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

func loadAsset(tx Txn, id string) (*assetRecord, error) {
	return getSized[assetRecord](tx, join(pfxAsset, []byte(id)), Errorf(KindNotFound, "asset %s not found", id))
}

// writeAsset creates or updates an Asset for an encrypt call by p on ring
// ringID handing out key keyID, inside the journal job of that call, and
// returns the record written. A new Asset gets the ID newID.
func (s *Service) writeAsset(tx Txn, p *Principal, ringID, keyID, newID string, in *AssetInput, data json.RawMessage, parents []string, now time.Time) (*assetRecord, error) {
	var r *assetRecord
	if in.AssetID != "" {
		cur, err := loadAsset(tx, in.AssetID)
		if err != nil {
			return nil, err
		}
		if !visibleTo(p, cur.AccountID) {
			return nil, Errorf(KindNotFound, "asset %s not found", in.AssetID)
		}
		r = cur
		r.UpdatedAt = now
		if in.Data != nil {
			r.Data = data
		}
		if in.Parents != nil {
			if err := s.checkNoCycle(tx, r.ID, parents); err != nil {
				return nil, err
			}
			for _, old := range r.Parents {
				if err := tx.Delete(join(pfxAssetChild, []byte(old), sep, []byte(r.ID))); err != nil {
					return nil, err
				}
			}
			r.Parents = parents
		}
	} else {
		r = &assetRecord{ID: newID, CreatedAt: now, UpdatedAt: now, Data: data, Parents: parents,
			APIKeyID: p.ID, AccountID: p.AccountID, KeyRingID: ringID}
		for _, idx := range [][]byte{
			join(pfxAssetByKey, []byte(r.APIKeyID), sep, []byte(r.ID)),
			join(pfxAssetByAccount, []byte(r.AccountID), sep, []byte(r.ID)),
			join(pfxAssetByRing, []byte(r.KeyRingID), sep, []byte(r.ID)),
		} {
			if err := tx.Set(idx, nil); err != nil {
				return nil, err
			}
		}
	}
	if i, found := slices.BinarySearch(r.KeyIDs, keyID); !found {
		r.KeyIDs = slices.Insert(r.KeyIDs, i, keyID)
		if err := tx.Set(join(pfxAssetBySeal, []byte(keyID), sep, []byte(r.ID)), nil); err != nil {
			return nil, err
		}
	}
	for _, parent := range r.Parents {
		pr, err := loadAsset(tx, parent)
		if isNotFound(err) || err == nil && !visibleTo(p, pr.AccountID) {
			return nil, Errorf(KindNotFound, "parent asset %s not found", parent)
		} else if err != nil {
			return nil, err
		}
		if err := tx.Set(join(pfxAssetChild, []byte(parent), sep, []byte(r.ID)), nil); err != nil {
			return nil, err
		}
	}
	v, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	return r, tx.Set(join(pfxAsset, []byte(r.ID)), v)
}

// authorizeAssetUpdate checks that p may update the Asset id through an
// encrypt call on ring r: the Asset must be one p sees (else NotFound),
// and p must hold the encrypt flag of the ring the Asset was created
// through (which it holds when that is r) or assets.write. A denial is
// recorded. An Asset's Account and ring never change, so the check still
// holds when the call's journal job writes the Asset.
func (s *Service) authorizeAssetUpdate(ctx context.Context, p *Principal, r *ringRecord, id string) error {
	ring := strings.ToLower(r.Name)
	cur, err := viewOne(ctx, s.store, func(tx Txn) (*assetRecord, error) { return s.visibleAsset(tx, p, id) })
	if err != nil {
		return s.recordFailure(p, "encrypt", ring, internalError("read asset", err))
	}
	if cur.KeyRingID == r.ID || p.Can(FlagAssetsWrite) {
		return nil
	}
	flag := FlagAssetsWrite // when the creating ring is gone
	if from, err := s.ringByID(ctx, groupKS, cur.KeyRingID); err == nil {
		if flag = RingFlag(from.Name, OpEncrypt); p.Can(flag) {
			return nil
		}
	} else if !isNotFound(err) {
		return err
	}
	act := s.newActivity(p, "encrypt", ring, false, map[string]any{"flag": flag, "assetId": id})
	if err := s.submit(act, nil, nil); err != nil {
		return err
	}
	return Errorf(KindPermissionDenied, "updating asset %s needs the encrypt flag of the ring it was created through, or %s", id, FlagAssetsWrite)
}

// checkNoCycle refuses parents that have id among their ancestors.
func (s *Service) checkNoCycle(tx Txn, id string, parents []string) error {
	seen := map[string]bool{}
	queue := slices.Clone(parents)
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if cur == id {
			return Errorf(KindInvalid, "asset.parents: asset %s would become its own ancestor", id)
		}
		if seen[cur] {
			continue
		}
		seen[cur] = true
		if len(seen) > 10*maxLineageNodes {
			return Errorf(KindInvalid, "asset.parents: the ancestry is too large to check")
		}
		r, err := loadAsset(tx, cur)
		if isNotFound(err) {
			continue // reported as a missing parent by the caller
		} else if err != nil {
			return err
		}
		queue = append(queue, r.Parents...)
	}
	return nil
}

// verifyAsset checks the Asset a header signs: that it still exists and
// that its data and parents are unchanged since the header was signed.
func (s *Service) verifyAsset(ctx context.Context, seal *assetSeal) (*Asset, string, error) {
	id := hex.EncodeToString(seal.id[:])
	r, err := viewOne(ctx, s.store, func(tx Txn) (*assetRecord, error) { return loadAsset(tx, id) })
	if isNotFound(err) {
		return nil, "asset failed verification: asset " + id + " was deleted", nil
	} else if err != nil {
		return nil, "", internalError("read asset", err)
	}
	if r.digest() != seal.digest {
		return nil, "asset failed verification: the data or parents of asset " + id + " changed since this header was signed", nil
	}
	a, err := r.asset()
	if err != nil {
		return nil, "", internalError("decode asset", err)
	}
	return a, "", nil
}

// GetAsset returns an Asset. It needs assets.read, and the Asset must
// belong to the caller's Account (or the caller holds accounts.all).
func (s *Service) GetAsset(ctx context.Context, id string) (*Asset, error) {
	p, err := s.authorize(ctx, "asset.read", "", FlagAssetsRead)
	if err != nil {
		return nil, err
	}
	return audited(s, ctx, p, "asset.read", "", func(tx Txn) (*Asset, map[string]any, error) {
		r, err := s.visibleAsset(tx, p, id)
		if err != nil {
			return nil, nil, err
		}
		a, err := r.asset()
		return a, map[string]any{"assetId": id}, err
	})
}

func (s *Service) visibleAsset(tx Txn, p *Principal, id string) (*assetRecord, error) {
	if _, ok := parseID(id); !ok {
		return nil, Errorf(KindNotFound, "asset not found") // no Asset has such an ID
	}
	r, err := loadAsset(tx, id)
	if err != nil {
		return nil, err
	}
	if !visibleTo(p, r.AccountID) {
		return nil, Errorf(KindNotFound, "asset %s not found", id)
	}
	return r, nil
}

// DeleteAssetResult names the deleted Asset.
type DeleteAssetResult struct {
	ID      string `json:"id"`
	Deleted bool   `json:"deleted"`
}

// DeleteAsset deletes an Asset. An Asset that other Assets name as a parent
// cannot be deleted (Conflict): delete or re-parent its children first, so
// that no lineage is left pointing at nothing. Headers that signed the
// Asset then fail verification on decrypt. It needs assets.delete.
func (s *Service) DeleteAsset(ctx context.Context, id string) (*DeleteAssetResult, error) {
	p, err := s.authorize(ctx, "asset.delete", "", FlagAssetsDelete)
	if err != nil {
		return nil, err
	}
	act := s.newActivity(p, "asset.delete", "", true, map[string]any{"assetId": id})
	err = s.submit(act, func(tx Txn) error {
		r, err := s.visibleAsset(tx, p, id)
		if err != nil {
			return err
		}
		var children []string
		err = tx.Scan(ScanOptions{Prefix: join(pfxAssetChild, []byte(id), sep), KeysOnly: true}, func(k, _ []byte) (bool, error) {
			children = append(children, string(k[len(pfxAssetChild)+len(id)+1:]))
			return len(children) < 5, nil
		})
		if err != nil {
			return err
		}
		if len(children) > 0 {
			return Errorf(KindConflict, "asset %s is a parent of other assets (%s): delete or re-parent them first", id, strings.Join(children, ", "))
		}
		dels := [][]byte{
			join(pfxAsset, []byte(id)),
			join(pfxAssetByKey, []byte(r.APIKeyID), sep, []byte(id)),
			join(pfxAssetByAccount, []byte(r.AccountID), sep, []byte(id)),
			join(pfxAssetByRing, []byte(r.KeyRingID), sep, []byte(id)),
		}
		for _, parent := range r.Parents {
			dels = append(dels, join(pfxAssetChild, []byte(parent), sep, []byte(id)))
		}
		for _, key := range r.KeyIDs {
			dels = append(dels, join(pfxAssetBySeal, []byte(key), sep, []byte(id)))
		}
		for _, k := range dels {
			if err := tx.Delete(k); err != nil {
				return err
			}
		}
		return nil
	}, nil)
	if err != nil {
		return nil, err
	}
	return &DeleteAssetResult{ID: id, Deleted: true}, nil
}

// AssetFilter selects Assets in SearchAssets. Every field set must match.
type AssetFilter struct {
	APIKeyID  string `json:"apikeyId,omitempty"`
	AccountID string `json:"accountId,omitempty"`
	KeyRingID string `json:"keyringId,omitempty"`
	// KeyID selects the Assets that an encrypt call handing out that key
	// created or updated: the data to encrypt again when the key leaks.
	KeyID   string         `json:"keyId,omitempty"`
	Parents []string       `json:"parents,omitempty"` // Assets that have all of these parents
	Start   *int64         `json:"start,omitempty"`   // createdAt >= start, epoch milliseconds
	End     *int64         `json:"end,omitempty"`     // createdAt <= end, epoch milliseconds
	Data    map[string]any `json:"data,omitempty"`    // every member equals the Asset's
}

// SearchAssets pages through the Assets that match f, oldest first. One
// filter is served from an index (in this order of preference: the first
// parent, keyId, keyringId, apikeyId, accountId, the time range); the others are
// checked on the Assets that index yields. It needs assets.read; without
// accounts.all, only the caller's Account's Assets are searched.
func (s *Service) SearchAssets(ctx context.Context, f AssetFilter, req PageRequest) (*List[*Asset], error) {
	p, err := s.authorize(ctx, "asset.search", "", FlagAssetsRead)
	if err != nil {
		return nil, err
	}
	if !p.Can(FlagAllAccounts) {
		if f.AccountID != "" && f.AccountID != p.AccountID {
			return nil, s.recordFailure(p, "asset.search", "", Errorf(KindPermissionDenied, "cannot search the assets of another account without %s", FlagAllAccounts))
		}
		f.AccountID = p.AccountID
	}
	parents, err := cleanParents(f.Parents)
	if err != nil {
		return nil, err
	}
	f.Parents = parents
	scope, err := json.Marshal(f)
	if err != nil {
		return nil, Errorf(KindInvalid, "filter cannot be encoded: %v", err)
	}
	var want map[string]json.RawMessage
	if len(f.Data) > 0 {
		want = make(map[string]json.RawMessage, len(f.Data))
		for k, v := range f.Data {
			b, err := json.Marshal(v)
			if err != nil {
				return nil, Errorf(KindInvalid, "data.%s cannot be encoded", k)
			}
			want[k] = jsonenc.Canonical(b)
		}
	}

	// Choose the index. Keys of every index end in the Asset ID, which
	// starts with its creation time, so each index also bounds the time.
	var prefix []byte
	var indexed string
	switch {
	case len(f.Parents) > 0:
		prefix, indexed = join(pfxAssetChild, []byte(f.Parents[0]), sep), "parent"
	case f.KeyID != "":
		prefix, indexed = join(pfxAssetBySeal, []byte(f.KeyID), sep), "key"
	case f.KeyRingID != "":
		prefix, indexed = join(pfxAssetByRing, []byte(f.KeyRingID), sep), "keyring"
	case f.APIKeyID != "":
		prefix, indexed = join(pfxAssetByKey, []byte(f.APIKeyID), sep), "apikey"
	case f.AccountID != "":
		prefix, indexed = join(pfxAssetByAccount, []byte(f.AccountID), sep), "account"
	default:
		prefix, indexed = pfxAsset, "time"
	}
	ps := pageScan{Scope: "assets/" + string(scope), Prefix: prefix}
	from, until, none := timeRange(f.Start, f.End, maxIDTime)
	if from > 0 {
		ps.From = join(prefix, idTimePrefix(from))
	}
	if until > 0 {
		ps.Until = join(prefix, idTimePrefix(until))
	}
	return audited(s, ctx, p, "asset.search", "", func(tx Txn) (*List[*Asset], map[string]any, error) {
		out := &List[*Asset]{Data: []*Asset{}}
		answer := func(err error) (*List[*Asset], map[string]any, error) {
			return out, map[string]any{"count": out.Pagination.Count, "index": indexed}, err
		}
		if none {
			var err error
			out.Pagination, err = s.emptyPage(ps.Scope, req)
			return answer(err)
		}
		var cur *assetRecord
		ps.Match = func(k, _ []byte) (bool, error) {
			id := string(k[len(prefix):])
			r, err := loadAsset(tx, id)
			if isNotFound(err) {
				return false, nil
			} else if err != nil {
				return false, err
			}
			cur = r
			return assetMatches(r, &f, indexed, want), nil
		}
		ps.Size = func(_, _ []byte) int { return cur.stored }
		ps.Emit = func(_, _ []byte) error {
			a, err := cur.asset()
			if err != nil {
				return err
			}
			out.Data = append(out.Data, a)
			return nil
		}
		var err error
		out.Pagination, err = s.pager.scan(ctx, tx, req, ps)
		return answer(err)
	})
}

// maxIDTime is the last epoch millisecond an ID can hold (48 bits).
const maxIDTime = 1<<48 - 1

// idTimePrefix is the hex prefix of the IDs made at epoch millisecond ms
// (at most maxIDTime): IDs sort by creation time (see newID).
func idTimePrefix(ms uint64) []byte {
	var b [8]byte
	for i := 7; i >= 0; i-- {
		b[i] = byte(ms)
		ms >>= 8
	}
	return []byte(hex.EncodeToString(b[2:]))
}

func assetMatches(r *assetRecord, f *AssetFilter, indexed string, want map[string]json.RawMessage) bool {
	if f.AccountID != "" && r.AccountID != f.AccountID ||
		f.APIKeyID != "" && r.APIKeyID != f.APIKeyID ||
		f.KeyRingID != "" && r.KeyRingID != f.KeyRingID {
		return false
	}
	if _, found := slices.BinarySearch(r.KeyIDs, f.KeyID); f.KeyID != "" && !found {
		return false
	}
	for _, p := range f.Parents {
		if _, found := slices.BinarySearch(r.Parents, p); !found {
			return false
		}
	}
	if f.Start != nil && r.CreatedAt.UnixMilli() < *f.Start || f.End != nil && r.CreatedAt.UnixMilli() > *f.End {
		return false
	}
	if len(want) == 0 {
		return true
	}
	var data map[string]json.RawMessage
	if err := json.Unmarshal(r.Data, &data); err != nil {
		return false
	}
	for k, v := range want {
		got, ok := data[k]
		if !ok || !bytes.Equal(jsonenc.Canonical(got), v) {
			return false
		}
	}
	return true
}

// LineageNode is one Asset in a lineage.
type LineageNode struct {
	ID      string   `json:"id"`
	Depth   int      `json:"depth"`   // 1 for parents (or children), 2 for theirs...
	Parents []string `json:"parents"` // the node's own parents
}

// Lineage is an Asset's ancestry and descent, bounded in depth.
type Lineage struct {
	ID          string         `json:"id"`
	Depth       int            `json:"depth"` // the bound used
	Ancestors   []*LineageNode `json:"ancestors"`
	Descendants []*LineageNode `json:"descendants"`
	// Truncated is true when a side had more than 1000 nodes within the
	// depth; the lists then hold the nearest ones.
	Truncated bool `json:"truncated"`
}

// GetLineage returns the ancestors and descendants of an Asset up to depth
// generations away (1 to MaxLineageDepth; 0 means 3), nearest first. It
// needs assets.read; Assets of other Accounts are left out without
// accounts.all.
func (s *Service) GetLineage(ctx context.Context, id string, depth int) (*Lineage, error) {
	p, err := s.authorize(ctx, "asset.lineage", "", FlagAssetsRead)
	if err != nil {
		return nil, err
	}
	if depth == 0 {
		depth = 3
	}
	if depth < 1 || depth > MaxLineageDepth {
		return nil, Errorf(KindInvalid, "depth must be from 1 to %d", MaxLineageDepth)
	}
	out := &Lineage{ID: id, Depth: depth, Ancestors: []*LineageNode{}, Descendants: []*LineageNode{}}
	err = s.store.View(ctx, func(tx Txn) error {
		root, err := s.visibleAsset(tx, p, id)
		if err != nil {
			return err
		}
		// Ancestors: follow parents.
		up := func(r *assetRecord) ([]string, error) { return r.Parents, nil }
		// Descendants: follow the children index.
		down := func(r *assetRecord) ([]string, error) {
			var kids []string
			err := tx.Scan(ScanOptions{Prefix: join(pfxAssetChild, []byte(r.ID), sep), KeysOnly: true}, func(k, _ []byte) (bool, error) {
				kids = append(kids, string(k[len(pfxAssetChild)+len(r.ID)+1:]))
				return len(kids) <= maxLineageNodes, nil
			})
			return kids, err
		}
		var trunc1, trunc2 bool
		if out.Ancestors, trunc1, err = walkLineage(ctx, tx, p, root, depth, up); err != nil {
			return err
		}
		if out.Descendants, trunc2, err = walkLineage(ctx, tx, p, root, depth, down); err != nil {
			return err
		}
		out.Truncated = trunc1 || trunc2
		return nil
	})
	if err != nil {
		return nil, s.recordFailure(p, "asset.lineage", "", internalError("read lineage", err))
	}
	if err := s.record(p, "asset.lineage", "", map[string]any{"assetId": id, "depth": depth}, nil); err != nil {
		return nil, err
	}
	return out, nil
}

// walkLineage walks breadth-first from root along next, up to depth
// generations and maxLineageNodes nodes.
func walkLineage(ctx context.Context, tx Txn, p *Principal, root *assetRecord, depth int,
	next func(*assetRecord) ([]string, error)) ([]*LineageNode, bool, error) {
	out := []*LineageNode{}
	seen := map[string]bool{root.ID: true}
	level := []*assetRecord{root}
	for d := 1; d <= depth && len(level) > 0; d++ {
		var nextLevel []*assetRecord
		for _, r := range level {
			if err := ctx.Err(); err != nil {
				return nil, false, err
			}
			ids, err := next(r)
			if err != nil {
				return nil, false, err
			}
			for _, id := range ids {
				if seen[id] {
					continue
				}
				seen[id] = true
				n, err := loadAsset(tx, id)
				if isNotFound(err) {
					continue
				} else if err != nil {
					return nil, false, err
				}
				if !visibleTo(p, n.AccountID) {
					continue
				}
				if len(out) == maxLineageNodes {
					return out, true, nil
				}
				parents := n.Parents
				if parents == nil {
					parents = []string{}
				}
				out = append(out, &LineageNode{ID: id, Depth: d, Parents: parents})
				nextLevel = append(nextLevel, n)
			}
		}
		level = nextLevel
	}
	return out, false, nil
}

// AssetInput creates or updates an Asset in an encrypt call.
type AssetInput struct {
	// AssetID, when set, names the Asset to update.
	AssetID string `json:"assetId,omitempty"`
	// Parents are the IDs of the Asset's parent Assets.
	Parents []string `json:"parents,omitempty"`
	// Data is stored on the Asset.
	Data map[string]any `json:"data"`
}
