package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/cassfs/cassfs/"

// imports is which package of cassfs may import which: the layering the package docs state
// and the README's layout table shows. A package imports only packages below it in that
// table; a new package, or a new import between two, is a decision made here, with its row
// in the README.
var imports = map[string][]string{
	"cmd/cassfs":        {"csi", "serve", "mount", "fs", "view", "disktier", "prefetch", "splits", "ingest", "attach", "synth", "readbench", "store/cassandra", "index", "store"},
	"csi":               {"mount", "handover"},
	"serve":             {"mount", "handover", "store/cassandra", "store"},
	"handover":          {},
	"mount":             {"fs", "view", "disktier", "prefetch", "splits", "store/cassandra", "store/hedge", "index", "store", "internal/inflight"},
	"fs":                {"view", "splits", "index", "internal/bitset"},
	"view":              {"prefetch", "splits", "index", "internal/bitset"},
	"disktier":          {"prefetch", "evict", "index", "internal/bitset"},
	"prefetch":          {"evict", "index", "store", "internal/bitset", "internal/inflight"},
	"evict":             {},
	"splits":            {"index", "store"},
	"ingest":            {"index", "store"},
	"attach":            {"splits", "index", "store"},
	"synth":             {},
	"readbench":         {"store"},
	"store/cassandra":   {"store", "internal/inflight"},
	"store/hedge":       {"store"},
	"store/memstore":    {"store"},
	"store/storetest":   {"internal/testkit", "store", "internal/inflight"},
	"internal/testkit":  {"index", "store"},
	"index":             {"store", "internal/bitset"},
	"store":             {},
	"internal/bitset":   {},
	"internal/inflight": {},
	// The checks run by make check, not part of cassfs.
	"internal/blankerr":              {},
	"internal/blankerr/cmd/blankerr": {"internal/blankerr"},
	// The Kubernetes manifests and their test.
	"contrib/kubernetes": {},
}

// external pins the libraries only one layer may use: go-fuse only in fs (and the
// command), gocql only in the Cassandra backend, Kubernetes' API types only where the
// manifests are checked (the node plugin speaks CSI to kubelet, not to the API server).
var external = map[string][]string{
	"github.com/hanwen/go-fuse/v2": {"fs", "cmd/cassfs"},
	"github.com/gocql/gocql":       {"store/cassandra"},
	"k8s.io/api":                   {"contrib/kubernetes"},
	"sigs.k8s.io/yaml":             {"contrib/kubernetes"},
}

// fakes are what any package's tests may use besides what sits below it: the shared test
// helpers, the in-memory store and the conformance suite.
var fakes = []string{"internal/testkit", "store/memstore", "store/storetest"}

// TestImportBoundaries checks every package's imports against imports and external, its
// tests' imports against the README's table (below the package, or fakes), and the table
// against the README's: every package has a row, and every import points down the table.
func TestImportBoundaries(t *testing.T) {
	rows := readmeLayers(t)
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}|{{join .Imports " "}}|{{join .TestImports " "}} {{join .XTestImports " "}}`, module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		parts := strings.Split(line, "|")
		pkg := strings.TrimPrefix(parts[0], module)
		if pkg == "e2e" {
			continue // the end-to-end tests drive the built binary and may use any package
		}
		allowed, known := imports[pkg]
		if !known {
			t.Errorf("package %s has no entry in imports: add it, with a row in the README's layout table", pkg)
			continue
		}
		for k, list := range parts[1:] {
			for _, imp := range strings.Fields(list) {
				dep, ours := strings.CutPrefix(imp, module)
				switch {
				case !ours:
					for lib, users := range external {
						if strings.HasPrefix(imp, lib) && !slices.Contains(users, pkg) {
							t.Errorf("%s imports %s: only %v may", pkg, imp, users)
						}
					}
				case dep == pkg || slices.Contains(allowed, dep):
				case k == 1 && (slices.Contains(fakes, dep) || slices.Index(rows, dep) > slices.Index(rows, pkg)):
				case k == 1:
					t.Errorf("%s's tests import %s, which sits above it in the README's layout table", pkg, dep)
				default:
					t.Errorf("%s imports %s, which imports does not allow", pkg, dep)
				}
			}
		}
	}
	for pkg, deps := range imports {
		at := slices.Index(rows, pkg)
		if at < 0 {
			t.Errorf("the README's layout table has no row for %s", pkg)
			continue
		}
		for _, dep := range deps {
			if slices.Index(rows, dep) <= at {
				t.Errorf("%s may import %s, which the README's layout table does not show below it", pkg, dep)
			}
		}
	}
}

// readmeLayers returns the paths of the README's layout table, top to bottom.
func readmeLayers(t *testing.T) []string {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, layout, ok := strings.Cut(string(readme), "\n## Layout\n")
	if !ok {
		t.Fatal("README.md has no Layout section")
	}
	var rows []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z/]+)`").FindAllStringSubmatch(layout, -1) {
		rows = append(rows, m[1])
	}
	return rows
}

// TestSizes keeps the code walkable: no Go file over 600 lines, and this command's own
// (non-test) code under 2,000 non-blank lines — commands parse flags and call packages.
func TestSizes(t *testing.T) {
	out, err := exec.Command("git", "-C", "../..", "ls-files", "*.go").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	cmdLines := 0
	for _, f := range strings.Fields(string(out)) {
		data, err := os.ReadFile(filepath.Join("../..", f))
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(data), "\n"); n > 600 {
			t.Errorf("%s has %d lines: split it by responsibility (at most 600)", f, n)
		}
		if strings.HasPrefix(f, "cmd/cassfs/") && !strings.HasSuffix(f, "_test.go") {
			for _, l := range strings.Split(string(data), "\n") {
				if strings.TrimSpace(l) != "" {
					cmdLines++
				}
			}
		}
	}
	if cmdLines >= 2000 {
		t.Errorf("cmd/cassfs has %d non-blank lines of code: move logic to the packages it belongs to (under 2,000)", cmdLines)
	}
}
