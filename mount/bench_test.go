package mount_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/cassfs/cassfs/internal/testkit"
	"github.com/cassfs/cassfs/mount"
	"github.com/cassfs/cassfs/splits"
	"github.com/cassfs/cassfs/store/memstore"
)

// BenchmarkCachedEpochSources compares where a cached epoch can be served from, with no
// database in the way (an in-memory store) so that only the serving path is measured:
// 4,000 samples of 80–140 KB, read by another process (16 goroutines, file_list.txt
// order) after the page cache is dropped (drop_caches=1), three epochs each, from
//
//   - local: the same files on local disk, no FUSE, each epoch in a new random order (the
//     baseline);
//   - memory: the mount's memory cache holds every blob, READs are answered from it;
//   - disk: the disk tier (--cache-dir) on the disk, opens passed through to its files;
//   - tmpfs: the disk tier on a tmpfs (/dev/shm), opens passed through: the memory tier
//     as files, served by the kernel.
//
// Each is a mount as `cassfs mount` opens it (Open, Serve) with --push=false, so that the
// cached blobs are served from where they are kept rather than pushed into the page cache.
// fs's BenchmarkCachedEpochSourcesWithoutPassthrough measures the disk tier served in
// ways no option chooses.
//
// Reported per source: files/s, the ratio to local disk in the same run, and the daemon's
// CPU per file (getrusage of this process, which serves the mount; the reader is a child
// process); each epoch's files/s, the reader's CPU per file and how busy the machine was
// go to standard error. CASSFS_BENCH_SOURCES (comma-separated; "local" first for the
// ratios) and CASSFS_BENCH_READERS (default 16) narrow a run down.
func BenchmarkCachedEpochSources(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("mounting and dropping the page cache need root")
	}
	ctx := context.Background()
	const n = 4000
	st := memstore.New("test", memstore.Options{})
	blobs := testkit.PutEpochSamples(b, st, n)
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	for range b.N {
		var localRate float64
		for _, source := range testkit.BenchSources("local", "memory", "disk", "tmpfs") {
			if source == "local" {
				localRate = testkit.LocalEpochs(b, blobs, 3, func(e uint64) []uint32 { return splits.Permutation(n, "local", 1, e) })
				b.ReportMetric(localRate, source+"-files/s")
				continue
			}
			o := mount.Defaults()
			o.Push = false
			switch source {
			case "memory":
			case "disk":
				o.CacheDir, o.CacheDirBytes = b.TempDir(), 1<<40
			case "tmpfs":
				o.CacheDir, o.CacheDirBytes = filepath.Join("/dev/shm", fmt.Sprintf("cassfs-bench-%d", os.Getpid())), 1<<40
				b.Cleanup(func() { os.RemoveAll(o.CacheDir) })
			default:
				b.Fatalf("unknown source %q", source)
			}
			m, err := mount.Open(ctx, st, o, log)
			testkit.Check(b, err)
			dir := b.TempDir()
			srv, err := m.Serve(ctx, dir)
			testkit.Check(b, err)
			done := false
			b.Cleanup(func() { // if the benchmark fails before the end of the source
				if !done {
					srv.Unmount()
					m.Close()
				}
			})
			rate, cpu := testkit.MountEpochs(b, dir, "all", n, 3)
			b.ReportMetric(rate, source+"-files/s")
			b.ReportMetric(rate/localRate, source+"/local")
			b.ReportMetric(cpu, source+"-daemon-cpu-us/file")
			testkit.Check(b, srv.Unmount())
			m.Close()
			done = true
		}
	}
}
