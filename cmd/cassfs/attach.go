package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/cassfs/cassfs/attach"
	"github.com/cassfs/cassfs/store"
	"github.com/cassfs/cassfs/store/cassandra"
	"github.com/google/uuid"
	"github.com/spf13/cobra"
)

// The Cassandra store reads the tables it attaches.
var _ attach.Tables = (*cassandra.Store)(nil)

func newDatasetAttachCmd() *cobra.Command {
	var (
		db        dbFlags
		data      []string
		meta      []string
		cols      attach.Columns
		metaCols  attach.MetaColumns
		lists     []string
		maxSize   int64
		workers   int
		rateMB    float64
		rf        int
		progress  string
		labelName string
	)
	c := &cobra.Command{
		Use:   "attach NAME --data-table [SPLIT=]KEYSPACE.TABLE... [--metadata-table [SPLIT=]KEYSPACE.TABLE...]",
		Short: "Make a dataset of tables another tool wrote, without copying a blob",
		Long: `attach makes dataset NAME of image tables that already exist, such as the CassandraDL
layout (data_by_uuid(patch_id uuid PRIMARY KEY, label int, data blob) beside
metadata_by_uuid) or the Cassandra DALI plugin's (data_train, metadata_train, ...). Every
other command (mount, split, stats, cache, bench, dataset list/show/delete) then works on
it as on an ingested one.

Nothing is copied and nothing is written into the attached tables: cassfs keeps its
catalogue (names, sizes, checksums, labels, class names, metadata, splits, the index
snapshot) in keyspace NAME and reads every blob from the table it is in. SELECT on the
attached keyspaces is all the login needs there (and CREATE for keyspace NAME).

Columns are found from each table's schema (system_schema.columns):
  id      the table's one uuid partition key
  data    its blob column (--data-column if it has several)
  label   an int column named label (--label-column names another; none, or
          --no-label: one class)
A table that cannot work (no uuid partition key, a composite one, no blob column, a
label that is not an int) is refused, naming the column and what would work.

Splits: every --data-table with a SPLIT= prefix becomes a stored split of that name;
several without one are named from the table (data_train: train). One table without a
prefix is the mount's own "all". --split-list SPLIT=FILE adds a split given as sample
ids, one uuid a line.

A metadata table is joined on the id (--metadata-id-column if it has several uuid
columns): its label must agree with the data table's; a text column with one value per
label names the class directories (the DALI plugin's or_label; --class-column names it;
else class_<label>); every other column becomes metadata (xattrs, samples.csv,
split create --group-by). File names come from --name-column, else
<uuid>.<extension of the image's format> (jpg, png, tif, bmp, pgm, ppm, webp).

attach reads every blob once (at most --rate MB/s) to record its size, SHA-256 and
CRC32C: a blob changed afterwards is never served (a mount counts the read corrupt). Run
the same attach again to pick up rows added or changed since (by their write time): it
reads only those blobs and rewrites only what changed; an interrupted attach resumes.

Bad input (a missing keyspace or table, a null, empty or oversized blob, a label the
metadata table contradicts, a duplicated id or name) stops the attach with an error
naming the row. The dataset is listed and can be mounted only once its catalogue is
complete; the catalogue of a first attach that failed on bad input is removed.
cassfs dataset delete NAME removes the catalogue only, never the attached tables.`,
		Example: `  # The Cassandra DALI plugin's tables: splits train and val
  cassfs dataset attach imagenette \
      --data-table train=imagenette.data_train --data-table val=imagenette.data_val \
      --metadata-table imagenette.metadata_train --metadata-table imagenette.metadata_val

  # CassandraDL's tables, then patient-disjoint splits
  cassfs dataset attach tissue --data-table tissue_patches.data_by_uuid \
      --metadata-table tissue_patches.metadata_by_uuid
  cassfs split create -d tissue --names train,val --ratios 8:2 --group-by patient_id`,
		Args: objectArg("dataset attach", "dataset NAME", "dataset"),
		RunE: func(c *cobra.Command, args []string) error {
			if maxSize <= 0 || workers <= 0 || rf <= 0 || rateMB < 0 {
				return usageError{errors.New("--max-size, --workers and --replication must be positive, --rate not negative")}
			}
			if _, err := db.config(); err != nil {
				return err
			}
			opts := attach.Options{Columns: cols, MetaColumns: metaCols, MaxSize: maxSize, Workers: workers, Rate: int64(rateMB * 1e6)}
			opts.Columns.Label = labelName
			for _, s := range data {
				t, err := attach.ParseTableName(s)
				if err != nil {
					return usageError{fmt.Errorf("--data-table %w", err)}
				}
				opts.Data = append(opts.Data, t)
			}
			if len(opts.Data) == 0 {
				return usageError{errors.New("give at least one --data-table [SPLIT=]KEYSPACE.TABLE")}
			}
			for _, s := range meta {
				t, err := attach.ParseTableName(s)
				if err != nil {
					return usageError{fmt.Errorf("--metadata-table %w", err)}
				}
				opts.Meta = append(opts.Meta, t)
			}
			for _, l := range lists {
				sl, err := readSplitList(l)
				if err != nil {
					return usageError{fmt.Errorf("--split-list %w", err)}
				}
				opts.Lists = append(opts.Lists, sl)
			}
			out := c.ErrOrStderr()
			pr := newProgress(out, progress, "attach")
			opts.OnPlan, opts.OnSnapshot = pr.plan, pr.snapshotting
			opts.Progress = func(p attach.Progress) { pr.update(p.Rows, p.Bytes) }
			ctx := c.Context()
			st, err := db.openStore(ctx, storeOpts{create: true, attach: true, replication: rf})
			if err != nil {
				return err
			}
			defer st.Close()
			cs := st.(*cassandra.Store)
			return runAttach(ctx, cs, cs, opts, c.OutOrStdout(), pr)
		},
	}
	db.register(c)
	f := c.Flags()
	f.StringArrayVar(&data, "data-table", nil, "[SPLIT=]KEYSPACE.TABLE holding the images (uuid partition key, blob column); repeatable")
	f.StringArrayVar(&meta, "metadata-table", nil, "[SPLIT=]KEYSPACE.TABLE of metadata joined on the id; repeatable")
	f.StringVar(&cols.ID, "id-column", "", "the data tables' uuid partition key (default: found)")
	f.StringVar(&cols.Data, "data-column", "", "the data tables' blob column holding the image (default: the only blob column)")
	f.StringVar(&labelName, "label-column", "", "the int column holding the label, in the data and metadata tables (default: label, if there is one)")
	f.BoolVar(&cols.NoLabel, "no-label", false, "ignore the data tables' label column: one class")
	f.StringVar(&cols.Name, "name-column", "", "text column (data or metadata table) holding each file's name, e.g. filename (default: <uuid>.<format's extension>)")
	f.StringVar(&metaCols.Class, "class-column", "", "metadata text column naming the classes, one value per label (default: found, e.g. or_label; else class_<label>)")
	f.StringVar(&metaCols.ID, "metadata-id-column", "", "the metadata tables' uuid column holding the data tables' ids (default: found)")
	f.StringArrayVar(&lists, "split-list", nil, "SPLIT=FILE: a split given as sample ids, one uuid a line; repeatable")
	f.Int64Var(&maxSize, "max-size", 15<<20, "largest blob accepted, in bytes")
	f.IntVar(&workers, "workers", 16, "blobs read at once")
	f.Float64Var(&rateMB, "rate", 0, "most MB/s of blobs read (0: no limit), to spare a cluster in use")
	f.IntVar(&rf, "replication", 1, "replication factor of the catalogue's keyspace when it is made (SimpleStrategy)")
	f.StringVar(&progress, "progress", "auto", "progress display: auto (a bar on a terminal, lines otherwise), bar, lines, none")
	return c
}

// readSplitList reads SPLIT=FILE: one uuid a line, blank lines and # comments skipped.
func readSplitList(arg string) (attach.SplitList, error) {
	name, path, ok := strings.Cut(arg, "=")
	if !ok || name == "" || path == "" {
		return attach.SplitList{}, fmt.Errorf("%q: want SPLIT=FILE", arg)
	}
	f, err := os.Open(path)
	if err != nil {
		return attach.SplitList{}, err
	}
	defer f.Close()
	sl := attach.SplitList{Name: name}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		id, err := uuid.Parse(line)
		if err != nil {
			return sl, fmt.Errorf("%s, line %d: %q is no uuid", path, n, line)
		}
		sl.IDs = append(sl.IDs, id)
	}
	return sl, sc.Err()
}

// runAttach prepares and runs an attach into st, reading the tables through tb. The
// catalogue of a dataset never completed before is dropped when bad input stops it.
func runAttach(ctx context.Context, st store.Attacher, tb attach.Tables, opts attach.Options, out io.Writer, pr *progressView) error {
	before, err := st.Sources(ctx)
	if err != nil {
		return err
	}
	fail := func(err error) error {
		var in *attach.InputError
		if errors.As(err, &in) && len(before) == 0 {
			if dropper, ok := st.(interface{ Drop(context.Context) error }); ok {
				if derr := dropper.Drop(context.WithoutCancel(ctx)); derr != nil {
					return fmt.Errorf("%w (and its unfinished catalogue could not be removed: %v)", err, derr)
				}
				return fmt.Errorf("%w: dataset %s not made", err, st.Dataset())
			}
		}
		if len(before) == 0 {
			return fmt.Errorf("%w (dataset %s is not made yet; run the same attach again to resume)", err, st.Dataset())
		}
		return err
	}
	plan, err := attach.Prepare(ctx, tb, opts)
	if err != nil {
		return fail(err)
	}
	rep, err := plan.Run(ctx, st)
	pr.finish()
	if err != nil {
		return fail(err)
	}
	var srcs []string
	for _, s := range plan.Sources() {
		srcs = append(srcs, s.String())
	}
	fmt.Fprintf(out, "dataset %s attached to %s: %d samples in %d classes; %d blobs read (%.1f MB), %d rows updated, %d unchanged; %.1fs\n",
		st.Dataset(), strings.Join(srcs, ", "), plan.Rows(), len(rep.Classes), rep.Read, float64(rep.Bytes)/1e6, rep.Updated, rep.Unchanged, rep.Elapsed.Seconds())
	if len(rep.Splits) > 0 {
		fmt.Fprintf(out, "splits: %s\n", strings.Join(rep.Splits, ", "))
	}
	if rep.Snapshot != nil {
		fmt.Fprintf(out, "index snapshot not stored: %v\n(mounts will scan the catalogue instead; `cassfs dataset snapshot %s` stores one)\n", rep.Snapshot, st.Dataset())
	}
	return nil
}
