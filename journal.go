package kms

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"sync"
	"time"
)

// The journal is the Service's single writer. Every write of the domain,
// and every activity record, goes through it as a job: the journal gathers
// the jobs that are waiting, runs their mutations and appends their activity
// records in one store transaction, commits it durably, and then answers each
// job. So
//
//   - an operation and its activity record commit together or not at all
//     (the trail is fail-closed);
//   - the activity chain has one appender, and no transaction conflicts on
//     its head;
//   - durable commits are shared: one fsync serves every job of a batch.
//
// A job's mutation runs against an overlay of the batch transaction: when it
// fails, its writes are dropped and the other jobs of the batch go on. Gets
// in a mutation see the writes of earlier jobs of the same batch and its own;
// Scans see earlier jobs' writes but not the job's own.

const maxBatch = 256

type job struct {
	act    *Activity         // nil for a write with no activity record
	mutate func(w Txn) error // nil for a record alone
	after  func()            // run on the writer goroutine after a commit in which mutate succeeded

	err  error // mutate's error, set while the batch runs
	done chan error
}

type chainHead struct {
	Seq    uint64 `json:"seq"`
	Digest string `json:"digest"`
	Time   int64  `json:"time"`
}

type journal struct {
	store    Store
	chainKey [32]byte // keys the activity chain (chainDigest)
	now      func() time.Time
	log      func(err error, msg string)

	mu     sync.RWMutex // guards closed and sends on jobs
	closed bool
	jobs   chan *job
	wg     sync.WaitGroup

	head chainHead // owned by the run goroutine after start
}

func startJournal(ctx context.Context, st Store, chainKey [32]byte, now func() time.Time, log func(error, string)) (*journal, error) {
	j := &journal{store: st, chainKey: chainKey, now: now, log: log, jobs: make(chan *job, 4*maxBatch)}
	err := st.View(ctx, func(tx Txn) error {
		v, err := tx.Get(keyActHead)
		if isNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return json.Unmarshal(v, &j.head)
	})
	if err != nil {
		return nil, internalError("load activity chain head", err)
	}
	j.wg.Add(1)
	go j.run()
	return j, nil
}

// submit runs one job and waits for its commit. It returns the mutation's
// own error when the mutation failed (its activity record, if any, is still
// written, with the failure as its result), or an internal error when the
// commit failed, in which case nothing of the job was written.
func (j *journal) submit(act *Activity, mutate func(Txn) error, after func()) error {
	jb := &job{act: act, mutate: mutate, after: after, done: make(chan error, 1)}
	j.mu.RLock()
	if j.closed {
		j.mu.RUnlock()
		return Errorf(KindInternal, "service is closed")
	}
	j.jobs <- jb
	j.mu.RUnlock()
	return <-jb.done
}

func (j *journal) close() {
	j.mu.Lock()
	if !j.closed {
		j.closed = true
		close(j.jobs)
	}
	j.mu.Unlock()
	j.wg.Wait()
}

func (j *journal) run() {
	defer j.wg.Done()
	batch := make([]*job, 0, maxBatch)
	for first := range j.jobs {
		batch = append(batch[:0], first)
	fill:
		for len(batch) < maxBatch {
			select {
			case jb, ok := <-j.jobs:
				if !ok {
					break fill
				}
				batch = append(batch, jb)
			default:
				break fill
			}
		}
		j.commit(batch)
	}
}

func (j *journal) commit(batch []*job) {
	var head chainHead
	err := j.store.Update(context.Background(), func(tx Txn) error {
		head = j.head
		for _, jb := range batch {
			jb.err = nil
			if jb.mutate != nil {
				o := newOverlay(tx)
				if jb.err = jb.mutate(o); jb.err == nil {
					if err := o.flush(); err != nil {
						return err
					}
				}
			}
			if jb.act != nil {
				if err := j.appendActivity(tx, &head, jb.act, jb.err); err != nil {
					return err
				}
			}
		}
		if head != j.head {
			v, _ := json.Marshal(head)
			return tx.Set(keyActHead, v)
		}
		return nil
	})
	if err != nil && ErrorKind(err) == KindTooLarge && len(batch) > 1 {
		// The batch outgrew one transaction: commit it in halves, in order.
		half := len(batch) / 2
		j.commit(batch[:half])
		j.commit(batch[half:])
		return
	}
	if err != nil {
		j.log(err, "journal commit failed")
		// Whatever the store said (even a Conflict after its retries), the
		// caller sees an internal failure: nothing of its job was written.
		err = &Error{Kind: KindInternal, Message: "commit", Err: err}
		for _, jb := range batch {
			jb.done <- err
		}
		return
	}
	j.head = head
	for _, jb := range batch {
		if jb.err == nil && jb.after != nil {
			jb.after()
		}
		jb.done <- jb.err
	}
}

// appendActivity stamps act with its place in the chain and writes it and
// its index entries.
func (j *journal) appendActivity(tx Txn, head *chainHead, act *Activity, opErr error) error {
	now := j.now().UnixMilli()
	if now < head.Time {
		now = head.Time // the chain's clock never runs backwards
	}
	act.CreatedAt = now
	act.Seq = head.Seq + 1
	act.Prev = head.Digest
	if act.Props == nil {
		act.Props = map[string]any{}
	}
	// props action and ring repeat the fields, always: a search by those
	// props is served by the action and ring indexes.
	act.Props["action"] = act.Action
	if act.Ring != "" {
		act.Props["ring"] = act.Ring
	} else {
		delete(act.Props, "ring")
	}
	act.Props["result"] = resultOf(opErr)
	act.Digest = ""
	body, err := json.Marshal(act)
	if err != nil {
		return err
	}
	sum := chainDigest(&j.chainKey, act.Prev, body)
	act.Digest = hex.EncodeToString(sum[:])
	v := append(sum[:], body...) // stored: digest (32 bytes) | record JSON
	seq := seqKey(act.Seq)
	if err := tx.Set(join(pfxActSeq, seq), v); err != nil {
		return err
	}
	if err := tx.Set(join(pfxActID, []byte(act.ID)), seq); err != nil {
		return err
	}
	// The index entries (see actIndex) share one buffer: the Txn
	// keeps the slices until commit, and nothing writes to them again.
	ix := actIndex{buf: make([]byte, 0, 384), keys: make([][]byte, 0, 8+len(act.Props)), seq: seq}
	ix.field(pfxActByKey, act.KeyID)
	ix.field(pfxActByAction, act.Action)
	if act.AccountID != "" {
		ix.field(pfxActByAccount, act.AccountID)
	}
	if act.Ring != "" {
		ix.field(pfxActByRing, act.Ring)
	}
	if !act.Valid {
		ix.begin(pfxActDenied)
		ix.end()
	}
	if head.Seq == 0 || now != head.Time {
		// Only the first record of each millisecond enters the time
		// index: createdAt never decreases along the chain, so that is
		// enough to find where a time range begins and ends.
		ix.begin(pfxActByTime)
		ix.buf = binary.BigEndian.AppendUint64(ix.buf, timeIndexMillis(now))
		ix.end()
	}
	for name, val := range act.Props {
		ix.prop(name, val)
	}
	for _, k := range ix.keys {
		if err := tx.Set(k, nil); err != nil {
			return err
		}
	}
	*head = chainHead{Seq: act.Seq, Digest: act.Digest, Time: now}
	return nil
}

// chainDigest is the digest of a record: HMAC-SHA256, under a key derived
// from the master key, of the previous record's digest (hex) followed by
// the record's JSON, which itself names prev. Keyed, so that whoever can
// write the store but holds no master key cannot forge a consistent chain.
func chainDigest(key *[32]byte, prev string, body []byte) [32]byte {
	h := hmac.New(sha256.New, key[:])
	h.Write([]byte(prev))
	h.Write(body)
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// resultOf is the activity "result" of an operation's outcome: "ok", or the
// code of the error's kind.
func resultOf(err error) string {
	if err == nil {
		return "ok"
	}
	return ErrorKind(err).String()
}

func seqKey(n uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], n)
	return b[:]
}

// overlay buffers one job's writes on top of the batch transaction, so a
// failed job leaves nothing behind.
type overlay struct {
	tx     Txn
	writes map[string][]byte // nil value: deleted
	order  []string
}

func newOverlay(tx Txn) *overlay { return &overlay{tx: tx} }

func (o *overlay) Get(key []byte) ([]byte, error) {
	if v, ok := o.writes[string(key)]; ok {
		if v == nil {
			return nil, Errorf(KindNotFound, "key not found")
		}
		return bytes.Clone(v), nil
	}
	return o.tx.Get(key)
}

func (o *overlay) put(key, value []byte) {
	if o.writes == nil {
		o.writes = make(map[string][]byte)
	}
	k := string(key)
	if _, ok := o.writes[k]; !ok {
		o.order = append(o.order, k)
	}
	o.writes[k] = value
}

func (o *overlay) Set(key, value []byte) error {
	if len(key) == 0 {
		return Errorf(KindInvalid, "empty key")
	}
	if value == nil {
		value = []byte{}
	}
	o.put(key, value)
	return nil
}

func (o *overlay) Delete(key []byte) error {
	o.put(key, nil)
	return nil
}

func (o *overlay) Scan(opts ScanOptions, fn func(key, value []byte) (bool, error)) error {
	return o.tx.Scan(opts, fn)
}

func (o *overlay) flush() error {
	for _, k := range o.order {
		v := o.writes[k]
		var err error
		if v == nil {
			err = o.tx.Delete([]byte(k))
		} else {
			err = o.tx.Set([]byte(k), v)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
