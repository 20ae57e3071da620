package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// version describes the binary: the module version it was built as and the VCS revision
// it was built from, as the Go toolchain recorded them (runtime/debug.ReadBuildInfo).
// A binary built from a work tree with uncommitted changes says so ("+dirty").
func version() string {
	return versionOf(debug.ReadBuildInfo())
}

func versionOf(bi *debug.BuildInfo, ok bool) string {
	if !ok {
		return "(unknown: no build information) " + runtime.Version()
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, when string
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			when = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	var b strings.Builder
	b.WriteString(v)
	if rev != "" {
		fmt.Fprintf(&b, " revision %s", rev)
		if dirty {
			b.WriteString("+dirty")
		}
		if when != "" {
			fmt.Fprintf(&b, " (%s)", when)
		}
	}
	fmt.Fprintf(&b, " %s", bi.GoVersion)
	return b.String()
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version and VCS revision cassfs was built from",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			fmt.Fprintln(c.OutOrStdout(), "cassfs", version())
			return nil
		},
	}
}
