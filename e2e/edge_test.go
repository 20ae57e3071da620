//go:build e2e

package e2e

import (
	"bytes"
	"crypto/sha256"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cassfs/cassfs/index"
	"github.com/cassfs/cassfs/ingest"
)

// TestEdgeCases: a dataset of one sample, in a class with spaces and unicode in its name,
// under a file name of the longest allowed length, holding a blob at the size limit; a file
// one byte over the limit and a name one byte too long are skipped with their reasons.
func TestEdgeCases(t *testing.T) {
	root := t.TempDir()
	class := "ünï cödé class"
	long := strings.Repeat("é", (index.MaxNameLen-4)/2) + ".jpg" // 2-byte runes
	if len(long) > index.MaxNameLen || len(long) < index.MaxNameLen-1 {
		t.Fatalf("test name is %d bytes", len(long))
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), ingest.DefaultMaxSize/16)
	for name, data := range map[string][]byte{
		long:       big,
		"over.jpg": append(big, 'x'),
		strings.Repeat("a", index.MaxNameLen-3) + ".jpg": []byte("too long a name"),
	} {
		if err := os.MkdirAll(filepath.Join(root, class), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, class, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ds := newDataset(t, "edge")
	r := cassfs(t, "ingest", "-d", ds, "--progress", "none", root)
	if r.code != 1 || !strings.Contains(r.stdout, "over.jpg: ") || !strings.Contains(r.stdout, "over the size limit") ||
		!strings.Contains(r.stdout, "keep it to 244") || !strings.Contains(r.stdout, "1 files written") {
		t.Fatalf("ingest: %s", r)
	}

	m := startMount(t, ds)
	dir := filepath.Join(m.dir, "all", "epoch-0", class)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "0_"+long {
		t.Fatalf("class directory lists %d entries (%v), want 0_<the long name>", len(entries), entries)
	}
	got, err := os.ReadFile(filepath.Join(dir, entries[0].Name()))
	if err != nil {
		t.Fatal(err)
	}
	if sha256.Sum256(got) != sha256.Sum256(big) {
		t.Errorf("the %d-byte sample read back as %d bytes with other content", len(big), len(got))
	}
	list, err := os.ReadFile(filepath.Join(m.dir, "all", "epoch-0", "file_list.txt"))
	if err != nil || string(list) != class+"/0_"+long+" 0\n" {
		t.Errorf("file_list.txt = %q, %v", list, err)
	}
	// Any epoch and a resumed view of a one-sample split work.
	if e, err := os.ReadDir(filepath.Join(m.dir, "all", "epoch-123456789", class)); err != nil || len(e) != 1 {
		t.Errorf("epoch-123456789: %v, %v", e, err)
	}
	if e, err := os.ReadDir(filepath.Join(m.dir, "all", "epoch-0@1", class)); err != nil || len(e) != 0 {
		t.Errorf("epoch-0@1 (past the only sample): %v, %v", e, err)
	}
}
