//go:build e2e

package e2e

import (
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestArrivalReadersThroughLatency: DALI (file_list) and torchvision (ImageFolder with a
// shuffling DataLoader) read a whole epoch correctly under --order arrival over a 20 ms link
// with jitter: every sample exactly once, each with its class's label.
func TestArrivalReadersThroughLatency(t *testing.T) {
	d := sharedDataset(t)
	ln := newLink(t, linkSpec{Name: "arrival", RTT: 20 * time.Millisecond, Jitter: 5 * time.Millisecond})
	m := startMount(t, d.name, append(ln.mountArgs(), "--order", "arrival")...)

	var dali daliOut
	runPython(t, &dali, "dali_read.py", "--file-list", filepath.Join(m.dir, "all", "epoch-0", "file_list.txt"))
	seen := map[string]bool{}
	for _, s := range dali.Samples {
		rel, ok := d.byHash[s.SHA256]
		if !ok || seen[rel] {
			t.Fatalf("DALI read unknown or repeated content (%q)", rel)
		}
		seen[rel] = true
		if s.Label != slices.Index(d.ix.Labels(), class(rel)) {
			t.Errorf("DALI: %s with label %d", rel, s.Label)
		}
	}
	if len(seen) != sharedCount {
		t.Errorf("DALI read %d samples under arrival binding, want %d", len(seen), sharedCount)
	}

	var ref map[string]string
	runPython(t, &ref, "pixel_hashes.py", d.root)
	byPixels := map[string]string{}
	for rel, h := range ref {
		byPixels[h] = rel
	}
	var tv struct {
		Samples []struct {
			Pixels string `json:"pixels"`
			Label  int    `json:"label"`
		} `json:"samples"`
	}
	runPython(t, &tv, "torch_read.py", filepath.Join(m.dir, "all", "epoch-1"), "--workers", "2")
	seen = map[string]bool{}
	for _, s := range tv.Samples {
		rel, ok := byPixels[s.Pixels]
		if !ok || seen[rel] {
			t.Fatalf("torchvision read unknown or repeated pixels (%q)", rel)
		}
		seen[rel] = true
		if s.Label != slices.Index(d.ix.Labels(), class(rel)) {
			t.Errorf("torchvision: %s with label %d", rel, s.Label)
		}
	}
	if len(seen) != sharedCount {
		t.Errorf("torchvision read %d samples under arrival binding, want %d", len(seen), sharedCount)
	}
}
