package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cassfs/cassfs/internal/testkit"
	"github.com/cassfs/cassfs/mount"
	"github.com/spf13/cobra"
)

// configFlags are the flags of configCmd's command: some of mount's, set by applyConfig.
type configFlags struct {
	db        dbFlags
	o         mount.Options
	cacheSize string
}

func configCmd(t *testing.T) (*cobra.Command, *configFlags) {
	var f configFlags
	c := &cobra.Command{Use: "mount"}
	f.db.register(c)
	c.Flags().Uint64Var(&f.o.Seed, "seed", 0, "")
	c.Flags().StringVar(&f.cacheSize, "cache-size", "1GiB", "")
	c.Flags().String("config", "", "")
	return c, &f
}

func writeConfig(t *testing.T, body string) string {
	p := filepath.Join(t.TempDir(), "cassfs.yaml")
	testkit.Check(t, os.WriteFile(p, []byte(body), 0o644))
	return p
}

func TestConfigFile(t *testing.T) {
	c, f := configCmd(t)
	c.Flags().Parse([]string{"--seed", "9"})
	p := writeConfig(t, "dataset: tiles\nseed: 3\ncache-size: 8GiB\naddress-map: [\"10.0.0.5:9042=127.0.0.1:1\", \"10.0.0.6:9042=127.0.0.1:2\"]\ntimeout: 3s\n")
	if err := applyConfig(c, p); err != nil {
		t.Fatal(err)
	}
	if f.db.dataset != "tiles" || f.cacheSize != "8GiB" || f.db.timeout.String() != "3s" || len(f.db.addressMap) != 2 {
		t.Errorf("config not applied: %+v", f)
	}
	if f.o.Seed != 9 {
		t.Errorf("seed %d: the command line (9) must win over the file (3)", f.o.Seed)
	}
	for body, want := range map[string]string{
		"datasett: x\n":      `"datasett" is not a flag`,
		"password: x\n":      "does not belong in a configuration file",
		"- a\n- b\n":         "not a YAML mapping",
		"seed: [1, x]\n":     "seed",
		"hosts: {a: 1}\n":    "a mapping is not a flag value",
		"timeout: forever\n": "timeout",
	} {
		c, _ := configCmd(t)
		err := applyConfig(c, writeConfig(t, body))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("config %q: %v, want an error containing %q", body, err, want)
		}
	}
	c, _ = configCmd(t)
	if err := applyConfig(c, filepath.Join(t.TempDir(), "none.yaml")); err == nil {
		t.Error("a missing config file was accepted")
	}
}

// TestExampleConfig: the example configuration in the repository is valid for mount.
func TestExampleConfig(t *testing.T) {
	c := newMountCmd()
	c.Flags().String("config", "", "")
	if err := applyConfig(c, "../../contrib/cassfs.yaml"); err != nil {
		t.Fatal(err)
	}
	if v := testkit.Must(c.Flags().GetString("cache-size"))(t); v != "8GiB" {
		t.Errorf("cache-size from the example is %q", v)
	}
}
