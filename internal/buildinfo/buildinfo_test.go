package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestFrom(t *testing.T) {
	tests := []struct {
		name string
		bi   *debug.BuildInfo
		ok   bool
		want string
	}{
		{"none", nil, false, "kmsd unknown"},
		{"release", &debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Version: "v1.4.0"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.time", Value: "2026-11-26T10:00:00Z"}}},
			true, "kmsd v1.4.0 abc123 (2026-11-26T10:00:00Z) go1.26.1"},
		{"checkout with changes", &debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "true"}}},
			true, "kmsd (devel) abc123+modified go1.26.1"},
		{"no version, no vcs", &debug.BuildInfo{GoVersion: "go1.26.1"}, true, "kmsd (devel) go1.26.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := From(tt.bi, tt.ok).Line("kmsd"); got != tt.want {
				t.Errorf("From(...).Line(kmsd) = %q, want %q", got, tt.want)
			}
		})
	}
}
