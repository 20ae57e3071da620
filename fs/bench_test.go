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
	"github.com/cassfs/cassfs/prefetch"
	"github.com/cassfs/cassfs/splits"
	"github.com/cassfs/cassfs/store"
	"github.com/cassfs/cassfs/view"
)

// bigIndex builds an index of n samples in the given number of classes, with names like
// ImageNet's ("n01440764_10026.JPEG", 20 bytes).
func bigIndex(b *testing.B, n, classes int) *splits.Index {
	b.Helper()
	var labels []string
	for c := range classes {
		labels = append(labels, fmt.Sprintf("n%08d", c))
	}
	ib := splits.NewIndexBuilder(labels)
	for i := range n {
		c := i % classes
		name := fmt.Sprintf("%s/%s_%05d.JPEG", labels[c], labels[c], i)
		if err := ib.Add(store.Sample{ID: store.SampleID("big", name), Label: c, Name: name, Size: 110_000}); err != nil {
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

// BenchmarkHugeDirectory mounts a split of one million samples in one class and lists the
// class directory with `ls -f` (another process, as a user would), cold then warm, and with
// Python's os.listdir; it reports seconds and the daemon's heap growth.
func BenchmarkHugeDirectory(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("mounting with DirectMount needs root")
	}
	const n = 1_000_000
	ix := bigIndex(b, n, 1)
	cache := prefetch.NewCache(func(ctx context.Context, i uint32) ([]byte, error) { return make([]byte, 110_000), nil }, prefetch.CacheOptions{})
	defer cache.Close()
	for range b.N {
		dir := b.TempDir()
		server, err := cfs.Mount(dir, cfs.New(cfs.Config{Views: view.New(view.Config{Index: ix, Splits: []*splits.Split{splits.All(ix)}}), Blobs: cache.Get}), cfs.MountOptions{FsName: "cassfs:bench"})
		if err != nil {
			b.Fatal(err)
		}
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
			if got, _ := strconv.Atoi(strings.TrimSpace(string(out))); got != n {
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
