package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/cassfs/cassfs/index"
	"github.com/cassfs/cassfs/store"
	"github.com/cassfs/cassfs/store/cassandra"
	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

func newDatasetCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "dataset",
		Short: "List, show, snapshot and delete the datasets of a cluster",
		Long: `A dataset is a keyspace made by cassfs ingest (blobs, metadata, class names and splits),
or by cassfs dataset attach (the same without blobs, read from the attached tables).

  cassfs dataset list     every dataset of the cluster: samples, bytes, classes, splits, created
  cassfs dataset show     one dataset: classes with counts, metadata columns and their fill, splits
  cassfs dataset snapshot store the index snapshot mounts start from (ingest stores one)
  cassfs dataset delete   remove a dataset and everything in it
  cassfs dataset attach   make a dataset of tables another tool wrote, without copying a blob`,
		Args: subcommandsOnly("dataset", "list, show, snapshot, delete or attach"),
		RunE: func(c *cobra.Command, args []string) error { return c.Help() },
	}
	c.AddCommand(newDatasetListCmd(), newDatasetShowCmd(), newDatasetSnapshotCmd(), newDatasetDeleteCmd(), newDatasetAttachCmd())
	return c
}

func newDatasetListCmd() *cobra.Command {
	var db dbFlags
	c := &cobra.Command{
		Use:   "list",
		Short: "List the datasets of the cluster: samples, bytes, classes, splits and creation time of each",
		Long: `list finds every dataset of the cluster (the keyspaces holding cassfs's tables) and reads
each one's metadata (its index snapshot if it is current, else one scan of its samples
table; never the blobs). A dataset that
cannot be read is named on standard error with the reason, the others are still listed,
and the exit status is 1: a figure is printed only if it was read.`,
		Args: noArgs("dataset list"),
		RunE: func(c *cobra.Command, args []string) error {
			cfg, err := db.clusterConfig()
			if err != nil {
				return err
			}
			names, err := cassandra.Datasets(c.Context(), cfg)
			if err != nil {
				return err
			}
			return index.List(c.Context(), names, func(ctx context.Context, name string) (store.Store, error) {
				db.dataset = name
				return db.openStore(ctx, storeOpts{})
			}, c.OutOrStdout(), c.ErrOrStderr())
		},
	}
	db.register(c)
	c.Flags().Lookup("dataset").Usage = "not used: every dataset is listed"
	return c
}

func newDatasetShowCmd() *cobra.Command {
	var db dbFlags
	c := &cobra.Command{
		Use:   "show NAME",
		Short: "Show a dataset: classes with counts, targets, metadata columns and their fill, splits",
		Long: `show reads the dataset's metadata (its index snapshot if it is current, else one scan
of its samples table; never the blobs) and prints its classes with their counts, its
targets, its metadata columns and how many samples fill each, and its stored splits.
NAME may also be given as --dataset NAME.`,
		Args: objectArg("dataset show", "dataset NAME", "dataset"),
		RunE: withStore(&db, func(c *cobra.Command, args []string, st store.Store) error {
			return index.Show(c.Context(), st, c.OutOrStdout())
		}),
	}
	db.register(c)
	return c
}

func newDatasetSnapshotCmd() *cobra.Command {
	var db dbFlags
	c := &cobra.Command{
		Use:   "snapshot NAME",
		Short: "Store the index snapshot a mount starts from, instead of scanning every metadata row",
		Long: `snapshot scans the dataset's samples once and stores the index built from them as a few
large values, which a mount reads instead of scanning (at a million samples, seconds
instead of tens of seconds). cassfs ingest stores one when it is done; this is for
datasets ingested by an older cassfs or whose ingest could not store one. Any later
ingest makes a snapshot stale (mounts then scan) and stores a new one.
NAME may also be given as --dataset NAME.`,
		Args: objectArg("dataset snapshot", "dataset NAME", "dataset"),
		RunE: withStore(&db, func(c *cobra.Command, args []string, st store.Store) error {
			start := time.Now()
			ix, n, err := index.StoreSnapshot(c.Context(), st)
			if err == nil {
				fmt.Fprintf(c.OutOrStdout(), "dataset %s: index snapshot stored: %s samples, %s, %.1fs\n", st.Dataset(), humanize.Comma(int64(ix.Len())), humanize.IBytes(uint64(n)), time.Since(start).Seconds())
			}
			return err
		}),
	}
	db.register(c)
	return c
}

func newDatasetDeleteCmd() *cobra.Command {
	var (
		db  dbFlags
		yes bool
	)
	c := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a dataset and everything in it (blobs, metadata, classes, splits)",
		Long: `delete removes the dataset's keyspace: every blob, metadata row, class name and split.
For a dataset made by attach it removes cassfs's catalogue only: the attached tables
stay as they are.
On a terminal it asks for the dataset's name as confirmation; elsewhere --yes is required.

Mounts of the dataset that are still running keep listing it (their index is in memory),
but every read of a file not already cached fails with EIO, and the mount's log names the
cause (the dataset's tables are gone); unmount them. A new mount of a deleted dataset
refuses to start, saying the dataset does not exist. Cache directories (mount --cache-dir)
keep their files until cassfs cache clear. NAME may also be given as --dataset NAME.`,
		Args: objectArg("dataset delete", "dataset NAME", "dataset"),
		RunE: func(c *cobra.Command, args []string) error {
			st, err := db.openStore(c.Context(), storeOpts{})
			if errors.Is(err, cassandra.ErrIncomplete) { // an unfinished attach: open it as attach does
				st, err = db.openStore(c.Context(), storeOpts{create: true, attach: true, replication: 1})
			}
			if err != nil {
				return err
			}
			defer st.Close()
			dropper, ok := st.(*cassandra.Store)
			if !ok {
				return errors.New("this store cannot delete datasets")
			}
			if !yes {
				in, isTerm := c.InOrStdin().(*os.File)
				if !isTerm || !term.IsTerminal(int(in.Fd())) {
					return usageError{fmt.Errorf("delete dataset %s: pass --yes to confirm (no terminal to ask on)", st.Dataset())}
				}
				fmt.Fprintf(c.ErrOrStderr(), "This deletes dataset %s and everything in it. Type its name to confirm: ", st.Dataset())
				line, _ := bufio.NewReader(in).ReadString('\n')
				if strings.TrimSpace(line) != st.Dataset() {
					return errors.New("not confirmed: nothing deleted")
				}
			}
			what, err := dropper.Delete(c.Context())
			if err != nil {
				return err
			}
			fmt.Fprintf(c.OutOrStdout(), "dataset %s deleted%s\n", st.Dataset(), what)
			return nil
		},
	}
	db.register(c)
	c.Flags().BoolVar(&yes, "yes", false, "delete without asking")
	return c
}
