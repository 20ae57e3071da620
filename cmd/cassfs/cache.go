package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"text/tabwriter"

	"github.com/cassfs/cassfs/disktier"
	"github.com/cassfs/cassfs/index"
	"github.com/cassfs/cassfs/mount"
	"github.com/cassfs/cassfs/prefetch"
	"github.com/cassfs/cassfs/splits"
	"github.com/cassfs/cassfs/store"
	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"
)

func newCacheCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "cache",
		Short: "Fill, show and clear a cache directory (mount --cache-dir)",
		Long: `A cache directory (cassfs mount --cache-dir) keeps fetched files on local disk for later
epochs and later mounts.

  cassfs cache warm    fill it with a dataset or a split ahead of a job
  cassfs cache show    what it holds, per dataset, and the hit rates of the mounts that used it
  cassfs cache clear   remove a dataset's files from it`,
		Args: subcommandsOnly("cache", "warm, show or clear"),
		RunE: func(c *cobra.Command, args []string) error { return c.Help() },
	}
	c.AddCommand(newCacheWarmCmd(), newCacheShowCmd(), newCacheClearCmd())
	return c
}

func newCacheWarmCmd() *cobra.Command {
	var (
		db                     dbFlags
		dir, size, split, prog string
		parallel               int
	)
	c := &cobra.Command{
		Use:   "warm --dataset NAME --cache-dir-size BYTES DIR",
		Short: "Fill a cache directory with a dataset (or one of its splits) ahead of a job",
		Long: `warm fetches every sample of the dataset (or of --split) that the cache directory does not
hold yet, verifies it and writes it there, as a mount with the same --cache-dir would, until
the directory holds --cache-dir-size bytes. It is resumable: run it again and it fetches
only what is missing. A mount of the dataset must not be using the directory meanwhile.
DIR may also be given as --cache-dir DIR.`,
		Args: objectArg("cache warm", "cache directory DIR", "cache-dir"),
		RunE: withStore(&db, func(c *cobra.Command, args []string, st store.Store) error {
			if dir == "" {
				return usageError{errors.New("cache warm needs the cache directory: cassfs cache warm --dataset NAME --cache-dir-size BYTES DIR")}
			}
			n, err := mount.ParseSize(size)
			if err != nil || n == 0 || n > 1<<62 {
				return usageError{fmt.Errorf("--cache-dir-size: want a positive size such as 200GiB (got %q)", size)}
			}
			if parallel <= 0 {
				return usageError{errors.New("--parallel must be positive")}
			}
			return warmCache(c.Context(), st, dir, int64(n), split, parallel, newProgress(c.ErrOrStderr(), prog, "warm"), c.OutOrStdout())
		}),
	}
	db.register(c)
	c.Flags().StringVar(&dir, "cache-dir", "", "the cache directory (as given to mount --cache-dir)")
	c.Flags().StringVar(&size, "cache-dir-size", "", "bytes the directory may hold (as given to mount --cache-dir-size)")
	c.Flags().StringVar(&split, "split", "all", `the stored split to fill it with ("all": the whole dataset)`)
	c.Flags().IntVar(&parallel, "parallel", 64, "fetches in flight")
	c.Flags().StringVar(&prog, "progress", "auto", "progress display: auto (a bar on a terminal, lines otherwise), bar, lines, none")
	return c
}

// discardLogger drops the disk tier's log lines: warm reports what matters itself.
func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// warmCache fetches the members of split that dir does not hold into it, in parallel.
func warmCache(ctx context.Context, st store.Store, dir string, maxBytes int64, split string, parallel int, pr *progressView, out io.Writer) error {
	ix, _, err := index.Read(ctx, st, true, slog.Default())
	if err != nil {
		return err
	}
	members := splits.All(ix).Members
	if split != "all" {
		shown, err := splits.LoadStored(ctx, st, ix, split, discardLogger())
		if errors.Is(err, splits.ErrUnknownSplit) {
			return usageError{fmt.Errorf("--split: %w", err)}
		}
		if err != nil {
			return err
		}
		if len(shown) < 2 {
			return fmt.Errorf("split %q of dataset %s lists samples the dataset no longer has; create it again", split, st.Dataset())
		}
		members = shown[1].Members
	}
	d, err := disktier.Open(dir, st.Dataset(), ix, maxBytes, discardLogger())
	if err != nil {
		return err
	}
	defer d.Close()
	defer d.ForgetCounts()
	rep := d.Warm(ctx, prefetch.StoreFetch(st, ix), members, parallel, func(plan int) { pr.plan(plan, 0) }, pr.update)
	pr.finish()
	s := d.Stats()
	fmt.Fprintf(out, "cache directory %s: dataset %s (%s), %s samples held, %s; %d fetched now, %d held before",
		dir, st.Dataset(), split, humanize.Comma(int64(s.Entries)), humanize.IBytes(uint64(s.Bytes)), rep.Fetched, rep.Held)
	if rep.Skipped > 0 {
		fmt.Fprintf(out, "; %d did not fit in --cache-dir-size", rep.Skipped)
	}
	fmt.Fprintln(out)
	if s.WriteErrors > 0 {
		return fmt.Errorf("%d samples could not be written to %s (is the disk full or read-only?)", s.WriteErrors, dir)
	}
	if len(rep.Failed) > 0 {
		return fmt.Errorf("%d samples could not be fetched (run warm again to retry them), the first: %w", len(rep.Failed), rep.Failed[0])
	}
	return ctx.Err()
}

func newCacheShowCmd() *cobra.Command {
	var dir string
	c := &cobra.Command{
		Use:   "show DIR",
		Short: "What a cache directory holds, per dataset, and the hit rates of the mounts that used it",
		Long: `show lists the datasets a cache directory (mount --cache-dir) holds: files, bytes, the hits
and misses of the mounts that used it, and whether a mount uses it now. DIR may also be
given as --cache-dir DIR.`,
		Args: objectArg("cache show", "cache directory DIR", "cache-dir"),
		RunE: func(c *cobra.Command, args []string) error {
			if dir == "" {
				return usageError{errors.New("cache show needs the cache directory: cassfs cache show DIR")}
			}
			us, err := disktier.ReadUsage(dir)
			if err != nil {
				return err
			}
			out := c.OutOrStdout()
			if len(us) == 0 {
				fmt.Fprintf(out, "cache directory %s holds no dataset\n", dir)
				return nil
			}
			tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "DATASET\tFILES\tBYTES\tHITS\tMISSES\tHIT RATE\tIN USE")
			for _, u := range us {
				rate := "—"
				if u.Hits+u.Misses > 0 {
					rate = fmt.Sprintf("%.1f%%", 100*float64(u.Hits)/float64(u.Hits+u.Misses))
				}
				inUse := "no"
				if u.InUse {
					inUse = "yes (a mount)"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", u.Dataset, humanize.Comma(int64(u.Entries)), humanize.IBytes(uint64(u.Bytes)),
					humanize.Comma(u.Hits), humanize.Comma(u.Misses), rate, inUse)
			}
			return tw.Flush()
		},
	}
	c.Flags().StringVar(&dir, "cache-dir", "", "the cache directory")
	return c
}

func newCacheClearCmd() *cobra.Command {
	var dir, ds string
	c := &cobra.Command{
		Use:   "clear --dataset NAME DIR",
		Short: "Remove a dataset's files from a cache directory (not while a mount uses them)",
		Long: `clear removes the files of --dataset from the cache directory DIR (also given as
--cache-dir DIR). It refuses while a mount uses them.`,
		Args: objectArg("cache clear", "cache directory DIR", "cache-dir"),
		RunE: func(c *cobra.Command, args []string) error {
			if dir == "" || ds == "" {
				return usageError{errors.New("cache clear needs the cache directory and --dataset: cassfs cache clear --dataset NAME DIR")}
			}
			if err := disktier.Remove(dir, ds); err != nil {
				return err
			}
			fmt.Fprintf(c.OutOrStdout(), "cache directory %s: dataset %s removed\n", dir, ds)
			return nil
		},
	}
	c.Flags().StringVar(&dir, "cache-dir", "", "the cache directory")
	c.Flags().StringVarP(&ds, "dataset", "d", "", "the dataset whose files go")
	return c
}
