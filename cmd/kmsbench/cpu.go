package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"
)

// The CPU time a process spends serving a load comes from /proc/PID/stat:
// utime + stime, the user and system time of all its threads. Those are
// counted in clock ticks of USER_HZ, which Linux fixes at 100 a second in
// its interface to user space on every architecture Go runs on
// (sysconf(_SC_CLK_TCK) answers it; the kernel converts from its own HZ).
// A tick is 10 ms, so a figure is as good as the process used many of
// them over the measured loads.
const (
	userHZ  = 100
	clkTick = time.Second / userHZ
)

// readCPU returns the CPU time (user + system) that process pid has used
// so far. It fails when the process has gone, or the system has no /proc.
func readCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	return parseStatCPU(b)
}

// parseStatCPU returns utime + stime, fields 14 and 15 of a /proc/PID/stat
// line. Field 2, the command name in parentheses, may itself hold spaces
// and parentheses: the fields are counted from after its last ')'.
func parseStatCPU(stat []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("/proc/PID/stat: no command name")
	}
	// After the name: field 3 (the state) is the first, 14 the 12th.
	f := bytes.Fields(stat[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/PID/stat: %d fields after the command name, want at least 13", len(f))
	}
	var ticks int64
	for _, field := range f[11:13] {
		n, err := strconv.ParseInt(string(field), 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("/proc/PID/stat: CPU time %q: want a count of clock ticks", field)
		}
		ticks += n
	}
	return time.Duration(ticks) * clkTick, nil
}

// cpuMeter sums the CPU time that the processes of one target spend
// during its measured loads.
type cpuMeter struct {
	pids   []int           // the target's processes, one per URL; none: not known
	spent  []time.Duration // by process, in the order of pids
	failed bool            // a read failed: no figure
}

func newCPUMeter(pids []int) *cpuMeter {
	return &cpuMeter{pids: pids, spent: make([]time.Duration, len(pids))}
}

// around runs f, the load, and adds what each process spent meanwhile.
func (m *cpuMeter) around(f func()) {
	before := m.read()
	f()
	after := m.read()
	if before == nil || after == nil {
		m.failed = true
		return
	}
	for i := range m.spent {
		m.spent[i] += after[i] - before[i]
	}
}

// read returns the CPU time of every process, or nil when one cannot be
// read (or there are none).
func (m *cpuMeter) read() []time.Duration {
	if len(m.pids) == 0 || m.failed {
		return nil
	}
	out := make([]time.Duration, len(m.pids))
	for i, pid := range m.pids {
		d, err := readCPU(pid)
		if err != nil {
			return nil
		}
		out[i] = d
	}
	return out
}

// result is the CPU time of each process over the loads, or nil when not
// known.
func (m *cpuMeter) result() []time.Duration {
	if len(m.pids) == 0 || m.failed {
		return nil
	}
	return m.spent
}
