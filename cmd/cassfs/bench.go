package main

import (
	"bufio"
	"context"
	"errors"
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

	"github.com/cassfs/cassfs/index"
	"github.com/cassfs/cassfs/mount"
	"github.com/cassfs/cassfs/splits"
	"github.com/cassfs/cassfs/store"
	"github.com/spf13/cobra"
)

// benchOpts are the flags of cassfs bench.
type benchOpts struct {
	mount   string
	local   string
	samples int
	readers int
	seed    uint64
	epoch   uint64
}

func newBenchCmd() *cobra.Command {
	var (
		db dbFlags
		o  benchOpts
	)
	c := &cobra.Command{
		Use:   "bench --dataset NAME [--mount MOUNTPOINT] [--local DIR]",
		Short: "Measure reads from the database, through a mount and from local disk, in one run",
		Long: `bench reads the same samples — the first --samples of epoch --epoch of the "all" split —
with --readers readers at once, and reports files/s, MB/s and latency percentiles for
each path it is given, with ratios to the raw database reads:

  store   the database itself (cassfs's store client, no filesystem): the ceiling
  mount   through a running cassfs mount at --mount (mounted with the same --seed)
  local   the same files in a local ImageFolder tree --local (e.g. the tree ingested)

Each path reads each sample once. The mount should be fresh (nothing of that epoch read
yet), or its caches will serve it; a local tree is read through the page cache as is.

Beside throughput it reports CPU per file: "cpu" is this process's own (user + system:
the store client, or the reader of the mount's or the local files), "daemon" the
mount's, and "fetches" the mount's database fetches per file read, both asked of the
mount over its control socket. The mount's figures cover everything it did meanwhile,
prefetching beyond the files read included: that is what each file served cost it.`,
		Example: `  cassfs bench -d tiles --mount /mnt/tiles --local ./tiles/images --samples 5000 --readers 16`,
		Args:    noArgs("bench"),
		RunE: withStore(&db, func(c *cobra.Command, args []string, st store.Store) error {
			if o.samples <= 0 || o.readers <= 0 {
				return usageError{errors.New("--samples and --readers must be positive")}
			}
			return runBench(c.Context(), st, o, c.OutOrStdout(), c.ErrOrStderr())
		}),
	}
	db.register(c)
	f := c.Flags()
	f.StringVar(&o.mount, "mount", "", "a cassfs mount of the dataset to read through")
	f.StringVar(&o.local, "local", "", "a local ImageFolder tree of the same files (<class>/<file>) to read as a baseline")
	f.IntVar(&o.samples, "samples", 2000, "samples to read on each path")
	f.IntVar(&o.readers, "readers", 8, "readers at once")
	f.Uint64Var(&o.seed, "seed", 0, "seed of the mount (chooses the samples and their names)")
	f.Uint64Var(&o.epoch, "epoch", 0, "epoch whose first samples are read")
	return c
}

// benchResult is one path's measurement.
type benchResult struct {
	path    string
	files   int
	bytes   int64
	elapsed time.Duration
	lat     []time.Duration
	errors  int
	// cpu is this process's CPU over the read (the store client, or the reader of the
	// mount's or local files); daemon and fetches the mount's CPU and database fetches
	// (from its control socket), negative where not measured.
	cpu, daemon, fetches float64
}

// selfCPU is this process's user and system CPU time so far, in seconds.
func selfCPU() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

func (r benchResult) filesPerSec() float64 { return float64(r.files) / r.elapsed.Seconds() }

func (r benchResult) pct(q float64) time.Duration {
	if len(r.lat) == 0 {
		return 0
	}
	s := slices.Clone(r.lat)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// measure runs read(k) for k in [0, n) on p goroutines.
func measure(name string, n, p int, read func(k int) (int, error)) benchResult {
	r := benchResult{path: name, lat: make([]time.Duration, n), daemon: -1, fetches: -1}
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
				r.lat[k] = time.Since(t)
				if err != nil {
					errs.Add(1)
					continue
				}
				bytes.Add(int64(size))
			}
		}()
	}
	wg.Wait()
	r.elapsed = time.Since(start)
	r.cpu = selfCPU() - cpu
	r.files, r.bytes, r.errors = n-int(errs.Load()), bytes.Load(), int(errs.Load())
	return r
}

func runBench(ctx context.Context, st store.Store, o benchOpts, out, errOut io.Writer) error {
	fmt.Fprintf(errOut, "loading the index of dataset %s...\n", st.Dataset())
	ix, err := index.Load(ctx, st)
	if err != nil {
		return err
	}
	e := splits.NewEpoch(ix, splits.All(ix), o.seed, o.epoch, splits.View{})
	n := min(o.samples, len(e.Order))
	order := e.Order[:n]
	var results []benchResult

	fmt.Fprintf(errOut, "store: reading %d samples with %d readers...\n", n, o.readers)
	results = append(results, measure("store", n, o.readers, func(k int) (int, error) {
		b, err := st.Get(ctx, ix.ID(order[k]), nil)
		return len(b.Data), err
	}))

	if o.mount != "" {
		// Counted from before the file list is read: reading it enters the epoch,
		// which starts the prefetcher.
		cpu0, fetches0, asked := mount.Counters(ctx, o.mount)
		root := filepath.Join(o.mount, "all", fmt.Sprintf("epoch-%d", o.epoch))
		names, err := readFileList(filepath.Join(root, "file_list.txt"), n)
		if err != nil {
			return fmt.Errorf("--mount: %w (is a cassfs mount of dataset %s there?)", err, st.Dataset())
		}
		fmt.Fprintf(errOut, "mount: reading %d files of %s with %d readers...\n", len(names), root, o.readers)
		r := measure("mount", len(names), o.readers, func(k int) (int, error) {
			b, err := os.ReadFile(filepath.Join(root, names[k]))
			return len(b), err
		})
		if cpu1, fetches1, ok := mount.Counters(ctx, o.mount); asked && ok {
			r.daemon, r.fetches = cpu1-cpu0, fetches1-fetches0
		} else {
			fmt.Fprintf(errOut, "mount: its control socket did not answer (mounted by another user?): no daemon CPU or fetches\n")
		}
		results = append(results, r)
	}
	if o.local != "" {
		classes := ix.Labels()
		fmt.Fprintf(errOut, "local: reading %d files of %s with %d readers...\n", n, o.local, o.readers)
		results = append(results, measure("local", n, o.readers, func(k int) (int, error) {
			i := order[k]
			b, err := os.ReadFile(filepath.Join(o.local, classes[ix.Label(i)], ix.Name(i)))
			return len(b), err
		}))
	}
	printBench(out, results)
	for _, r := range results {
		if r.errors > 0 {
			return fmt.Errorf("%s: %d of %d reads failed", r.path, r.errors, r.errors+r.files)
		}
	}
	return nil
}

// readFileList reads the first n paths of a file_list.txt.
func readFileList(path string, n int) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var names []string
	sc := bufio.NewScanner(f)
	for len(names) < n && sc.Scan() {
		line := sc.Text()
		names = append(names, line[:max(0, strings.LastIndexByte(line, ' '))])
	}
	return names, sc.Err()
}

func printBench(w io.Writer, results []benchResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "path\tfiles\tfiles/s\tMB/s\tp50\tp99\tvs store\tcpu µs/file\tdaemon µs/file\tfetches/file\t")
	base := results[0].filesPerSec()
	perFile := func(v float64, n int, format string) string {
		if v < 0 || n == 0 {
			return "—"
		}
		return fmt.Sprintf(format, v/float64(n))
	}
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.1f\t%v\t%v\t%.2f×\t%s\t%s\t%s\t\n", r.path, r.files, r.filesPerSec(),
			float64(r.bytes)/1e6/r.elapsed.Seconds(), r.pct(0.5).Round(10*time.Microsecond), r.pct(0.99).Round(10*time.Microsecond), r.filesPerSec()/base,
			perFile(r.cpu*1e6, r.files, "%.0f"), perFile(r.daemon*1e6, r.files, "%.0f"), perFile(r.fetches, r.files, "%.3f"))
	}
	tw.Flush()
}
