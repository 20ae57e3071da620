package mount

import (
	"flag"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

var update = flag.Bool("update", false, "rewrite the options list of docs/mount-options.md from OptionsInfo")

// optionsDoc is the documentation's list of the options: between the markers, OptionsList.
const (
	optionsDoc   = "../docs/mount-options.md"
	listStarts   = "<!-- options: written by go test ./mount -run TestOptionsDoc -update -->\n"
	listEnds     = "<!-- end of options -->\n"
	optionsIntro = "# cassfs mount options\n\n" +
		"Every option of a mount is a flag of `cassfs mount` (`--NAME VALUE`), a key of its\n" +
		"configuration file (`--config`: `NAME: VALUE`), an option of the mount helper\n" +
		"(`-o NAME=VALUE`) and, where the table says so, a volume attribute of the CSI driver\n" +
		"(`NAME: \"VALUE\"`); each takes the same text. A volume also names its `dataset` and\n" +
		"may name its database's `hosts`; other users may always read a volume's mount\n" +
		"(`allow-other`). The flags of the database connection (`--hosts`, `--timeout`,\n" +
		"`--max-in-flight`, TLS and login) are in `cassfs mount --help`.\n\n"
)

// TestOptionsDoc: the documentation lists every option as OptionsInfo declares it.
func TestOptionsDoc(t *testing.T) {
	want := optionsIntro + listStarts + OptionsList() + listEnds
	if *update {
		if err := os.WriteFile(optionsDoc, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(optionsDoc)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("%s is not OptionsInfo's list: run go test ./mount -run TestOptionsDoc -update", optionsDoc)
	}
	for _, oi := range OptionsInfo {
		if !strings.Contains(string(got), "| `"+oi.Name+"` |") {
			t.Errorf("%s does not list %s", optionsDoc, oi.Name)
		}
	}
}

// TestOptionsInfo: every option is a flag (AddFlags) showing its default, and a volume
// attribute exactly when it says so; a flag and an attribute set the same field to the
// same value; the defaults shown are Defaults().
func TestOptionsInfo(t *testing.T) {
	fs := pflag.NewFlagSet("mount", pflag.ContinueOnError)
	o := Defaults()
	AddFlags(fs, &o)
	attrs := Attributes()
	seen := map[string]bool{}
	for _, oi := range OptionsInfo {
		if seen[oi.Name] {
			t.Errorf("option %s declared twice", oi.Name)
		}
		seen[oi.Name] = true
		f := fs.Lookup(oi.Name)
		if f == nil {
			t.Errorf("option %s is no flag", oi.Name)
			continue
		}
		if f.Usage != oi.Help || f.DefValue != oi.Default() {
			t.Errorf("flag --%s: help %q, default %q; want the option's %q, %q", oi.Name, f.Usage, f.DefValue, oi.Help, oi.Default())
		}
		if got := slices.Contains(attrs, oi.Name); got != oi.Attribute {
			t.Errorf("option %s: a volume attribute: %v, want %v", oi.Name, got, oi.Attribute)
		}
	}
	if got, want := len(attrs), 2+len(OptionsInfo)-4; got != want { // dataset, hosts; all but pprof, allow-other, debug-fuse, records-at
		t.Errorf("%d volume attributes (%s), want %d", got, strings.Join(attrs, ", "), want)
	}
	// One value per option, set by flag and by attribute.
	values := map[string]string{
		"seed": "7", "epochs-listed": "3", "epoch-views": "2", "cache-size": "2GiB", "cache-dir": "/c", "cache-dir-size": "10GiB",
		"prefetch": "100", "order": "strict", "prefetch-in-flight": "64", "block-samples": "8", "record-shard-size": "64MiB", "max-background": "12", "pprof": "true",
		"allow-other": "true", "debug-fuse": "true", "scan-index": "true", "splits": "train", "shard": "1/4",
		"speculative-after": "250ms", "shard-pad": "true", "look-ahead": "0", "push": "false", "stream-names": "true",
		"records-at": "/r",
	}
	va := map[string]string{"dataset": "tiles"}
	for _, oi := range OptionsInfo {
		s, ok := values[oi.Name]
		if !ok {
			t.Fatalf("no test value for option %s", oi.Name)
		}
		if err := fs.Set(oi.Name, s); err != nil {
			t.Errorf("--%s %s: %v", oi.Name, s, err)
		}
		if oi.Attribute {
			va[oi.Name] = s
		}
	}
	v, err := VolumeFromAttributes(va)
	if err != nil {
		t.Fatal(err)
	}
	o.Pprof, o.DebugFUSE, o.RecordsAt = false, false, "" // what no attribute sets
	if !reflect.DeepEqual(v.Options, o) {
		t.Errorf("attributes set %+v, flags %+v", v.Options, o)
	}
	if o.Shard.Rank != 1 || o.Shard.Count != 4 || !o.Shard.Pad || o.CacheBytes != 2<<30 || o.CacheDirBytes != 10<<30 {
		t.Errorf("flags set %+v", o)
	}
}
