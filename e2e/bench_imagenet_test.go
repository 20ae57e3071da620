//go:build e2e

package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cassfs/cassfs/internal/testkit"
)

// BenchmarkImageNetScale: a dataset of ImageNet-1k's size (1,281,167 generated samples of
// ~2 KB in 1,000 classes, with the generator's metadata CSV) on the single local node:
// gen and ingest, dataset list right after the ingest (its count must be the true one),
// then a mount right after the ingest, another a minute later (both from the index
// snapshot the ingest stored) and one that scans the metadata rows, each timed until ready
// and then measured: reading file_list.txt of an epoch, find over the epoch, torchvision's
// ImageFolder initialisation through the mount against the same tree on local disk, and
// the daemon's peak resident memory against the bound cassfs mount --help states.
//
// About 15 minutes of generation and ingest on two cores: make bench only.
// CASSFS_IMAGENET_COUNT sets another size (for trying the benchmark out).
func BenchmarkImageNetScale(b *testing.B) {
	count := 1_281_167
	if s := os.Getenv("CASSFS_IMAGENET_COUNT"); s != "" {
		count = testkit.Must(strconv.Atoi(s))(b)
	}
	const classes = 1000
	dir := b.TempDir()
	ds := newDataset(b, "imagenet")
	step := func(what string, args ...string) time.Duration {
		start := time.Now()
		r := cassfs(b, args...)
		if r.code != 0 {
			b.Fatalf("%s: %s", what, r)
		}
		took := time.Since(start)
		b.Logf("%s: %v; %s", what, took.Round(time.Millisecond), strings.TrimSpace(r.stdout))
		return took
	}
	for range b.N {
		step("gen", "gen", "--out", dir, "--count", fmt.Sprint(count), "--classes", fmt.Sprint(classes), "--mean-size", "2000", "--progress", "none")
		ingest := step("ingest", "ingest", "-d", ds, "--progress", "none", "--csv", filepath.Join(dir, "metadata.csv"), filepath.Join(dir, "images"))
		b.ReportMetric(float64(count)/ingest.Seconds(), "ingest-files/s")

		start := time.Now()
		r := cassfs(b, "dataset", "list")
		if r.code != 0 || !regexp.MustCompile(fmt.Sprintf(`(?m)^%s\s+%s\s`, ds, commas(count))).MatchString(r.stdout) {
			b.Errorf("dataset list right after the ingest: %s", r)
		}
		b.Logf("dataset list right after the ingest: %v", time.Since(start).Round(time.Millisecond))
		b.ReportMetric(time.Since(start).Seconds(), "list-s")

		local := measureImageFolder(b, filepath.Join(dir, "images"), count)
		b.Logf("ImageFolder on local disk: %.2fs", local)
		b.ReportMetric(local, "imagefolder-local-s")
		// From the index snapshot the ingest stored, right after it and a minute later;
		// then by the scan of every metadata row, as without a snapshot.
		for k, when := range []string{"after-ingest", "later", "scanned"} {
			if k == 1 {
				time.Sleep(time.Minute)
			}
			mountAndMeasure(b, ds, when, count, classes, local, when == "scanned")
		}
	}
}

// mountAndMeasure mounts ds and reports its start, listings, ImageFolder and memory.
func mountAndMeasure(b *testing.B, ds, when string, count, classes int, local float64, scan bool) {
	const cache = 256 << 20
	start := time.Now()
	m := startMount(b, ds, "--cache-size", "256MiB", "--seed", "7", fmt.Sprint("--scan-index=", scan))
	ready := time.Since(start)
	if from := regexp.MustCompile(`msg="index loaded".* from="?(\w+)`).FindStringSubmatch(m.log()); from == nil || (from[1] == "snapshot") == scan {
		b.Errorf("%s: the index came from %q; %s", when, from, m.log())
	}
	b.ReportMetric(ready.Seconds(), when+"-ready-s")
	epoch := filepath.Join(m.dir, "all", "epoch-0")

	start = time.Now()
	data, err := os.ReadFile(filepath.Join(epoch, "file_list.txt"))
	if err != nil {
		b.Fatal(err)
	}
	list := time.Since(start)
	if n := bytes.Count(data, []byte("\n")); n != count {
		b.Errorf("file_list.txt has %d lines, want %d", n, count)
	}
	b.ReportMetric(list.Seconds(), when+"-file-list-s")

	start = time.Now()
	out, err := exec.Command("find", epoch, "-type", "f").Output()
	if err != nil {
		b.Fatal(err)
	}
	find := time.Since(start)
	if n := bytes.Count(out, []byte("\n")) - 1; n != count { // and file_list.txt
		b.Errorf("find listed %d images, want %d", n, count)
	}
	b.ReportMetric(find.Seconds(), when+"-find-s")

	mounted := measureImageFolder(b, epoch, count)
	b.ReportMetric(mounted, when+"-imagefolder-mount-s")

	rss := peakRSSMiB(b, m)
	cols := 4 // the generator's metadata columns: ~4 bytes each per sample, distinct values once
	bound := (rssBound(b, cache, count) + float64(count*4*cols)) / (1 << 20)
	b.ReportMetric(rss, when+"-rss-peak-MiB")
	b.Logf("%s: ready %v, file_list.txt %v, find %v, ImageFolder %.2fs (local %.2fs, %.2fx), RSS peak %.0f MiB of a %.0f MiB bound (+ distinct metadata values)",
		when, ready.Round(time.Millisecond), list.Round(time.Millisecond), find.Round(time.Millisecond), mounted, local, mounted/local, rss, bound)
	m.stop(b)
}

// measureImageFolder times ImageFolder's initialisation on root and checks its counts.
func measureImageFolder(b *testing.B, root string, count int) float64 {
	var out struct {
		Samples int     `json:"samples"`
		Classes int     `json:"classes"`
		Seconds float64 `json:"seconds"`
	}
	runPython(b, &out, "imagefolder_init.py", root)
	if out.Samples != count {
		b.Errorf("ImageFolder on %s found %d samples, want %d", root, out.Samples, count)
	}
	return out.Seconds
}

// commas writes n as dataset list does: 1,281,167.
func commas(n int) string {
	s := strconv.Itoa(n)
	for k := len(s) - 3; k > 0; k -= 3 {
		s = s[:k] + "," + s[k:]
	}
	return s
}
