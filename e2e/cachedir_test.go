//go:build e2e

package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestCacheDir: cassfs cache warm fills a cache directory (and, run again, fetches
// nothing); a mount with it reads epoch 0 without one database fetch, every byte right; a
// second mount of the dataset with the directory, and cache clear while it is mounted, are
// refused with clear errors; after a flipped byte in a cache file a remount fetches that
// file again (one fetch, counted as corrupt), never serving it, with pushing as without;
// cache show reports the
// files and the mounts' hits; cache clear removes them.
func TestCacheDir(t *testing.T) {
	d := sharedDataset(t)
	cacheDir := t.TempDir()
	args := []string{"--cache-dir", cacheDir, "--cache-dir-size", "1GiB", "--metrics-addr", "127.0.0.1:0", "--order", "strict"}
	readEpochOf := func(m *mounted, epoch string, want int) {
		t.Helper()
		root := filepath.Join(m.dir, "all", epoch)
		names, _ := fileList(t, root)
		if len(names) != want {
			t.Fatalf("%s lists %d files, want %d", epoch, len(names), want)
		}
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
	}
	readEpoch := func(m *mounted) { t.Helper(); readEpochOf(m, "epoch-0", len(d.sha)) }
	fetches := func(url string) float64 { v, _ := metricValue(scrape(t, url), "cassfs_fetch_seconds_count"); return v }
	warm := []string{"cache", "warm", "-d", d.name, "--cache-dir", cacheDir, "--cache-dir-size", "1GiB", "--progress", "none"}

	if r := cassfs(t, warm...); r.code != 0 || !strings.Contains(r.stdout, fmt.Sprintf("%d fetched now, 0 held before", len(d.sha))) {
		t.Fatalf("cache warm: %s", r)
	}
	if r := cassfs(t, warm...); r.code != 0 || !strings.Contains(r.stdout, fmt.Sprintf("0 fetched now, %d held before", len(d.sha))) {
		t.Errorf("cache warm again: %s", r)
	}

	// Without pushing, opens of cache files are passed through; the remount below pushes
	// (the default).
	m := startMount(t, d.name, append(args, "--push=false")...)
	url := metricsURL(t, m)
	readEpoch(m)
	if n := fetches(url); n != 0 {
		t.Errorf("after cache warm, reading epoch 0 made %v database fetches, want 0", n)
	}
	// Served by the kernel: every open passed through to its cache file, no READ reaches
	// cassfs (FUSE passthrough: Linux 6.9 and later, as root).
	body := scrape(t, url)
	passed, _ := metricValue(body, "cassfs_opens_passed_through_total")
	reads, _ := metricValue(body, "cassfs_reads_total")
	if passthroughKernel(t) && (passed < float64(len(d.sha)) || reads != 0) {
		t.Errorf("epoch 0 from a warm cache directory: %v opens passed through, %v READs served by cassfs; want %d and 0", passed, reads, len(d.sha))
	}
	if r := cassfs(t, "mount", "-d", d.name, "--cache-dir", cacheDir, "--cache-dir-size", "1GiB", t.TempDir()); r.code == 0 || !strings.Contains(r.stderr, "in use by another mount") {
		t.Errorf("a second mount with the same --cache-dir: %s", r)
	}
	if r := cassfs(t, "cache", "clear", "--cache-dir", cacheDir, "-d", d.name); r.code == 0 || !strings.Contains(r.stderr, "in use by a mount") {
		t.Errorf("cache clear while mounted: %s", r)
	}
	m.stop(t)

	// Flip a byte of one cache file.
	var files []string
	filepath.WalkDir(filepath.Join(cacheDir, d.name), func(p string, e os.DirEntry, err error) error {
		if err == nil && !e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			files = append(files, p)
		}
		return err
	})
	if len(files) != len(d.sha) {
		t.Fatalf("the cache directory holds %d files, want %d", len(files), len(d.sha))
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
	body = scrape(t, url)
	corrupt, _ := metricValue(body, `cassfs_fetch_errors_total\{kind="corrupt"\}`)
	hits, _ := metricValue(body, "cassfs_disk_cache_hits_total")
	if n := fetches(url); n != 1 || corrupt != 1 || hits < float64(len(d.sha)-1) {
		t.Errorf("remount: %v database fetches, %v corrupt, %v disk hits; want 1 (the flipped file), 1, %d", n, corrupt, hits, len(d.sha)-1)
	}
	if r := cassfs(t, "stats", "--interval", "100ms", m.dir); r.code != 0 || !strings.Contains(r.stdout, "disk ") {
		t.Errorf("cassfs stats shows no disk tier: %s", r)
	}
	m.stop(t)

	r := cassfs(t, "cache", "show", "--cache-dir", cacheDir)
	if row := regexp.MustCompile(`(?m)^` + d.name + `\s+300\s+.*\s+(\d+)\s+(\d+)\s+\S+%\s+no$`).FindStringSubmatch(r.stdout); r.code != 0 || row == nil || row[1] == "0" {
		t.Errorf("cache show after two mounts: %s", r)
	}
	if r := cassfs(t, "cache", "clear", "--cache-dir", cacheDir, "-d", d.name); r.code != 0 {
		t.Errorf("cache clear: %s", r)
	}
	if r := cassfs(t, "cache", "show", "--cache-dir", cacheDir); !strings.Contains(r.stdout, "holds no dataset") {
		t.Errorf("cache show after clear: %s", r)
	}

	// A directory bounded to half the dataset, filled by cache warm: a mount of one of two
	// shards replaces files its epochs read late or never by those they read soon, within
	// the bound, every byte right.
	var total int64
	filepath.WalkDir(d.root, func(p string, e os.DirEntry, err error) error {
		if fi, ierr := e.Info(); err == nil && ierr == nil && !e.IsDir() {
			total += fi.Size()
		}
		return err
	})
	half := strconv.FormatInt(total/2, 10)
	if r := cassfs(t, "cache", "warm", "-d", d.name, "--cache-dir", cacheDir, "--cache-dir-size", half, "--progress", "none"); r.code != 0 {
		t.Fatalf("cache warm of half: %s", r)
	}
	m = startMount(t, d.name, "--cache-dir", cacheDir, "--cache-dir-size", half, "--metrics-addr", "127.0.0.1:0", "--order", "strict", "--shard", "0/2")
	url = metricsURL(t, m)
	for _, epoch := range []string{"epoch-0", "epoch-1"} {
		readEpochOf(m, epoch, len(d.sha)/2)
	}
	body = scrape(t, url)
	evicted, _ := metricValue(body, "cassfs_disk_cache_evictions_total")
	held, _ := metricValue(body, "cassfs_disk_cache_bytes")
	if evicted == 0 || held > float64(total/2) {
		t.Errorf("shard 0/2 over a directory of half the dataset: %v evicted, %v bytes held (bound %d); want evictions within the bound", evicted, held, total/2)
	}
	if r := cassfs(t, "stats", "--interval", "100ms", m.dir); r.code != 0 || !regexp.MustCompile(`[1-9][0-9]* evicted`).MatchString(r.stdout) {
		t.Errorf("cassfs stats shows no evictions: %s", r)
	}
	m.stop(t)
}

// passthroughKernel reports whether this kernel has FUSE passthrough (Linux 6.9+).
func passthroughKernel(t *testing.T) bool {
	var u syscall.Utsname
	if err := syscall.Uname(&u); err != nil {
		t.Fatal(err)
	}
	var b []byte
	for _, c := range u.Release {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	var major, minor int
	fmt.Sscanf(string(b), "%d.%d", &major, &minor)
	return major > 6 || major == 6 && minor >= 9
}
