//go:build e2e

package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCacheDir: a mount with --cache-dir keeps what it fetches on disk; a remount with the
// same directory reads epoch 0 again without one database fetch, every byte right; a
// flipped byte in a cache file is fetched again (one fetch, counted as corrupt), never
// served; a second mount of the dataset with the directory is refused with a clear error.
func TestCacheDir(t *testing.T) {
	d := sharedDataset(t)
	cacheDir := t.TempDir()
	args := []string{"--cache-dir", cacheDir, "--cache-dir-size", "1GiB", "--metrics-addr", "127.0.0.1:0", "--order", "strict"}
	readEpoch := func(m *mounted) {
		t.Helper()
		root := filepath.Join(m.dir, "all", "epoch-0")
		names, _ := fileList(t, root)
		seen := map[string]bool{}
		parallel(t, 8, len(names), func(k int) error {
			data, err := os.ReadFile(filepath.Join(root, names[k]))
			if err != nil {
				return err
			}
			sum := sha256.Sum256(data)
			if rel := d.byHash[hex.EncodeToString(sum[:])]; rel != origName(names[k]) {
				return fmt.Errorf("%s: content of %q", names[k], rel)
			}
			return nil
		})
		for _, n := range names {
			seen[n] = true
		}
		if len(seen) != len(d.sha) {
			t.Fatalf("epoch 0 lists %d files, want %d", len(seen), len(d.sha))
		}
	}
	fetches := func(url string) float64 { v, _ := metricValue(scrape(t, url), "cassfs_fetch_seconds_count"); return v }

	m := startMount(t, d.name, args...)
	readEpoch(m)
	if r := cassfs(t, "mount", "-d", d.name, "--cache-dir", cacheDir, "--cache-dir-size", "1GiB", t.TempDir()); r.code == 0 || !strings.Contains(r.stderr, "in use by another mount") {
		t.Errorf("a second mount with the same --cache-dir: %s", r)
	}
	// Prefetches still in flight land before the mount goes.
	url := metricsURL(t, m)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if n, ok := metricValue(scrape(t, url), "cassfs_requests_in_flight"); ok && n == 0 {
			break
		}
	}
	m.stop(t)

	// Flip a byte of one cache file.
	var files []string
	filepath.WalkDir(filepath.Join(cacheDir, d.name), func(p string, e os.DirEntry, err error) error {
		if err == nil && !e.IsDir() && e.Name() != ".lock" {
			files = append(files, p)
		}
		return err
	})
	if len(files) != len(d.sha) {
		t.Fatalf("the cache directory holds %d files after an epoch, want %d", len(files), len(d.sha))
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x40
	if err := os.WriteFile(files[0], b, 0o600); err != nil {
		t.Fatal(err)
	}

	m = startMount(t, d.name, args...)
	url = metricsURL(t, m)
	readEpoch(m)
	body := scrape(t, url)
	corrupt, _ := metricValue(body, `cassfs_fetch_errors_total\{kind="corrupt"\}`)
	hits, _ := metricValue(body, "cassfs_disk_cache_hits_total")
	if n := fetches(url); n != 1 || corrupt != 1 || hits < float64(len(d.sha)-1) {
		t.Errorf("remount: %v database fetches, %v corrupt, %v disk hits; want 1 (the flipped file), 1, %d", n, corrupt, hits, len(d.sha)-1)
	}
	if r := cassfs(t, "stats", "--interval", "100ms", m.dir); r.code != 0 || !strings.Contains(r.stdout, "disk ") {
		t.Errorf("cassfs stats shows no disk tier: %s", r)
	}
}
