package main

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
	"unsafe"
)

func TestBuckets(t *testing.T) {
	prev := -1
	for us := uint64(0); us < 1<<maxBits; us = us + 1 + us/97 {
		i := bucketOf(us)
		if i < prev || i >= numBuckets {
			t.Fatalf("bucketOf(%d) = %d after %d; want increasing and below %d", us, i, prev, numBuckets)
		}
		prev = i
		lo, width := bucketRange(i)
		if us < lo || us >= lo+width {
			t.Fatalf("bucketRange(bucketOf(%d)) = [%d, %d), does not hold it", us, lo, lo+width)
		}
		if us >= subCount && float64(width)/float64(lo) > 1.0/subCount {
			t.Fatalf("bucket of %d µs is %d wide from %d: over 1/%d", us, width, lo, subCount)
		}
		if us < subCount && width != 1 {
			t.Fatalf("bucket of %d µs is %d wide, want 1 µs below %d µs", us, width, subCount)
		}
	}
	if got := bucketOf(1<<maxBits - 1); got != numBuckets-1 {
		t.Errorf("bucketOf(2^%d-1) = %d, want the last bucket %d", maxBits, got, numBuckets-1)
	}
}

// exactQuantile is the value of rank ceil(q*n) in sorted.
func exactQuantile(sorted []time.Duration, q float64) time.Duration {
	rank := max(int(math.Ceil(q*float64(len(sorted)))), 1)
	return sorted[rank-1]
}

func TestQuantile(t *testing.T) {
	const n = 200_000
	rng := rand.New(rand.NewPCG(1, 2))
	tests := []struct {
		name string
		gen  func() time.Duration
	}{
		{"uniform 0-100ms", func() time.Duration { return time.Duration(rng.Int64N(int64(100 * time.Millisecond))) }},
		{"exponential mean 2ms", func() time.Duration { return time.Duration(rng.ExpFloat64() * float64(2*time.Millisecond)) }},
		{"lognormal around 500us", func() time.Duration {
			return time.Duration(math.Exp(rng.NormFloat64()*0.8) * float64(500*time.Microsecond))
		}},
		{"bimodal 80us and 40ms", func() time.Duration {
			if rng.IntN(100) < 97 {
				return 80*time.Microsecond + time.Duration(rng.IntN(20_000))
			}
			return 40*time.Millisecond + time.Duration(rng.IntN(10_000_000))
		}},
		{"exact below 128us", func() time.Duration { return time.Duration(rng.IntN(128)) * time.Microsecond }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h Histogram
			samples := make([]time.Duration, n)
			for i := range samples {
				samples[i] = tt.gen()
				h.Record(samples[i])
			}
			slices.Sort(samples)
			if h.Count() != n {
				t.Errorf("Count() = %d, want %d", h.Count(), n)
			}
			if h.Max() != samples[n-1] {
				t.Errorf("Max() = %v, want %v", h.Max(), samples[n-1])
			}
			for _, q := range []float64{0, 0.01, 0.25, 0.5, 0.9, 0.97, 0.99, 0.999, 1} {
				want := exactQuantile(samples, q)
				// The bucket's middle is within half its width, at most
				// 1/256 of the value, plus the 1 µs resolution.
				tol := want/(2*subCount) + time.Microsecond
				if got := h.Quantile(q); got < want-tol || got > want+tol {
					t.Errorf("Quantile(%v) = %v, want %v ± %v", q, got, want, tol)
				}
			}
		})
	}
}

func TestQuantileEdges(t *testing.T) {
	var h Histogram
	if got := h.Quantile(0.5); got != 0 {
		t.Errorf("empty: Quantile(0.5) = %v, want 0", got)
	}
	h.Record(1234567 * time.Nanosecond)
	for _, q := range []float64{0, 0.5, 1, -1, 2} {
		if got := h.Quantile(q); got != 1234567*time.Nanosecond {
			t.Errorf("one value: Quantile(%v) = %v, want 1.234567ms (the exact min and max)", q, got)
		}
	}
	h.Record(-time.Second)
	if got := h.Quantile(0); got != 0 {
		t.Errorf("after a negative value: Quantile(0) = %v, want 0", got)
	}
}

func TestMerge(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var whole Histogram
	parts := make([]Histogram, 3)
	for i := range 30_000 {
		d := time.Duration(rng.ExpFloat64() * float64(time.Millisecond))
		whole.Record(d)
		parts[i%3].Record(d)
	}
	var merged Histogram
	merged.Merge(&Histogram{}) // merging nothing changes nothing
	for i := range parts {
		merged.Merge(&parts[i])
	}
	if merged != whole {
		t.Fatalf("merged parts differ from the whole: Count %d/%d, Max %v/%v, p99 %v/%v",
			merged.Count(), whole.Count(), merged.Max(), whole.Max(), merged.Quantile(0.99), whole.Quantile(0.99))
	}
	before := merged
	merged.Merge(&Histogram{})
	if merged != before {
		t.Errorf("Merge(empty) changed the histogram")
	}
}

func TestHistogramBoundedMemory(t *testing.T) {
	if size := unsafe.Sizeof(Histogram{}); size > 32<<10 {
		t.Errorf("Histogram is %d bytes, want at most 32 KiB", size)
	}
	var h Histogram
	allocs := testing.AllocsPerRun(1000, func() {
		h.Record(time.Duration(rand.Int64N(int64(time.Minute))))
	})
	if allocs != 0 {
		t.Errorf("Record allocates %v times, want 0", allocs)
	}
	// Beyond the last bucket: counted there, and Max stays exact.
	var big Histogram
	big.Record(time.Millisecond)
	big.Record(time.Hour)
	if big.Max() != time.Hour || big.Quantile(1) != time.Hour {
		t.Errorf("after 1h: Max() = %v, Quantile(1) = %v, want 1h", big.Max(), big.Quantile(1))
	}
	if big.counts[numBuckets-1] != 1 {
		t.Errorf("1h is not in the last bucket")
	}
}
