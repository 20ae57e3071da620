package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/cassfs/cassfs/internal/testkit"
	"github.com/cassfs/cassfs/store"
)

func TestBenchStoreAndLocal(t *testing.T) {
	st := tiles(t, 6, false)
	local := t.TempDir()
	err := st.Scan(context.Background(), func(s store.Sample) error {
		p := filepath.Join(local, filepath.FromSlash(s.Name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		return os.WriteFile(p, []byte(s.Name), 0o644)
	})
	testkit.Check(t, err)
	var out, errOut bytes.Buffer
	if err := runBench(context.Background(), st, benchOpts{samples: 40, readers: 3, local: local}, &out, &errOut); err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[1], "store") || !strings.Contains(lines[1], "1.00×") || !strings.Contains(lines[2], "local") {
		t.Errorf("bench output:\n%s", out.String())
	}
	for _, l := range lines[1:] {
		if f := strings.Fields(l); len(f) < 2 || f[1] != "40" {
			t.Errorf("a path did not read 40 files: %q", l)
		}
		// This process's CPU per file; no mount, so no daemon CPU or fetches.
		if f := strings.Fields(l); len(f) != 10 || !regexp.MustCompile(`^\d+$`).MatchString(f[7]) || f[8] != "—" || f[9] != "—" {
			t.Errorf("CPU and fetch columns of %q: want a number, then — twice", l)
		}
	}
	// A missing local tree is reported as failed reads.
	err = runBench(context.Background(), st, benchOpts{samples: 5, readers: 1, local: t.TempDir()}, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "local: 5 of 5 reads failed") {
		t.Errorf("bench of an empty local tree: %v", err)
	}
}
