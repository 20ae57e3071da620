package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cassfs/cassfs/internal/testkit"
	"github.com/cassfs/cassfs/mount"
)

// TestMountOptions: every option of mount.OptionsInfo is a flag of cassfs mount, with the
// option's help and default, listed by cassfs mount --help, and a key its configuration
// file may set.
func TestMountOptions(t *testing.T) {
	help := runRoot(t, "mount", "--help")
	c := newMountCmd()
	c.Flags().String("config", "", "")
	var yaml strings.Builder
	for _, oi := range mount.OptionsInfo {
		f := c.Flags().Lookup(oi.Name)
		if f == nil {
			t.Errorf("option %s is no flag of cassfs mount", oi.Name)
			continue
		}
		if f.Usage != oi.Help || f.DefValue != oi.Default() {
			t.Errorf("--%s: help %q, default %q; want the option's %q, %q", oi.Name, f.Usage, f.DefValue, oi.Help, oi.Default())
		}
		if !strings.Contains(help, "--"+oi.Name+" ") {
			t.Errorf("cassfs mount --help does not list --%s", oi.Name)
		}
		fmt.Fprintf(&yaml, "%s: %q\n", oi.Name, f.DefValue)
	}
	p := filepath.Join(t.TempDir(), "all.yaml")
	testkit.Check(t, os.WriteFile(p, []byte(yaml.String()), 0o644))
	if err := applyConfig(c, p); err != nil {
		t.Fatalf("a configuration file of every option: %v", err)
	}
	for _, oi := range mount.OptionsInfo {
		if f := c.Flags().Lookup(oi.Name); f != nil && !f.Changed {
			t.Errorf("the configuration file did not set --%s", oi.Name)
		}
	}
	if f := c.Flags().Lookup("max-in-flight"); f == nil || f.DefValue != fmt.Sprint(mount.MaxInFlight) {
		t.Errorf("cassfs mount --max-in-flight defaults to %v, want mount.MaxInFlight (%d)", f, mount.MaxInFlight)
	}
}
