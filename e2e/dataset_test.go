//go:build e2e

package e2e

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDatasetCommands: dataset list shows a dataset with its samples and classes; dataset
// show its classes with their counts and its metadata columns with their fill; delete
// without --yes and no terminal is refused, deleting nothing; delete --yes removes it: a
// mount still running fails its reads with EIO (no hang) and logs why, list no longer
// shows it, a new mount refuses to start, and deleting it again is a clear error.
func TestDatasetCommands(t *testing.T) {
	name := newDataset(t, "dsdel")
	d, err := generate(t, t.TempDir(), name, hosts, "--count", "12", "--classes", "2", "--mean-size", "3000", "--patients", "3")
	if err != nil {
		t.Fatal(err)
	}
	if r := cassfs(t, "dataset", "list"); r.code != 0 || !regexp.MustCompile(`(?m)^`+name+`\s+12\s+.*\s2\s+-\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \S+$`).MatchString(r.stdout) {
		t.Errorf("dataset list: %s", r)
	}
	r := cassfs(t, "dataset", "show", name) // the positional form; the others use -d
	if r.code != 0 || !regexp.MustCompile(`12 samples, .*, created \d{4}-`).MatchString(r.stdout) || !regexp.MustCompile(`patient_id\s+12 of 12`).MatchString(r.stdout) {
		t.Errorf("dataset show: %s", r)
	}
	counts := map[string]int{}
	for rel := range d.sha {
		counts[class(rel)]++
	}
	for c, n := range counts {
		if !regexp.MustCompile(`(?m)^` + c + `\s+\d+\s+` + fmt.Sprint(n) + `$`).MatchString(r.stdout) {
			t.Errorf("dataset show lacks class %s with %d samples:\n%s", c, n, r.stdout)
		}
	}
	if r := cassfs(t, "dataset", "delete", "-d", name); r.code != 2 || !strings.Contains(r.stderr, "--yes") {
		t.Errorf("delete without --yes and no terminal: %s", r)
	}

	m := startMount(t, name, "--prefetch", "0", "--timeout", "2s")
	if r := cassfs(t, "dataset", "delete", name, "--yes"); r.code != 0 {
		t.Fatalf("dataset delete: %s", r)
	}
	epoch := filepath.Join(m.dir, "all", "epoch-0")
	names, _ := fileList(t, epoch)
	start := time.Now()
	_, err = os.ReadFile(filepath.Join(epoch, names[0]))
	if !errors.Is(err, syscall.EIO) || time.Since(start) > 30*time.Second {
		t.Errorf("a read from a mount of a deleted dataset: %v after %v, want EIO", err, time.Since(start))
	}
	if !m.stderr.waitFor("I/O error") {
		t.Errorf("the mount logged no cause; %s", m.log())
	}
	m.stop(t)

	if r := cassfs(t, "dataset", "list"); strings.Contains(r.stdout, name) {
		t.Errorf("dataset list after delete: %s", r)
	}
	if r := cassfs(t, "mount", "-d", name, t.TempDir()); r.code == 0 || !strings.Contains(r.stderr, "not found") {
		t.Errorf("a mount of a deleted dataset: %s", r)
	}
	if r := cassfs(t, "dataset", "delete", "-d", name, "--yes"); r.code == 0 || !strings.Contains(r.stderr, "not found") {
		t.Errorf("deleting a missing dataset: %s", r)
	}
}
