package main

import (
	"fmt"
	"runtime/debug"
	"strings"
)

const versionUsage = `Usage:
  paymentd version

Prints the version and commit the build scripts stamped in (deploy/build.sh: git
describe of the newest v* tag, v0.0.0-<commits>-g<commit> before the first), else
what debug.BuildInfo records: the module version (devel+<commit> when Go has none),
the commit it was built from and that commit's time (Go records no build time),
whether the working tree had uncommitted changes, and the Go version. Commit fields
are "unknown" for a binary built without VCS information (go run, -buildvcs=false).
`

// version is what a binary knows about its own build.
type version struct {
	Module  string // module path
	Version string // module version: a tag, a pseudo-version, or (devel)
	// Commit and CommitTime are vcs.revision and vcs.time: the commit the
	// binary was built from and the time of that commit (RFC 3339, UTC).
	Commit     string
	CommitTime string
	// Modified is vcs.modified: the working tree had uncommitted changes.
	Modified bool
	Go       string
}

// buildVersion and buildCommit are set by deploy/build.sh (./run.sh, the
// image, the benchmark) with -ldflags -X from deploy/version.sh and git
// rev-parse HEAD; empty in a plain go build, go run or test binary.
var buildVersion, buildCommit string

// readVersion reads the running binary's build information, with what the
// build scripts stamped in first.
func readVersion() version {
	return versionOf(debug.ReadBuildInfo()).stamped(buildVersion, buildCommit)
}

// stamped puts the build scripts' version and commit in place of what Go
// recorded. Without them a version Go could not name ((devel): go run, a
// build in a container without .git) becomes devel+<vcs.revision>, so
// that even then the binary names its commit when Go recorded one.
func (v version) stamped(ver, commit string) version {
	if commit != "" && commit != v.Commit {
		v.Commit, v.CommitTime, v.Modified = commit, "unknown", strings.HasSuffix(ver, "-dirty")
	}
	switch {
	case ver != "":
		v.Version = ver
	case (v.Version == "(devel)" || v.Version == "unknown") && v.Commit != "unknown":
		v.Version = "devel+" + v.Commit[:min(12, len(v.Commit))]
		if v.Modified {
			v.Version += "-dirty"
		}
	}
	return v
}

// versionOf extracts the version from build information; ok false means
// there is none.
func versionOf(bi *debug.BuildInfo, ok bool) version {
	v := version{Module: "github.com/rustbill/paymentd", Version: "unknown", Commit: "unknown", CommitTime: "unknown", Go: "unknown"}
	if !ok || bi == nil {
		return v
	}
	if bi.Main.Path != "" {
		v.Module = bi.Main.Path
	}
	if bi.Main.Version != "" {
		v.Version = bi.Main.Version
	}
	if bi.GoVersion != "" {
		v.Go = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = s.Value
		case "vcs.time":
			v.CommitTime = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

// String is the answer of `paymentd version`.
func (v version) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "paymentd %s\n", v.Version)
	fmt.Fprintf(&b, "module:      %s\n", v.Module)
	commit := v.Commit
	if v.Modified {
		commit += " (with uncommitted changes)"
	}
	fmt.Fprintf(&b, "commit:      %s\n", commit)
	fmt.Fprintf(&b, "commit time: %s\n", v.CommitTime)
	fmt.Fprintf(&b, "go:          %s\n", v.Go)
	return b.String()
}
