package main

import (
	"os"
	"strings"
	"testing"
	"time"
)

func TestParseStatCPU(t *testing.T) {
	// The fields after the command name: state, ppid, pgrp, session,
	// tty_nr, tpgid, flags, minflt, cminflt, majflt, cmajflt, utime
	// (field 14), stime (15), cutime, cstime, ...
	const rest = " S 1 4242 4242 0 -1 4194560 1200 0 3 0 150 37 9 4 20 0 8 0 12345 1000000 2000 18446744073709551615\n"
	for _, tt := range []struct {
		name, stat string
		want       time.Duration
		wantErr    string
	}{
		{name: "plain", stat: "4242 (kmsd)" + rest, want: 1870 * time.Millisecond},
		{name: "spaces and parentheses in the name", stat: "4242 (a ) b (c) 1 2)" + rest, want: 1870 * time.Millisecond},
		{name: "name that looks like fields", stat: "4242 (x) S 1 2 3 4 5 6 7 8 9 10 11 12)" + rest, want: 1870 * time.Millisecond},
		{name: "empty name", stat: "4242 ()" + rest, want: 1870 * time.Millisecond},
		{name: "no name", stat: "4242 kmsd" + rest, wantErr: "no command name"},
		{name: "truncated", stat: "4242 (kmsd) S 1 4242 4242 0 -1 4194560 1200 0 3 0 150", wantErr: "12 fields"},
		{name: "not a number", stat: "4242 (kmsd) S 1 4242 4242 0 -1 4194560 1200 0 3 0 1x0 37", wantErr: `"1x0"`},
		{name: "negative", stat: "4242 (kmsd) S 1 4242 4242 0 -1 4194560 1200 0 3 0 150 -37", wantErr: `"-37"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStatCPU([]byte(tt.stat))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parseStatCPU(%q) = %v, %v; want an error with %q", tt.stat, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("parseStatCPU(%q) = %v, %v; want %v", tt.stat, got, err, tt.want)
			}
		})
	}
}

// TestReadCPU reads the test's own CPU time, where the system has /proc.
func TestReadCPU(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc: the CPU figures are left out")
	}
	if d, err := readCPU(os.Getpid()); err != nil || d < 0 {
		t.Errorf("readCPU(self) = %v, %v; want a time", d, err)
	}
	m := newCPUMeter([]int{os.Getpid(), 1 << 30}) // no such process
	m.around(func() {})
	if m.result() != nil {
		t.Errorf("CPU with a process gone = %v, want not known", m.result())
	}
}
