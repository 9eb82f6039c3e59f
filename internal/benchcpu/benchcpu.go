// Package benchcpu reports the CPU time a benchmark's process spends per
// operation (user and system, every goroutine and thread included), which
// ns/op does not tell for parallel benchmarks or ones that wait on a disk.
package benchcpu

import (
	"syscall"
	"testing"
	"time"
)

// Start begins counting; the function it returns reports the process's
// CPU time since then per b.N operations as the metric "cpu-µs/op".
// Call it after the benchmark's set-up, with the timer reset.
func Start(b *testing.B) (stop func()) {
	start := cpuTime()
	return func() {
		if b.N > 0 {
			b.ReportMetric(float64(cpuTime()-start)/float64(time.Microsecond)/float64(b.N), "cpu-µs/op")
		}
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
