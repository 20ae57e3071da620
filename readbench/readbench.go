// Package readbench measures reads of the same samples by several readers at once, the
// way `cassfs bench` compares the database, a mount and a local copy: files/s, bytes,
// latency percentiles and the reading process's CPU per file, printed side by side with
// ratios to the first path measured. It knows no database and no filesystem: a path is a
// function that reads its k-th file, or a blob reader (store.BlobReader) of the database.
package readbench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/cassfs/cassfs/store"
	"github.com/google/uuid"
)

// Result is one path's measurement.
type Result struct {
	Path    string
	Files   int // read without error
	Bytes   int64
	Elapsed time.Duration
	Lat     []time.Duration // of every read, failed ones too
	Errors  int
	// CPU is this process's CPU over the read (the store client, or the reader of the
	// mount's or local files); Daemon and Fetches the mount's CPU and database fetches
	// (from its control socket), negative where not measured.
	CPU, Daemon, Fetches float64
}

// selfCPU is this process's user and system CPU time so far, in seconds.
func selfCPU() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// FilesPerSec is the rate of files read without error.
func (r Result) FilesPerSec() float64 { return float64(r.Files) / r.Elapsed.Seconds() }

// Pct is the q-quantile of the reads' latencies (0 with none).
func (r Result) Pct(q float64) time.Duration {
	if len(r.Lat) == 0 {
		return 0
	}
	s := slices.Clone(r.Lat)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// Measure runs read(k) for k in [0, n) on p goroutines.
func Measure(name string, n, p int, read func(k int) (int, error)) Result {
	r := Result{Path: name, Lat: make([]time.Duration, n), Daemon: -1, Fetches: -1}
	cpu := selfCPU()
	var next atomic.Int64
	var bytes, errs atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range p {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := int(next.Add(1)) - 1; k < n; k = int(next.Add(1)) - 1 {
				t := time.Now()
				size, err := read(k)
				r.Lat[k] = time.Since(t)
				if err != nil {
					errs.Add(1)
					continue
				}
				bytes.Add(int64(size))
			}
		}()
	}
	wg.Wait()
	r.Elapsed = time.Since(start)
	r.CPU = selfCPU() - cpu
	r.Files, r.Bytes, r.Errors = n-int(errs.Load()), bytes.Load(), int(errs.Load())
	return r
}

// Gets reads the blobs of ids from r with p reads at once, one id per request: the
// "store" path of cassfs bench.
func Gets(ctx context.Context, r store.BlobReader, ids []uuid.UUID, p int) Result {
	return Measure("store", len(ids), p, func(k int) (int, error) {
		b, err := r.Get(ctx, ids[k], nil)
		return len(b.Data), err
	})
}

// Blocks reads the blobs of ids from r in blocks of size (store.GetBlock), p blocks at
// once: the "store-blocks" path of cassfs bench. Files and errors count blobs; the
// latencies are the blocks'.
func Blocks(ctx context.Context, r store.BlobReader, ids []uuid.UUID, size, p int) Result {
	var failed atomic.Int64
	res := Measure("store-blocks", (len(ids)+size-1)/size, p, func(k int) (int, error) {
		var bytes atomic.Int64
		store.GetBlock(ctx, r, ids[k*size:min((k+1)*size, len(ids))], func(_ int, b store.Blob, err error) {
			if err != nil {
				failed.Add(1)
				return
			}
			bytes.Add(int64(len(b.Data)))
		})
		return int(bytes.Load()), nil
	})
	res.Errors = int(failed.Load())
	res.Files = len(ids) - res.Errors
	return res
}

// ReadFileList reads the first n paths of a file_list.txt, each joined to the list's
// directory.
func ReadFileList(path string, n int) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var paths []string
	sc := bufio.NewScanner(f)
	for len(paths) < n && sc.Scan() {
		line := sc.Text()
		paths = append(paths, filepath.Join(filepath.Dir(path), line[:max(0, strings.LastIndexByte(line, ' '))]))
	}
	return paths, sc.Err()
}

// Files reads paths with p readers at once.
func Files(name string, paths []string, p int) Result {
	return Measure(name, len(paths), p, func(k int) (int, error) {
		b, err := os.ReadFile(paths[k])
		return len(b), err
	})
}

// Print writes results as a table, with ratios to the first.
func Print(w io.Writer, results []Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "path\tfiles\tfiles/s\tMB/s\tp50\tp99\tvs store\tcpu µs/file\tdaemon µs/file\tfetches/file\t")
	if len(results) == 0 {
		return
	}
	base := results[0].FilesPerSec()
	perFile := func(v float64, n int, format string) string {
		if v < 0 || n == 0 {
			return "—"
		}
		return fmt.Sprintf(format, v/float64(n))
	}
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.1f\t%v\t%v\t%.2f×\t%s\t%s\t%s\t\n", r.Path, r.Files, r.FilesPerSec(),
			float64(r.Bytes)/1e6/r.Elapsed.Seconds(), r.Pct(0.5).Round(10*time.Microsecond), r.Pct(0.99).Round(10*time.Microsecond), r.FilesPerSec()/base,
			perFile(r.CPU*1e6, r.Files, "%.0f"), perFile(r.Daemon*1e6, r.Files, "%.0f"), perFile(r.Fetches, r.Files, "%.3f"))
	}
	tw.Flush()
}
