package testkit

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

	"github.com/cassfs/cassfs/store"
)

// The benchmarks of where a cached epoch is served from (mount's
// BenchmarkCachedEpochSources and the variants fs keeps) read epochs as a training job
// does: in another process (this test binary run again as a reader: CASSFS_READER_CHILD
// names the epoch directory), its goroutines walking file_list.txt, after the page cache
// is dropped. CASSFS_BENCH_SOURCES (comma-separated; "local" first for the ratios) and
// CASSFS_BENCH_READERS (default 16) narrow a run down.

const readerChildEnv = "CASSFS_READER_CHILD"

func init() {
	if root := os.Getenv(readerChildEnv); root != "" {
		readerChild(root)
	}
}

// EpochSample is sample i of the datasets these benchmarks read: four classes a–d,
// 80–140 KB.
func EpochSample(dataset string, i int) (store.Sample, []byte) {
	name := fmt.Sprintf("%s/tile_%07d.jpg", []string{"a", "b", "c", "d"}[i%4], i)
	data := make([]byte, 80_000+i*7919%60_000)
	for k := range data {
		data[k] = byte(i + k*7)
	}
	return store.Sample{ID: store.SampleID(dataset, name), Label: i % 4, Name: name, Size: int64(len(data)),
		Checksum: store.Checksum(data), CRC32C: store.CRC32C(data), HasCRC32C: true}, data
}

// PutEpochSamples fills st, the dataset "test" of these benchmarks (an empty one, such as
// memstore.New("test", ...)), with samples 0 to n-1 (EpochSample), and returns their blobs
// in that order.
func PutEpochSamples(tb testing.TB, st store.Store, n int) [][]byte {
	tb.Helper()
	ctx := context.Background()
	Check(tb, st.SetLabels(ctx, []string{"a", "b", "c", "d"}))
	blobs := make([][]byte, n)
	for i := range n {
		s, data := EpochSample("test", i)
		Check(tb, st.Put(ctx, s, data, nil))
		blobs[i] = data
	}
	return blobs
}

// BenchSources returns the sources a benchmark measures: all, or those
// CASSFS_BENCH_SOURCES names.
func BenchSources(all ...string) []string {
	if s := os.Getenv("CASSFS_BENCH_SOURCES"); s != "" {
		return strings.Split(s, ",")
	}
	return all
}

// LocalEpochs is the baseline: blobs as files on local disk, no FUSE, read epochs times,
// each in a new random order (order(e), as a training job reads local disk and as the
// mount's epochs are; not in the order the files were written, which the disk would read
// nearly sequentially), the page cache dropped before each. It returns files/s.
func LocalEpochs(b *testing.B, blobs [][]byte, epochs int, order func(e uint64) []uint32) float64 {
	b.Helper()
	root := b.TempDir()
	for i, blob := range blobs {
		name := filepath.Join(root, fmt.Sprintf("c%d/f%06d.jpg", i%4, i))
		Check(b, os.MkdirAll(filepath.Dir(name), 0o755))
		Check(b, os.WriteFile(name, blob, 0o644))
	}
	var took time.Duration
	for e := range uint64(epochs) {
		var list strings.Builder
		for _, i := range order(e) {
			fmt.Fprintf(&list, "c%d/f%06d.jpg %d\n", i%4, i, i%4)
		}
		Check(b, os.WriteFile(filepath.Join(root, "file_list.txt"), []byte(list.String()), 0o644))
		dropPageCache(b)
		took += readEpoch(b, root, len(blobs))
	}
	return float64(epochs*len(blobs)) / took.Seconds()
}

// MountEpochs reads the epochs of split 0 to epochs at mnt, n files each: epoch 0 to fill
// the caches, then each later one after dropping the page cache. It returns the later
// epochs' files/s and the CPU this process (the daemon: the readers are another) spent
// per file, in µs.
func MountEpochs(b *testing.B, mnt, split string, n, epochs int) (filesPerSec, cpuPerFile float64) {
	b.Helper()
	readEpoch(b, filepath.Join(mnt, split, "epoch-0"), n)
	var cpu float64
	var took time.Duration
	for e := 1; e <= epochs; e++ {
		dropPageCache(b)
		c0 := selfCPU()
		took += readEpoch(b, filepath.Join(mnt, split, fmt.Sprintf("epoch-%d", e)), n)
		cpu += float64((selfCPU() - c0).Microseconds())
	}
	files := float64(epochs * n)
	return files / took.Seconds(), cpu / files
}

func dropPageCache(b *testing.B) {
	b.Helper()
	Check(b, exec.Command("sync").Run())
	Check(b, os.WriteFile("/proc/sys/vm/drop_caches", []byte("1"), 0))
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err) // a benchmark helper: Linux always has it
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
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

// readEpoch reads the n files of the epoch view at root in another process and returns
// how long it took; the epoch's files/s, the reader's CPU per file and how busy the machine
// was go to standard error.
func readEpoch(b *testing.B, root string, n int) time.Duration {
	b.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), readerChildEnv+"="+root)
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
	fmt.Fprintf(os.Stderr, "%s: %.0f files/s, reader %.0f µs/file, machine busy %.0f%%\n", label, float64(n)/took.Seconds(), float64(rc.Microseconds())/float64(n), 100*float64(busy1-busy0)/float64(all1-all0))
	if err != nil || strings.TrimSpace(string(out)) != strconv.Itoa(n) {
		b.Fatalf("reader: %v\n%s", err, out)
	}
	return took
}

// readerChild reads every file of the epoch view at root with CASSFS_BENCH_READERS
// goroutines (default 16), prints how many it read and exits.
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
	readers, err := strconv.Atoi(os.Getenv("CASSFS_BENCH_READERS"))
	if err != nil {
		readers = 16
	}
	var next, done atomic.Int64
	var wg sync.WaitGroup
	for range readers {
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
