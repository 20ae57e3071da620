package main

import (
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
)

// runRoot runs cassfs with args and returns what it printed.
func runRoot(t *testing.T, args ...string) string {
	t.Helper()
	root := newRootCmd()
	var out strings.Builder
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	if err := root.Execute(); err != nil {
		t.Fatalf("cassfs %q: %v", args, err)
	}
	return out.String()
}

// TestRootHelpListsEveryCommand: cassfs --help names every command a user may run, with
// its summary, and none that is hidden.
func TestRootHelpListsEveryCommand(t *testing.T) {
	help := runRoot(t, "--help")
	root := newRootCmd()
	for _, c := range root.Commands() {
		line := regexp.MustCompile(`(?m)^\s+` + regexp.QuoteMeta(c.Name()) + `\s+` + regexp.QuoteMeta(c.Short) + `$`)
		switch listed := line.MatchString(help); {
		case c.Hidden && strings.Contains(help, c.Name()):
			t.Errorf("cassfs --help names the hidden command %s", c.Name())
		case !c.Hidden && !listed:
			t.Errorf("cassfs --help does not list %s (%q):\n%s", c.Name(), c.Short, help)
		}
	}
}

// TestVersion: cassfs version and cassfs --version print the same line: the module's
// version, and the VCS revision when the build recorded one.
func TestVersion(t *testing.T) {
	cmd, flag := runRoot(t, "version"), runRoot(t, "--version")
	if cmd != flag || !strings.HasPrefix(cmd, "cassfs ") || !strings.HasSuffix(cmd, "\n") {
		t.Errorf("cassfs version printed %q, cassfs --version %q: want one line, the same, starting with cassfs", cmd, flag)
	}
	for _, tc := range []struct {
		bi   *debug.BuildInfo
		ok   bool
		want string
	}{
		{&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.3"}}, true, "v1.2.3 go1.26.8"},
		{&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0bf023f"}, {Key: "vcs.time", Value: "2026-11-27T10:00:00Z"}, {Key: "vcs.modified", Value: "true"},
		}}, true, "(devel) revision 0bf023f+dirty (2026-11-27T10:00:00Z) go1.26.8"},
		{&debug.BuildInfo{GoVersion: "go1.26.8", Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.modified", Value: "false"}}}, true, "(devel) revision abc go1.26.8"},
	} {
		if got := versionOf(tc.bi, tc.ok); got != tc.want {
			t.Errorf("versionOf(%+v) = %q, want %q", tc.bi, got, tc.want)
		}
	}
	if got := versionOf(nil, false); !strings.HasPrefix(got, "(unknown") {
		t.Errorf("versionOf without build information = %q, want it to say it is unknown", got)
	}
}
