package kms

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/ringkms/kms/internal/hmackey"
	"github.com/ringkms/kms/internal/journal"
	"github.com/ringkms/kms/internal/jsonenc"
	"github.com/ringkms/kms/internal/postings"
	"github.com/ringkms/kms/internal/seal"
)

// Activity is one record of the audit trail: an operation that a credential
// asked for, granted or denied. Records are append-only and hash-chained:
// each carries the digest of the one before it (Prev) and its own (Digest),
// so a removed or altered record is detectable.
type Activity struct {
	ID        string `json:"id"`
	KeyID     string `json:"keyid"`               // the API key (or User) that acted
	AccountID string `json:"accountId,omitempty"` // the Account it acted for
	CreatedAt int64  `json:"createdAt"`           // epoch milliseconds, UTC; never decreases along the chain
	Action    string `json:"action"`              // e.g. encrypt, decrypt, keyring.rotate
	Ring      string `json:"ring,omitempty"`      // lower-case name of the key ring, when the action is on one
	// Valid is false when the operation was refused: denied for want of
	// a permission, or a credential, token, hash, header or Asset failed
	// its check (even when the call answers that as a result, as a header
	// lookup does), or the key it would use is disabled or scheduled for
	// destruction; true when it was granted, whatever its result (a key
	// destroyed or not found is a failure, not a refusal).
	Valid bool `json:"valid"`
	// Props holds action and ring again, the result ("ok" when the
	// operation succeeded, else the kind of the error that ended it, such
	// as permission_denied, not_found or unprocessable; see resultOf), and
	// details of the action.
	Props  map[string]any `json:"props"`
	Seq    uint64         `json:"seq"`              // position in the chain, from 1
	Prev   string         `json:"prev"`             // digest of the previous record, hex; empty for the first
	Digest string         `json:"digest,omitempty"` // HMAC-SHA256 (master-derived key) of Prev and the record without Digest, hex
}

// newActivity starts a record of action by p. The journal fills in the
// time, the place in the chain and the result.
func (s *Service) newActivity(p *Principal, action, ring string, valid bool, props map[string]any) *Activity {
	if props == nil {
		props = make(map[string]any, 4)
	}
	if p.call != "" {
		props["call"] = p.call
	}
	return &Activity{ // the journal sets ID, CreatedAt and the chain fields
		KeyID:     p.ID,
		AccountID: p.AccountID,
		Action:    action,
		Ring:      ring,
		Valid:     valid,
		Props:     props,
	}
}

// activityJob is a job of the journal whose record is an Activity.
type activityJob = journal.Job[*Activity]

// submit runs a write, mutate (nil for none), with its record, act (nil
// for none), through the journal, and waits until both are durable; after
// runs once the write committed. It returns mutate's error (the record is
// written all the same, with the failure as its result) or the
// journal's, and then nothing was written.
func (s *Service) submit(act *Activity, mutate func(Txn) error, after func()) error {
	return s.journal.Submit(&activityJob{Rec: act, Mutate: mutate, After: after})
}

// record writes a record of a granted operation that changes nothing, and
// that succeeded (opErr nil) or failed with opErr, and waits until it is
// durable: the answer must not go out before its trail. It returns the
// journal's error.
func (s *Service) record(p *Principal, action, ring string, props map[string]any, opErr error) error {
	return s.journal.Submit(&activityJob{Rec: s.newActivity(p, action, ring, true, props), Fail: opErr})
}

// refuse records that action by p was refused: denied for want of a
// permission, or a credential, hash, header or Asset failed its check.
// The record says valid false and has the kind of opErr as its result;
// refuse returns opErr, or the journal's error. A nil opErr is a refusal
// that the call answers as its result (a header lookup's valid false).
func (s *Service) refuse(p *Principal, action, ring string, props map[string]any, opErr error) error {
	if err := s.journal.Submit(&activityJob{Rec: s.newActivity(p, action, ring, false, props), Fail: opErr}); err != nil {
		return err
	}
	return opErr
}

// refused reports whether an operation that ended with err was refused
// (see Activity.Valid): a missing permission, a credential or token that
// was refused (login, invitation, reset, refresh), too many attempts, a
// failed verification, or a key that its state forbids to use (Disabled:
// the decrypt of a disabled key is refused as one without the flag is).
func refused(err error) bool {
	switch ErrorKind(err) {
	case KindPermissionDenied, KindUnauthenticated, KindUnprocessable, KindRateLimited, KindDisabled:
		return err != nil
	}
	return errors.Is(err, errBadLogin) || errors.Is(err, errBadReset)
}

// audited answers a read of the store for p: it runs read in a read
// transaction and records the operation, with the props read returns, or
// its failure, before the answer goes out. Every read the Service answers
// goes this way, so none escapes the trail.
func audited[T any](s *Service, ctx context.Context, p *Principal, action, ring string,
	read func(tx Txn) (T, map[string]any, error)) (T, error) {
	var out, zero T
	var props map[string]any
	err := s.store.View(ctx, func(tx Txn) error {
		var err error
		out, props, err = read(tx)
		return err
	})
	if err != nil {
		return zero, s.recordFailure(p, action, ring, internalError(action, err))
	}
	if err := s.record(p, action, ring, props, nil); err != nil {
		return zero, err
	}
	return out, nil
}

// decodeActivity parses a stored record: digest (32 bytes) | JSON.
func decodeActivity(v []byte) (*Activity, error) {
	if len(v) < 33 {
		return nil, Errorf(KindInternal, "activity record is truncated")
	}
	var a Activity
	if err := json.Unmarshal(v[32:], &a); err != nil {
		return nil, err
	}
	a.Digest = digestHex([32]byte(v[:32]))
	return &a, nil
}

// GetActivity returns an activity record by ID. It needs the flag
// activity.read; without accounts.all, the records of other Accounts are
// not found.
func (s *Service) GetActivity(ctx context.Context, id string) (*Activity, error) {
	p, err := s.authorize(ctx, "activity.read", "", FlagActivityRead)
	if err != nil {
		return nil, err
	}
	notFound := Errorf(KindNotFound, "activity not found")
	raw, ok := parseID(id)
	seq := binary.BigEndian.Uint64(raw[8:])
	if !ok || seq == 0 {
		return nil, notFound
	}
	var a *Activity
	err = s.trail.Scan(seq, func(_ uint64, rec []byte) (bool, error) {
		var err error
		a, err = decodeActivity(rec)
		return false, err
	})
	if err != nil {
		return nil, internalError("read activity", err)
	}
	// Another Account's record is as absent as a missing one.
	if a == nil || a.ID != id || !visibleTo(p, a.AccountID) {
		return nil, notFound
	}
	return a, nil
}

// FlagActivityRead grants reading and searching the activity trail.
const FlagActivityRead = "activity.read"

// VerifyChainResult is the outcome of VerifyActivityChain.
type VerifyChainResult struct {
	Records uint64 `json:"records"` // records checked
	Head    string `json:"head"`    // digest of the last record
}

// VerifyActivityChain walks the whole activity trail in order and checks
// that every record's digest matches its contents and names the record
// before it, that sequence numbers have no gap, and that the chain reaches
// the last record its index names (so records cut from the end of the
// trail are detected too). It returns an Unprocessable error naming the first
// record that fails, and in the result the records verified before it. It
// reads the store directly and needs no principal, for use by operators.
func (s *Service) VerifyActivityChain(ctx context.Context) (VerifyChainResult, error) {
	return verifyChain(ctx, s.store, s.chainKey)
}

// VerifyAudit is VerifyActivityChain on a store that no Service has open,
// as kmsd verify-audit runs it: it starts no Service (whose start refuses
// a damaged trail) and writes nothing. It first checks that mk is the
// master key st was created with, and answers an error of kind
// Unauthenticated if not.
func VerifyAudit(ctx context.Context, st Store, mk RootKey) (VerifyChainResult, error) {
	if noRootKey(mk) {
		return VerifyChainResult{}, Errorf(KindInvalid, "a master key is required")
	}
	keys, err := loadKeys(ctx, st, mk)
	if err != nil {
		return VerifyChainResult{}, err
	}
	if _, err := readSigningKeys(ctx, st, seal.New(keys.Seal).Open, nil, nil); err != nil {
		return VerifyChainResult{}, err
	}
	return verifyChain(ctx, st, hmackey.New(keys.AuditChain))
}

func verifyChain(ctx context.Context, st Store, chainKey *hmackey.Key) (VerifyChainResult, error) {
	var res VerifyChainResult
	var head journal.Head
	err := st.View(ctx, func(tx Txn) error {
		var err error
		head, err = loadHead(tx)
		return err
	})
	if err != nil {
		return res, err
	}
	trail := st.Trail()
	prev := ""
	err = trail.Scan(1, func(seq uint64, rec []byte) (bool, error) {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		a, err := decodeActivity(rec)
		if err != nil {
			return false, Errorf(KindUnprocessable, "activity record %d does not parse", seq)
		}
		if a.Seq != seq {
			return false, Errorf(KindUnprocessable, "activity record %d names itself record %d", seq, a.Seq)
		}
		if a.Prev != prev {
			return false, Errorf(KindUnprocessable, "activity record %d (%s) does not follow the record before it", a.Seq, a.ID)
		}
		sum := journal.Digest(chainKey, a.Prev, rec[32:])
		if digestHex(sum) != a.Digest {
			return false, Errorf(KindUnprocessable, "activity record %d (%s) was altered", a.Seq, a.ID)
		}
		if seq == head.Seq && a.Digest != head.Digest {
			return false, Errorf(KindUnprocessable, "activity record %d is not the record the index names", seq)
		}
		prev = a.Digest
		res.Records++
		return true, nil
	})
	if err != nil {
		return res, err
	}
	// The trail may run past the index (records written just before a
	// crash are indexed at the next start), never stop short of it; and
	// what it found after its last record says where and why it stops.
	if err := trail.Check(head.Seq); err != nil {
		return res, journal.TrailDamaged(err, res.Records, head.Seq)
	}
	res.Head = prev
	return res, nil
}

// The indexes of the activity trail, besides act/k (keyid), act/x (action),
// act/a (account) and act/r (ring) of layout.go; internal/postings says how their
// entries are kept.
//
// An index entry costs work on the hot path of every encrypt, so values
// that nearly every record has get none: a granted record (valid true) and
// the prop result "ok". An index of them would hold nearly the whole trail,
// and walking the trail itself, checking each record, costs the same.

const (
	maxPropIndexName  = 128
	maxPropIndexValue = 128
)

// propIndexed reports whether the prop name with the value canon (its
// canonical JSON) has entries in the props index.
func propIndexed(name string, canon []byte) bool {
	switch {
	case name == "" || len(name) > maxPropIndexName || strings.IndexByte(name, 0) >= 0:
		return false
	case name == "action" || name == "ring":
		return false
	case name == "hash":
		// Unique to each encrypt record: a term per record. A key's
		// hashes have their own index (keyusage.go).
		return false
	case name == "result" && string(canon) == `"ok"`:
		return false
	}
	return len(canon) <= maxPropIndexValue && jsonenc.Scalar(canon)
}

// timeIndexMillis is the key of a time in the time index. Times before
// the epoch count as the epoch.
func timeIndexMillis(ms int64) uint64 { return uint64(max(ms, 0)) }

// appendScalarJSON appends jsonenc.Canonical(json.Marshal(v)) to dst when that
// is a string, number or boolean, and reports whether it did. The common
// cases take a short path.
func appendScalarJSON(dst []byte, v any) ([]byte, bool) {
	switch v := v.(type) {
	case nil, map[string]any, []any:
		return dst, false
	case string:
		if len(v)+2 > maxPropIndexValue {
			return dst, false // every byte takes at least one in JSON
		}
		if jsonenc.Plain(v) {
			return jsonenc.AppendString(dst, v), true
		}
	case bool, int, int64, uint64:
		out, _ := jsonenc.AppendValue(dst, v) // never fails for these types
		return out, true
	}
	b, err := json.Marshal(v)
	if err != nil {
		return dst, false
	}
	b = jsonenc.Canonical(b)
	if !jsonenc.Scalar(b) {
		return dst, false
	}
	return append(dst, b...), true
}

// ActivityFilter selects activity records in SearchActivity. Every field
// set must match.
type ActivityFilter struct {
	// AccountUID names the Account that the acting credential acted for,
	// by its uid; an unknown uid matches no record.
	AccountUID string `json:"accountUid,omitempty"`
	// AccountID names the Account that the acting credential acted for.
	AccountID string `json:"accountId,omitempty"`
	Action    string `json:"action,omitempty"`
	// Ring is the name of a key ring, in any case.
	Ring string `json:"ring,omitempty"`
	// KeyID is the API key (or User) that acted.
	KeyID string `json:"keyid,omitempty"`
	// Start and End bound createdAt, inclusive, in epoch milliseconds.
	Start *int64 `json:"start,omitempty"`
	End   *int64 `json:"end,omitempty"`
	// Valid selects granted (true) or refused (false) operations (see
	// Activity.Valid).
	Valid *bool `json:"valid,omitempty"`
	// Props are strings, numbers or booleans that the record's props of
	// the same names must equal.
	Props map[string]any `json:"props,omitempty"`
}

// activityQuery is an ActivityFilter checked and normalised, which records
// are matched against. Its JSON, before the Account uid is resolved, is the
// scope that binds cursors to the filters.
type activityQuery struct {
	ActivityFilter // Ring in lower case; Props unused: see Props below
	// Props are the filter's props as canonical JSON. The field hides
	// ActivityFilter.Props in the JSON too, which it takes the place of.
	Props  map[string]json.RawMessage `json:"props,omitempty"`
	none   bool                       // no record can match
	scope  string                     // the list a cursor belongs to
	served string                     // the props member the chosen index answers
}

// SearchActivity pages through the activity records that match f, in
// chain order (oldest first). A sequence of pages sees the trail as it
// was at its first page: no record is skipped or repeated, and records
// appended while a client pages (the search's own among them) are left
// to a new search.
//
// One filter is served from an index, in this order of preference (most
// selective first, as a rule): keyid, ring (or props ring), account, action
// (or props action), the first indexed props member by name, valid false;
// without any of these, the trail itself is walked. The time range bounds
// that walk to the range of seqs that the time index gives for it, and the
// other filters are checked on the records the walk yields. So a page costs
// work in proportion to the entries of one index between one page's first
// and last record, not to the size of the trail.
//
// It needs activity.read. Without accounts.all, a caller searches only its
// own Account's records: a filter that names another Account is a
// PermissionDenied error.
func (s *Service) SearchActivity(ctx context.Context, f ActivityFilter, req PageRequest) (*List[*Activity], error) {
	p, err := s.authorize(ctx, "activity.search", "", FlagActivityRead)
	if err != nil {
		return nil, err
	}
	q, err := s.activityQuery(ctx, p, f)
	if err != nil {
		return nil, err
	}
	return audited(s, ctx, p, "activity.search", "", func(tx Txn) (*List[*Activity], map[string]any, error) {
		out := &List[*Activity]{Data: []*Activity{}}
		indexed := "none"
		answer := func(err error) (*List[*Activity], map[string]any, error) {
			return out, map[string]any{"count": out.Pagination.Count, "index": indexed}, err
		}
		head, err := loadHead(tx)
		if err != nil {
			return answer(err)
		}
		from, until, none, err := activitySeqRange(tx, q.Start, q.End)
		if err != nil {
			return answer(err)
		}
		if none || q.none {
			out.Pagination, err = s.emptyPage(q.scope, req)
			return answer(err)
		}
		// The search sees the records the index names in this snapshot:
		// the trail may already hold a few more.
		from = max(from, 1)
		if until == 0 || until > head.Seq+1 {
			until = head.Seq + 1
		}
		var prefix []byte
		prefix, indexed = q.index()
		ps := s.recordScan(tx, prefix, from, until)
		ps.Scope = q.scope
		var cur *Activity
		ps.Match = func(_, v []byte) (bool, error) {
			a, err := decodeActivity(v)
			if err != nil {
				return false, err
			}
			cur = a
			return q.matches(a, v)
		}
		ps.Emit = func(_, _ []byte) error {
			out.Data = append(out.Data, cur)
			return nil
		}
		out.Pagination, err = s.pager.scan(ctx, tx, req, ps)
		return answer(err)
	})
}

// recordScan is the page walk of the activity records in [from, until)
// that the index term names (pfxActSeq: every record, from the trail
// itself): its items are keyed term seq and valued with the record. A
// sequence of pages sees the trail as it was at its first page: the
// records appended while it runs, the listing's own among them, come
// after its end (or a search would never end with limit 1 and a filter
// that its own records match).
func (s *Service) recordScan(tx Txn, term []byte, from, until uint64) pageScan {
	ps := pageScan{Prefix: term, Until: join(term, seqKey(until)), FixUntil: true}
	ps.Walk = func(start []byte, fn func(k, v []byte) (bool, error)) error {
		first := max(from, seqAfter(start, term))
		visit := func(seq uint64, rec []byte) (bool, error) {
			return fn(join(term, seqKey(seq)), rec)
		}
		if bytes.Equal(term, pfxActSeq) {
			return s.trail.Scan(first, func(seq uint64, rec []byte) (bool, error) {
				if seq >= until {
					return false, nil
				}
				return visit(seq, rec)
			})
		}
		return s.readSeqs(tx, term, first, until, visit)
	}
	return ps
}

// seqAfter returns the first seq at or after start, a key of the list
// prefix (prefix seq, or the key just after it); 0 for no start.
func seqAfter(start, prefix []byte) uint64 {
	if len(start) < len(prefix)+8 {
		return 0
	}
	seq := binary.BigEndian.Uint64(start[len(prefix):])
	if len(start) > len(prefix)+8 {
		seq++
	}
	return seq
}

// readSeqs calls fn with the records of the index term in [from, until),
// in order, until fn returns false or an error. It reads them from the
// trail in runs: records close together in one sequential read.
func (s *Service) readSeqs(tx Txn, term []byte, from, until uint64, fn func(seq uint64, rec []byte) (bool, error)) error {
	const chunk, gap = 256, 64
	seqs := make([]uint64, 0, chunk)
	more := true
	flush := func() error {
		for i := 0; i < len(seqs) && more; {
			at := i
			err := s.trail.Scan(seqs[i], func(seq uint64, rec []byte) (bool, error) {
				switch {
				case seq == seqs[i]:
					i++
					var err error
					if more, err = fn(seq, rec); err != nil || !more {
						return false, err
					}
					return i < len(seqs) && seqs[i]-seq <= gap, nil
				case seq > seqs[i]:
					return false, Errorf(KindInternal, "activity record %d is missing from the trail", seqs[i])
				}
				return true, nil
			})
			if err == nil && i == at {
				err = Errorf(KindInternal, "activity record %d is missing from the trail", seqs[i])
			}
			if err != nil {
				return err
			}
		}
		seqs = seqs[:0]
		return nil
	}
	err := postings.Walk(tx, term, from, until, func(seq uint64) (bool, error) {
		if seqs = append(seqs, seq); len(seqs) == chunk {
			err := flush()
			return more, err
		}
		return true, nil
	})
	if err == nil && more {
		err = flush()
	}
	return err
}

// emptyPage answers a search that no record can match, after checking
// its page request as pager.scan does.
func (s *Service) emptyPage(scope string, req PageRequest) (Page, error) {
	limit, err := req.limit()
	if err != nil {
		return Page{}, err
	}
	if req.Cursor != "" {
		if _, err := s.pager.Open(scope, req.Cursor); err != nil {
			return Page{}, err
		}
	}
	return Page{Limit: limit}, nil
}

// activityQuery checks f, applies the caller's tenancy and resolves the
// Account uid.
func (s *Service) activityQuery(ctx context.Context, p *Principal, f ActivityFilter) (*activityQuery, error) {
	if f.Start != nil && f.End != nil && *f.Start > *f.End {
		return nil, Errorf(KindInvalid, "start must not be after end")
	}
	q := &activityQuery{ActivityFilter: f}
	q.Ring, q.ActivityFilter.Props = strings.ToLower(f.Ring), nil
	if len(f.Props) > 0 {
		q.Props = make(map[string]json.RawMessage, len(f.Props))
		for name, v := range f.Props {
			b, err := json.Marshal(v)
			if err == nil {
				b = jsonenc.Canonical(b)
			}
			if err != nil || !jsonenc.Scalar(b) {
				return nil, Errorf(KindInvalid, "props filter values must be strings, numbers or booleans (props.%s)", name)
			}
			q.Props[name] = b
		}
		for _, name := range []string{"action", "ring"} {
			if v, ok := q.Props[name]; ok && (v[0] != '"' || len(v) == 2) {
				q.none = true // they are never anything but non-empty strings
			}
		}
	}
	uidAccount := ""
	if q.AccountUID != "" {
		err := s.store.View(ctx, func(tx Txn) error {
			a, err := getAccount(tx, q.AccountUID, true)
			if err == nil {
				uidAccount = a.ID
			} else if !isNotFound(err) {
				return err
			}
			return nil
		})
		if err != nil {
			return nil, s.recordFailure(p, "activity.search", "", internalError("search activity", err))
		}
	}
	if !p.Can(FlagAllAccounts) {
		// An unknown uid names another Account too, so that the answer
		// does not tell which uids exist.
		if q.AccountUID != "" && uidAccount != p.AccountID || q.AccountID != "" && q.AccountID != p.AccountID {
			return nil, s.recordFailure(p, "activity.search", "", Errorf(KindPermissionDenied, "cannot search the activity of another account without %s", FlagAllAccounts))
		}
		q.AccountID = p.AccountID
	}
	// The cursor is bound to the filters as given (normalised), with the
	// caller's own Account when it sees no other.
	scope, err := json.Marshal(q)
	if err != nil {
		return nil, Errorf(KindInvalid, "filter cannot be encoded: %v", err)
	}
	q.scope = "activity/" + string(scope)
	if q.AccountUID != "" {
		if uidAccount == "" || q.AccountID != "" && q.AccountID != uidAccount {
			q.none = true
		}
		q.AccountID = uidAccount
	}
	return q, nil
}

// index chooses the index a search walks: the prefix of its keys, each
// followed by a seq, and its name. When it is the props index, it notes
// the prop it serves in q.served.
func (q *activityQuery) index() ([]byte, string) {
	// props action and ring are the record's action and ring.
	ring, action := q.Ring, q.Action
	if ring == "" {
		ring = q.propString("ring")
	}
	if action == "" {
		action = q.propString("action")
	}
	switch {
	case q.KeyID != "":
		return join(pfxActByKey, []byte(q.KeyID), sep), "keyid"
	case ring != "":
		return join(pfxActByRing, []byte(ring), sep), "ring"
	case q.AccountID != "":
		return join(pfxActByAccount, []byte(q.AccountID), sep), "account"
	case action != "":
		return join(pfxActByAction, []byte(action), sep), "action"
	}
	if len(q.Props) > 0 {
		for _, name := range slices.Sorted(maps.Keys(q.Props)) {
			if v := q.Props[name]; propIndexed(name, v) {
				q.served = name
				return join(pfxActByProp, []byte(name), sep, v, sep), "props"
			}
		}
	}
	if q.Valid != nil && !*q.Valid {
		return pfxActDenied, "valid"
	}
	return pfxActSeq, "trail"
}

// propString returns the props filter name when it is a string.
func (q *activityQuery) propString(name string) string {
	var s string
	if v, ok := q.Props[name]; !ok || json.Unmarshal(v, &s) != nil {
		return ""
	}
	return s
}

// matches reports whether the record a, stored as v, matches every filter
// of q.
func (q *activityQuery) matches(a *Activity, v []byte) (bool, error) {
	if q.AccountID != "" && a.AccountID != q.AccountID ||
		q.Action != "" && a.Action != q.Action ||
		q.Ring != "" && a.Ring != q.Ring ||
		q.KeyID != "" && a.KeyID != q.KeyID ||
		q.Start != nil && a.CreatedAt < *q.Start ||
		q.End != nil && a.CreatedAt > *q.End ||
		q.Valid != nil && a.Valid != *q.Valid {
		return false, nil
	}
	if len(q.Props) == 0 || len(q.Props) == 1 && q.served != "" {
		return true, nil
	}
	// Compare props as the index does: canonical JSON of the values as
	// stored, numbers as written.
	var raw struct {
		Props map[string]json.RawMessage `json:"props"`
	}
	if err := json.Unmarshal(v[32:], &raw); err != nil {
		return false, err
	}
	for name, want := range q.Props {
		if name == q.served {
			continue
		}
		got, ok := raw.Props[name]
		if !ok || !bytes.Equal(jsonenc.Canonical(got), want) {
			return false, nil
		}
	}
	return true, nil
}

// activitySeqRange turns the time range [start, end] (either may be nil)
// into a range of seqs [from, until) that holds its records, with the time
// index; 0 means no bound. none reports that no record is in range.
func activitySeqRange(tx Txn, start, end *int64) (from, until uint64, none bool, err error) {
	fromMs, untilMs, none := timeRange(start, end, math.MaxInt64)
	if none {
		return 0, 0, true, nil
	}
	if start != nil {
		var found bool
		if from, found, err = firstSeqAt(tx, int64(fromMs)); err != nil || !found {
			return 0, 0, err == nil, err
		}
	}
	if untilMs != 0 {
		var found bool
		if until, found, err = firstSeqAt(tx, int64(untilMs)); err != nil {
			return 0, 0, false, err
		}
		if found && until <= from || found && until <= 1 {
			return 0, 0, true, nil
		}
	}
	return from, until, false, nil
}

// firstSeqAt returns the seq of the first record created at or after ms.
func firstSeqAt(tx Txn, ms int64) (seq uint64, found bool, err error) {
	start := binary.BigEndian.AppendUint64(bytes.Clone(pfxActByTime), timeIndexMillis(ms))
	err = tx.Scan(ScanOptions{Prefix: pfxActByTime, Start: start, KeysOnly: true}, func(k, _ []byte) (bool, error) {
		if len(k) == len(pfxActByTime)+16 {
			seq, found = binary.BigEndian.Uint64(k[len(k)-8:]), true
		}
		return !found, nil
	})
	return seq, found, err
}

// ExportActivity calls fn with the activity records of the store's trail
// from seq from (at least 1) on, in chain order, up to the last record
// appended when it began, as search answers them (with seq, prev and
// digest). It needs no master key and no principal: it is for operators
// (kmsd audit export) and for the audit sinks that follow the trail.
// fn returning an error stops the export with it.
func ExportActivity(ctx context.Context, st Store, from uint64, fn func(*Activity) error) error {
	trail := st.Trail()
	if trail == nil {
		return Errorf(KindInvalid, "the store has no activity trail")
	}
	return trail.Scan(max(from, 1), func(seq uint64, rec []byte) (bool, error) {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		a, err := decodeActivity(rec)
		if err != nil {
			return false, &Error{Kind: KindUnprocessable, Message: fmt.Sprintf("activity record %d cannot be read", seq), Err: err}
		}
		if err := fn(a); err != nil {
			return false, err
		}
		return true, nil
	})
}

// loadHead returns the last indexed record, the zero Head when none is.
func loadHead(tx Txn) (journal.Head, error) { return journal.LoadHead(tx, keyActHead) }

// recordFailure records a granted operation that failed (a missing ring,
// say) and returns its error, or the journal's when recording failed.
func (s *Service) recordFailure(p *Principal, action, ring string, opErr error) error {
	if ErrorKind(opErr) == KindInternal {
		return opErr
	}
	if err := s.record(p, action, ring, nil, opErr); err != nil {
		return err
	}
	return opErr
}
