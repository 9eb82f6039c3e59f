package base

import "context"

// Trail is the append-only log that holds the activity trail: records
// numbered 1, 2, 3... in the order they were appended, each an opaque
// byte string, never changed or removed. The Service is its only writer;
// it keeps the trail's indexes in the Store.
//
// The trail lives beside the Store rather than in it because it is the
// one thing that grows with every call: an append-only file takes a
// record with one sequential write, is never compacted, and is read
// through the page cache rather than kept in the process's memory.
//
// A Trail is safe for concurrent use by one appender and any number of
// readers. Every backend must pass the conformance suite in
// store/storetest (RunTrail).
type Trail interface {
	// Len returns the number of records: the seq of the last one, 0 when
	// the trail is empty.
	Len() uint64

	// Append writes recs as the records Len()+1, Len()+2... and returns
	// once they are durable: they survive a crash of the process and of
	// the machine. When Append returns an error, none of recs counts as
	// appended (Len is unchanged) and the next Append writes in their
	// place. Appending no records is a no-op.
	Append(recs [][]byte) error

	// Check reports whether the trail holds the records 1 to want, whole,
	// and can take more: nil, or an error of kind Unprocessable that names
	// the first record missing or damaged, where it lies (a file and an
	// offset, say) and why. It checks what the trail found when it was
	// opened (the end of its newest file, say), not every record: Scan
	// checks those. Records after want that a crash left half-written are
	// not damage: they were never acknowledged.
	Check(want uint64) error

	// Scan calls fn with the records from seq from (at least 1) onwards,
	// in order, until fn returns false or an error, or the last record
	// that was appended when Scan began. A from past the end calls fn
	// never. The slice passed to fn is valid only during that call. A
	// record found damaged (its checksum, say) is an error of kind
	// Unprocessable; a failure to read, of kind Internal.
	Scan(from uint64, fn func(seq uint64, rec []byte) (more bool, err error)) error
}

// SharedTrail is a Trail kept in its Store's own database, which several
// processes, each with a Service over the same store, may append to: the
// nodes of a cluster. Its records are appended in the transaction of the
// writes they record, so the two commit together or not at all, and the
// chain's head, kept in the store, moves in the same commit.
//
// A Service whose Trail is a SharedTrail appends through AppendIn only,
// checks in each batch that the rings its encrypt calls use still exist,
// and (if its Store is also a Watcher) keeps its caches coherent with the
// other processes' writes.
type SharedTrail interface {
	Trail

	// AppendIn runs fn in a read-write transaction of the Store, as
	// Store.Update does (durably committed; fn may run more than once and
	// must have no other effect), and appends the records fn returns, as
	// the records first, first+1..., in the same commit. The AppendIn
	// calls of every process on the store run one after another: fn's
	// reads see the commit of the AppendIn before it. A first that is not
	// the end of the trail plus one fails the commit (seqs that exist
	// already run fn again), and nothing is written. No records: fn's
	// writes alone.
	AppendIn(ctx context.Context, fn func(tx Txn) (first uint64, recs [][]byte, err error)) error
}

// Watcher is a Store that other processes write too, and that tells each
// process what the others wrote, so that its caches stay coherent.
type Watcher interface {
	// Watch calls fn, on a goroutine of the store's, with the keys under
	// any of prefixes that other processes' committed transactions wrote,
	// soon after each commit, and with nil when it may have missed some
	// (its connection to the other processes was lost, say): then
	// everything may have changed. A transaction of this process that
	// writes keys under prefixes announces them to the other processes'
	// watchers. Watch returns a function that stops the watch and waits
	// for fn's last call.
	Watch(prefixes [][]byte, fn func(keys [][]byte)) (stop func())
}
