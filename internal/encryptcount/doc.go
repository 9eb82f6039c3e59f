// Package encryptcount counts the encrypt calls of each key against the
// total of calls reserved for it in the store.
//
// Encrypt calls are counted per key, from the key's first use, whether its
// ring has a maxEncryptCount or not, so that a limit set later counts the
// calls before it. The store holds, per key, the calls reserved in all: a
// process reserves a block of calls (adding it to the store's total in a
// read-modify-write transaction) before it answers the calls the block
// covers, and counts them off in memory. So with any number of processes
// on one store, the calls answered for a key never exceed the total, and a
// limit is never exceeded: no reservation takes the total past it. After
// a crash the calls reserved and not used stay counted, so a count may run
// over, never under. Release gives back what was reserved and not used.
//
// A reservation is a durable store commit in the journal (Config.Submit), which holds up
// the batches behind it, so it covers a block of calls: unlimitedBlock
// for a key without a limit, whose encrypt calls otherwise write nothing
// to the store; for a key with a limit, an eighth of the limit, at least
// 1 and at most counterBlock, so that several processes share a small
// limit rather than one taking it whole; for a limit above 2^26, where
// counterBlock is less than a 65,536th of it (the bound on a transit
// key's encryptions, 2^32), that 65,536th, up to unlimitedBlock, so that
// such a key reserves as seldom as one without a limit (limitedBlock).
// The call that reaches the middle
// of a block reserves the next, so that the calls after it do not wait.
//
// BenchmarkEncrypt (a ring without a limit, 64 callers, 2 cores), medians
// of interleaved runs against the code that did not count such keys: with
// blocks of 1024 for them too, 69 us/op against 50 on disk (slower in 7
// of 8 pairs); with unlimitedBlock, 24.5 against 24.0 on disk (faster in
// 7 of 14 pairs) and 11.6 against 11.7 on tmpfs (faster in 6 of 12), with
// the same 25 allocations: the count itself (a map lookup and an atomic
// add) does not show.
package encryptcount
