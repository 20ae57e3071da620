package fs_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cassfs/cassfs/disktier"
	cfs "github.com/cassfs/cassfs/fs"
	"github.com/cassfs/cassfs/index"
	"github.com/cassfs/cassfs/internal/testkit"
	"github.com/cassfs/cassfs/prefetch"
	"github.com/cassfs/cassfs/splits"
	"github.com/cassfs/cassfs/store"
	"github.com/cassfs/cassfs/store/memstore"
	"github.com/cassfs/cassfs/view"
)

// BenchmarkCachedEpochSources compares where a cached epoch can be served from, with no
// database in the way (an in-memory store) so that only the serving path is measured:
// 4,000 samples of 80–140 KB, read by another process (16 goroutines, file_list.txt
// order) after the page cache is dropped (drop_caches=1), three epochs each, from
//
//   - local: the same files on local disk, no FUSE, each epoch in a new random order (the
//     baseline);
//   - memory: the daemon's cache holds every blob, READs are answered from it;
//   - disk: the disk tier on the disk, opens passed through to its files;
//   - disk-splice: the same without passthrough (MountOptions.NoPassthrough: what a mount
//     does where the kernel refuses it): OPEN unanswered, READs spliced from the files;
//   - disk-read: the disk tier on the disk without passthrough: a 64 MiB memory cache
//     that the prefetcher fills from the tier's files ahead of the readers, READs
//     answered from it;
//   - tmpfs: the disk tier on a tmpfs (/dev/shm), opens passed through: the memory tier
//     as files, served by the kernel.
//
// Reported per source: files/s and the daemon's CPU per file (getrusage of this process,
// which serves the mount; the reader is a child process); each epoch's files/s, the
// reader's CPU per file and how busy the machine was go to standard error.
// CASSFS_BENCH_SOURCES (comma-separated; "local" first for the ratios) and
// CASSFS_BENCH_READERS (default 16) narrow a run down.
func BenchmarkCachedEpochSources(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("mounting and dropping the page cache need root")
	}
	ctx := context.Background()
	st := memstore.New("test", memstore.Options{})
	testkit.Check(b, st.SetLabels(ctx, []string{"a", "b", "c", "d"}))
	const n = 4000
	for i := range n {
		name := fmt.Sprintf("%s/tile_%07d.jpg", []string{"a", "b", "c", "d"}[i%4], i)
		data := make([]byte, 80_000+i*7919%60_000)
		for k := range data {
			data[k] = byte(i + k*7)
		}
		testkit.Check(b, st.Put(ctx, store.Sample{ID: store.SampleID("test", name), Label: i % 4, Name: name, Size: int64(len(data)),
			Checksum: store.Checksum(data), CRC32C: store.CRC32C(data), HasCRC32C: true}, data, nil))
	}
	ix, err := index.Load(ctx, st)
	testkit.Check(b, err)
	for range b.N {
		var localRate float64
		for _, source := range benchSources() {
			if source == "local" {
				root := b.TempDir()
				for i := range ix.Len() {
					blob, err := st.Get(ctx, ix.ID(uint32(i)), nil)
					testkit.Check(b, err)
					name := fmt.Sprintf("c%d/f%06d.jpg", i%4, i)
					os.MkdirAll(filepath.Join(root, filepath.Dir(name)), 0o755)
					testkit.Check(b, os.WriteFile(filepath.Join(root, name), blob.Data, 0o644))
				}
				var took time.Duration
				for e := range uint64(3) {
					// Each epoch in a new random order, as a training job reads local disk
					// (and as the mount's epochs are): not in the order the files were
					// written, which the disk would read nearly sequentially.
					var list strings.Builder
					for _, i := range splits.Permutation(n, "local", 1, e) {
						fmt.Fprintf(&list, "c%d/f%06d.jpg %d\n", i%4, i, i%4)
					}
					testkit.Check(b, os.WriteFile(filepath.Join(root, "file_list.txt"), []byte(list.String()), 0o644))
					exec.Command("sync").Run()
					testkit.Check(b, os.WriteFile("/proc/sys/vm/drop_caches", []byte("1"), 0))
					took += readEpoch(b, root)
				}
				localRate = 3 * n / took.Seconds()
				b.ReportMetric(localRate, source+"-files/s")
				continue
			}
			cache := prefetch.NewCache(prefetch.StoreFetch(st, ix), prefetch.CacheOptions{MaxBytes: 1 << 30, Samples: ix.Len()})
			var backing cfs.Backing
			arrived := cache.Has
			if source == "disk-read" {
				d, err := disktier.Open(b.TempDir(), "test", ix, 1<<40, nil)
				testkit.Check(b, err)
				b.Cleanup(func() { d.Close() })
				cache = prefetch.NewCache(d.Over(prefetch.StoreFetch(st, ix)), prefetch.CacheOptions{MaxBytes: 64 << 20, Samples: ix.Len()})
				arrived = cache.Has
			} else if source != "memory" {
				dir := b.TempDir()
				if source == "tmpfs" {
					dir = filepath.Join("/dev/shm", fmt.Sprintf("cassfs-bench-%d", os.Getpid()))
					b.Cleanup(func() { os.RemoveAll(dir) })
				}
				d, err := disktier.Open(dir, "test", ix, 1<<40, nil)
				testkit.Check(b, err)
				b.Cleanup(func() { d.Close() })
				cache = prefetch.NewCache(d.Over(prefetch.StoreFetch(st, ix)), prefetch.CacheOptions{MaxBytes: 1 << 30, Samples: ix.Len(), Local: d.Holds})
				backing = backingFunc(func(i uint32) (*os.File, bool) {
					f, ok := d.Backing(i)
					if ok {
						cache.Drop(i)
					}
					return f, ok
				})
				arrived = func(i uint32) bool { return cache.Has(i) || d.Holds(i) }
			}
			p := prefetch.NewPrefetcher(cache, prefetch.Options{Size: ix.BlobSize})
			vs := view.New(view.Config{Index: ix, Splits: []*splits.Split{splits.All(ix)}, Mode: view.Arrival, Arrived: arrived, Progress: p})
			mnt := b.TempDir()
			server := mountSelf(b, mnt, cfs.New(cfs.Config{Views: vs, Blobs: cache, Backing: backing}), cfs.MountOptions{FsName: "cassfs:bench", NoPassthrough: source == "disk-splice"})
			readEpoch(b, filepath.Join(mnt, "all", "epoch-0")) // fills the cache or the tier
			var files, cpu float64
			var took time.Duration
			for e := 1; e <= 3; e++ {
				exec.Command("sync").Run()
				testkit.Check(b, os.WriteFile("/proc/sys/vm/drop_caches", []byte("1"), 0))
				c0 := selfCPU()
				took += readEpoch(b, filepath.Join(mnt, "all", fmt.Sprintf("epoch-%d", e)))
				cpu += float64((selfCPU() - c0).Microseconds())
				files += n
			}
			b.ReportMetric(files/took.Seconds(), source+"-files/s")
			b.ReportMetric(files/took.Seconds()/localRate, source+"/local")
			b.ReportMetric(cpu/files, source+"-daemon-cpu-us/file")
			testkit.Check(b, server.Unmount())
			p.Close()
			cache.Close()
		}
	}
}

func cpuTicks() (busy, all int64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		panic(err) // a benchmark helper: Linux always has it
	}
	f := strings.Fields(strings.SplitN(string(b), "\n", 2)[0])[1:]
	for k, v := range f {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			panic(fmt.Sprintf("/proc/stat: %v", err))
		}
		all += n
		if k != 3 && k != 4 {
			busy += n
		}
	}
	return busy, all
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// readEpoch reads an epoch view in another process (this test binary as a reader: 16
// goroutines over file_list.txt) and returns how long it took.
func readEpoch(b *testing.B, root string) time.Duration {
	b.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "CASSFS_READER_CHILD="+root)
	start := time.Now()
	busy0, all0 := cpuTicks()
	out, err := cmd.CombinedOutput()
	took := time.Since(start)
	busy1, all1 := cpuTicks()
	rc := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	label := filepath.Base(root) // an epoch of the mount, or the local copy
	if !strings.HasPrefix(label, "epoch-") {
		label = "local disk"
	}
	fmt.Fprintf(os.Stderr, "%s: %.0f files/s, reader %.0f µs/file, machine busy %.0f%%\n", label, 4000/took.Seconds(), float64(rc.Microseconds())/4000, 100*float64(busy1-busy0)/float64(all1-all0))
	if err != nil || strings.TrimSpace(string(out)) != "4000" {
		b.Fatalf("reader: %v\n%s", err, out)
	}
	return took
}

// readerChild reads every file of the epoch view at root with 16 goroutines and prints
// how many it read.
func readerChild(root string) {
	f, err := os.Open(filepath.Join(root, "file_list.txt"))
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	var paths []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		paths = append(paths, filepath.Join(root, line[:strings.LastIndexByte(line, ' ')]))
	}
	var next, done atomic.Int64
	var wg sync.WaitGroup
	for range benchReaders() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 1<<20)
			for k := int(next.Add(1)) - 1; k < len(paths); k = int(next.Add(1)) - 1 {
				g, err := os.Open(paths[k])
				if err != nil {
					fmt.Println(err)
					os.Exit(1)
				}
				for {
					_, err := g.Read(buf)
					if err == io.EOF {
						break
					}
					if err != nil {
						fmt.Println(err)
						os.Exit(1)
					}
				}
				g.Close()
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	fmt.Println(strconv.FormatInt(done.Load(), 10))
	os.Exit(0)
}

func init() {
	if root := os.Getenv("CASSFS_READER_CHILD"); root != "" {
		readerChild(root)
	}
}

func benchSources() []string {
	if s := os.Getenv("CASSFS_BENCH_SOURCES"); s != "" {
		return strings.Split(s, ",")
	}
	return []string{"local", "memory", "disk", "disk-splice", "disk-read", "tmpfs"}
}

func benchReaders() int {
	if n, err := strconv.Atoi(os.Getenv("CASSFS_BENCH_READERS")); err == nil {
		return n
	}
	return 16
}
