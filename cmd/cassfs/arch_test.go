package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportBoundaries pins the layering the package docs state: go-fuse only in fs (and
// this command), gocql only in the Cassandra backend, and the core packages free of both.
func TestImportBoundaries(t *testing.T) {
	const (
		fuse  = "github.com/hanwen/go-fuse/v2"
		gocql = "github.com/gocql/gocql"
	)
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "github.com/cassfs/cassfs/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, " ")
		for _, imp := range strings.Fields(imports) {
			if strings.HasPrefix(imp, fuse) && pkg != "github.com/cassfs/cassfs/fs" && pkg != "github.com/cassfs/cassfs/cmd/cassfs" {
				t.Errorf("%s imports %s: only fs may", pkg, imp)
			}
			if strings.HasPrefix(imp, gocql) && pkg != "github.com/cassfs/cassfs/store/cassandra" {
				t.Errorf("%s imports %s: only store/cassandra may", pkg, imp)
			}
		}
	}
	for _, core := range []string{"./splits", "./prefetch", "./view", "./store", "./store/memstore", "./ingest"} {
		deps, err := exec.Command("go", "list", "-deps", "../../"+core).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", core, err)
		}
		for _, dep := range strings.Fields(string(deps)) {
			if strings.HasPrefix(dep, fuse) || strings.HasPrefix(dep, gocql) {
				t.Errorf("%s depends on %s", core, dep)
			}
		}
	}
}
