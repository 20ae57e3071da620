package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"

	"github.com/cassfs/cassfs/index"
	"github.com/cassfs/cassfs/mount"
	"github.com/cassfs/cassfs/readbench"
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
	block   int
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
  store-blocks  the same in blocks, as a mount's prefetcher reads (--block-samples)
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
	f.IntVar(&o.block, "block-samples", mount.DefaultBlockSamples, "samples per request of the store-blocks path (0 or 1: no such path)")
	return c
}

func runBench(ctx context.Context, st store.Store, o benchOpts, out, errOut io.Writer) error {
	fmt.Fprintf(errOut, "loading the index of dataset %s...\n", st.Dataset())
	ix, _, err := index.Read(ctx, st, true, slog.Default())
	if err != nil {
		return err
	}
	e := splits.NewEpoch(ix, splits.All(ix), o.seed, o.epoch, splits.View{})
	n := min(o.samples, len(e.Order))
	order := e.Order[:n]
	ids := ix.IDs(order)
	fmt.Fprintf(errOut, "store: reading %d samples with %d readers...\n", n, o.readers)
	results := []readbench.Result{readbench.Gets(ctx, st, ids, o.readers)}
	if o.block > 1 {
		fmt.Fprintf(errOut, "store-blocks: reading %d samples in blocks of %d with %d blocks in flight...\n", n, o.block, max(1, o.readers/2))
		results = append(results, readbench.Blocks(ctx, st, ids, o.block, max(1, o.readers/2)))
	}

	if o.mount != "" {
		// Counted from before the file list is read, which starts the prefetcher.
		cpu0, fetches0, asked := mount.Counters(ctx, o.mount)
		root := filepath.Join(o.mount, "all", fmt.Sprintf("epoch-%d", o.epoch))
		paths, err := readbench.ReadFileList(filepath.Join(root, "file_list.txt"), n)
		if err != nil {
			return fmt.Errorf("--mount: %w (is a cassfs mount of dataset %s there?)", err, st.Dataset())
		}
		fmt.Fprintf(errOut, "mount: reading %d files of %s with %d readers...\n", len(paths), root, o.readers)
		r := readbench.Files("mount", paths, o.readers)
		if cpu1, fetches1, ok := mount.Counters(ctx, o.mount); asked && ok {
			r.Daemon, r.Fetches = cpu1-cpu0, fetches1-fetches0
		} else {
			fmt.Fprintf(errOut, "mount: its control socket did not answer (mounted by another user?): no daemon CPU or fetches\n")
		}
		results = append(results, r)
	}
	if o.local != "" {
		fmt.Fprintf(errOut, "local: reading %d files of %s with %d readers...\n", n, o.local, o.readers)
		paths := make([]string, n)
		for k, i := range order {
			paths[k] = filepath.Join(o.local, ix.Labels()[ix.Label(i)], ix.Name(i))
		}
		results = append(results, readbench.Files("local", paths, o.readers))
	}
	readbench.Print(out, results)
	for _, r := range results {
		if r.Errors > 0 {
			return fmt.Errorf("%s: %d of %d reads failed", r.Path, r.Errors, r.Errors+r.Files)
		}
	}
	return nil
}
