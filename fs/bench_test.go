package fs_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	cfs "github.com/cassfs/cassfs/fs"
	"github.com/cassfs/cassfs/index"
	"github.com/cassfs/cassfs/prefetch"
	"github.com/cassfs/cassfs/splits"
	"github.com/cassfs/cassfs/store"
	"github.com/cassfs/cassfs/view"
)

// bigIndex builds an index of n samples in the given number of classes, with names like
// ImageNet's ("n01440764_10026.JPEG", 20 bytes).
func bigIndex(b *testing.B, n, classes int) *index.Index {
	return bigIndexMeta(b, n, classes, nil)
}

// bigIndexMeta is bigIndex with metadata: sample i's columns meta(i).
func bigIndexMeta(b *testing.B, n, classes int, meta func(i int) map[string]string) *index.Index {
	b.Helper()
	var labels []string
	for c := range classes {
		labels = append(labels, fmt.Sprintf("n%08d", c))
	}
	ib := index.NewBuilder(labels)
	for i := range n {
		c := i % classes
		name := fmt.Sprintf("%s/%s_%05d.JPEG", labels[c], labels[c], i)
		s := store.Sample{ID: store.SampleID("big", name), Label: c, Name: name, Size: 110_000}
		if meta != nil {
			s.Meta = meta(i)
		}
		if err := ib.Add(s); err != nil {
			b.Fatal(err)
		}
	}
	ix, err := ib.Build()
	if err != nil {
		b.Fatal(err)
	}
	return ix
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkIndexMemory measures the daemon's memory per sample at ImageNet-1k scale (1.3M
// samples, 1000 classes): the index, plus one epoch's order.
func BenchmarkIndexMemory(b *testing.B) {
	const n = 1_281_167
	for range b.N {
		before := heapInUse()
		ix := bigIndex(b, n, 1000)
		afterIndex := heapInUse()
		e := splits.NewEpoch(ix, splits.All(ix), 0, 0, splits.View{})
		afterEpoch := heapInUse()
		b.ReportMetric(float64(afterIndex-before)/n, "index-B/sample")
		b.ReportMetric(float64(afterEpoch-afterIndex)/n, "epoch-B/sample")
		b.ReportMetric(float64(afterIndex-before)/(1<<20), "index-MiB")
		runtime.KeepAlive(ix)
		runtime.KeepAlive(e)
	}
}

// BenchmarkIndexMemoryMetadata is BenchmarkIndexMemory with the metadata of a
// histopathology dataset on every sample: patient (2,000), slide (6,000), tile coordinates
// x and y (200 values each) and magnification (one value); and then with a column unique
// to every sample as well (a tile id), the worst case of dictionary encoding. It also
// times the first stat of a split's samples.csv (one pass over the split).
func BenchmarkIndexMemoryMetadata(b *testing.B) {
	const n = 1_281_167
	histo := func(i int) map[string]string {
		slide := i % 6000
		return map[string]string{
			"patient_id":    fmt.Sprintf("TCGA-%02d-%04d", slide/3%2000%100, slide/3),
			"slide_id":      fmt.Sprintf("TCGA-%02d-%04d-01Z-00-DX%d", slide/3%2000%100, slide/3, slide%3+1),
			"x":             strconv.Itoa(i * 7919 % 200 * 512),
			"y":             strconv.Itoa(i * 104729 % 200 * 512),
			"magnification": "20",
		}
	}
	for _, tc := range []struct {
		name string
		meta func(i int) map[string]string
	}{
		{"5-columns", histo},
		{"5-columns+unique", func(i int) map[string]string {
			m := histo(i)
			m["tile_id"] = fmt.Sprintf("tile-%08d", i)
			return m
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for range b.N {
				before := heapInUse()
				ix := bigIndexMeta(b, n, 1000, tc.meta)
				after := heapInUse()
				b.ReportMetric(float64(after-before)/n, "index-B/sample")
				set := view.New(view.Config{Index: ix, Splits: []*splits.Split{splits.All(ix)}})
				tab, _ := set.Table("all")
				start := time.Now()
				size := tab.Size()
				b.ReportMetric(time.Since(start).Seconds(), "samples.csv-stat-s")
				b.ReportMetric(float64(size)/(1<<20), "samples.csv-MiB")
				runtime.KeepAlive(ix)
			}
		})
	}
}

// BenchmarkHugeDirectory mounts a split of one million samples in one class and lists the
// class directory with `ls -f` (another process, as a user would), cold then warm, and with
// Python's os.listdir; it reports seconds and the daemon's heap growth.
func BenchmarkHugeDirectory(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("mounting with DirectMount needs root")
	}
	const n = 1_000_000
	ix := bigIndex(b, n, 1)
	cache := prefetch.NewCache(fetchFunc(func(ctx context.Context, i uint32) ([]byte, error) { return make([]byte, 110_000), nil }), prefetch.CacheOptions{})
	defer cache.Close()
	for range b.N {
		dir := b.TempDir()
		server := mountSelf(b, dir, cfs.New(cfs.Config{Views: view.New(view.Config{Index: ix, Splits: []*splits.Split{splits.All(ix)}}), Blobs: cache}), cfs.MountOptions{FsName: "cassfs:bench"})
		b.Cleanup(func() { server.Unmount() })
		class := filepath.Join(dir, "all", "epoch-0", ix.Labels()[0])
		before := heapInUse()
		for _, pass := range []string{"cold", "warm"} {
			start := time.Now()
			out, err := exec.Command("sh", "-c", "ls -f "+class+" | wc -l").Output()
			took := time.Since(start)
			if err != nil {
				b.Fatal(err)
			}
			if got, err := strconv.Atoi(strings.TrimSpace(string(out))); err != nil || got != n {
				b.Fatalf("ls -f listed %d entries, want %d", got, n)
			}
			b.ReportMetric(took.Seconds(), "ls-f-"+pass+"-s")
		}
		start := time.Now()
		out, err := exec.Command("python3", "-c", "import os,sys; print(len(os.listdir(sys.argv[1])))", class).Output()
		if err != nil || strings.TrimSpace(string(out)) != strconv.Itoa(n) {
			b.Fatalf("os.listdir: %s %v", out, err)
		}
		b.ReportMetric(time.Since(start).Seconds(), "os.listdir-s")
		b.ReportMetric(float64(heapInUse()-min(before, heapInUse()))/(1<<20), "heap-growth-MiB")
	}
}

// fetchFunc is a function used as a prefetch.Fetcher.
type fetchFunc func(ctx context.Context, i uint32) ([]byte, error)

func (f fetchFunc) Fetch(ctx context.Context, i uint32) ([]byte, error) { return f(ctx, i) }
