// Package buildinfo tells which build of ringkms a binary is: the module
// version and the version-control revision that the Go toolchain records
// in every binary it builds.
package buildinfo

import (
	"fmt"
	"runtime/debug"
)

// Info is what a binary knows of its build.
type Info struct {
	Version  string // the module version: "v1.2.3", or "(devel)" for a build from a checkout
	Revision string // the VCS revision, "" when the build recorded none
	Time     string // the revision's commit time (RFC 3339), if recorded
	Modified bool   // the work tree had changes the revision lacks
	Go       string // the Go toolchain
}

// Read returns the build information of the running binary.
func Read() Info { return From(debug.ReadBuildInfo()) }

// From returns the Info of bi, as debug.ReadBuildInfo returns it.
func From(bi *debug.BuildInfo, ok bool) Info {
	if !ok || bi == nil {
		return Info{Version: "unknown"}
	}
	in := Info{Version: bi.Main.Version, Go: bi.GoVersion}
	if in.Version == "" {
		in.Version = "(devel)"
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			in.Revision = s.Value
		case "vcs.time":
			in.Time = s.Value
		case "vcs.modified":
			in.Modified = s.Value == "true"
		}
	}
	return in
}

// String is the one line a version command prints: the program's name,
// the module version, the revision (with "+modified" when the tree had
// changes) and its time, and the toolchain.
func (in Info) String() string { return in.Line("ringkms") }

// Line is String for the program name.
func (in Info) Line(name string) string {
	s := name + " " + in.Version
	if in.Revision != "" {
		s += " " + in.Revision
		if in.Modified {
			s += "+modified"
		}
		if in.Time != "" {
			s += " (" + in.Time + ")"
		}
	}
	if in.Go != "" {
		s += fmt.Sprintf(" %s", in.Go)
	}
	return s
}
