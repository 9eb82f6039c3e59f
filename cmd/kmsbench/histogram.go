package main

import (
	"math"
	"math/bits"
	"time"
)

// Histogram records latencies in log-linear buckets, after HdrHistogram:
// 1 µs resolution below 128 µs, then every power of two is cut into 128
// equal buckets, so a bucket is never wider than 1/128 (0.8 %) of its
// lower bound. Values up to 2^25 µs (33.5 s) have their own bucket; longer
// ones land in the last, and Max still holds them exactly. Its size is
// fixed (about 19 KiB) whatever it records; the zero value is empty and
// ready. It is not safe for concurrent use: each worker keeps its own and
// they are merged at the end.
type Histogram struct {
	counts   [numBuckets]uint64
	n        uint64
	min, max time.Duration
}

const (
	subBits    = 7            // 2^subBits buckets per power of two
	subCount   = 1 << subBits // 128
	maxBits    = 25           // values below 2^maxBits µs get their own bucket
	numBuckets = (maxBits - subBits + 1) * subCount
)

// bucketOf returns the index of the bucket that holds us microseconds.
func bucketOf(us uint64) int {
	if us < subCount {
		return int(us)
	}
	if us >= 1<<maxBits {
		return numBuckets - 1
	}
	e := bits.Len64(us) - 1  // us is in [2^e, 2^(e+1)), e >= subBits
	m := us >> (e - subBits) // the top subBits+1 bits, in [128, 256)
	return (e-subBits+1)*subCount + int(m-subCount)
}

// bucketRange returns the lowest value of bucket i and its width, in
// microseconds.
func bucketRange(i int) (lo, width uint64) {
	if i < subCount {
		return uint64(i), 1
	}
	shift := i/subCount - 1 // e - subBits
	m := uint64(subCount + i%subCount)
	return m << shift, 1 << shift
}

// Record adds one latency. Negative values count as zero.
func (h *Histogram) Record(d time.Duration) {
	d = max(d, 0)
	h.counts[bucketOf(uint64(d/time.Microsecond))]++
	if h.n == 0 || d < h.min {
		h.min = d
	}
	if d > h.max {
		h.max = d
	}
	h.n++
}

// Merge adds every value recorded in o to h.
func (h *Histogram) Merge(o *Histogram) {
	if o.n == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	h.max = max(h.max, o.max)
	h.n += o.n
}

// Count returns the number of values recorded.
func (h *Histogram) Count() uint64 { return h.n }

// Max returns the largest value recorded, exactly.
func (h *Histogram) Max() time.Duration { return h.max }

// Quantile returns the value below or at which a fraction q (0 to 1) of
// the recorded values lie: the middle of the bucket that holds the value
// of rank ceil(q*n), kept within the exact minimum and maximum; for the
// last rank, the exact maximum. It is 0 when nothing was recorded.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	q = min(max(q, 0), 1)
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = max(rank, 1)
	if rank == h.n {
		return h.max // known exactly
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			lo, width := bucketRange(i)
			v := time.Duration(lo+width/2) * time.Microsecond
			return min(max(v, h.min), h.max)
		}
	}
	return h.max
}
