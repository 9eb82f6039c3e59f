package main

import "testing"

// testSealStarted runs kmsbench -start in the encrypt mode of protocol
// (k8s, aws) alone, then in its decrypt mode taking turns with a second
// kmsd (-against), each with 4 clients, 20 calls and a pool of 20. It
// checks that kmsbench started a kmsd per target and stopped them all,
// and that each row counts the 20 calls, none failed, with the CPU of
// its kmsd; then check checks what is the protocol's own.
func testSealStarted(t *testing.T, protocol string, check func(t *testing.T, mode string, rows []row, stderr string)) {
	bin := testKmsd(t)
	for _, c := range []struct {
		mode    string
		more    []string
		targets []string
	}{
		{protocol + "-encrypt", nil, []string{"kmsd"}},
		{protocol + "-decrypt", []string{"-against", bin, "-rounds", "2"}, []string{"kmsd", "against"}},
	} {
		args := append([]string{"-start", "-kmsd", bin, "-kmsd-log-level", "warn", "-mode", c.mode, "-c", "4", "-n", "20", "-warmup", "100ms", "-pool", "20"}, c.more...)
		sum, stderr := runJSON(t, noEnv, args...)
		pids := startedPIDs(t, stderr)
		if len(pids) != len(c.targets) {
			t.Fatalf("%s: kmsbench started %d kmsd, want %d; stderr:\n%s", c.mode, len(pids), len(c.targets), stderr)
		}
		checkStopped(t, pids)
		if len(sum.Rows) != len(c.targets) {
			t.Fatalf("%s: rows %+v, want %q", c.mode, sum.Rows, c.targets)
		}
		for i, r := range sum.Rows {
			if r.Target != c.targets[i] || r.Mode != c.mode || r.Requests != 20 || r.Errors != 0 || len(r.ErrorsByStatus) != 0 || r.P99Ms <= 0 {
				t.Errorf("%s row %d: %+v; want %s with 20 calls, none failed", c.mode, i, r, c.targets[i])
			}
			if r.CPUSeconds == nil {
				t.Errorf("%s: %s row without the CPU of its kmsd", c.mode, r.Target)
			}
		}
		check(t, c.mode, sum.Rows, stderr)
	}
}
