package main

import (
	"errors"
	"fmt"

	"github.com/cassfs/cassfs/ingest"
	"github.com/spf13/cobra"
)

func newIngestCmd() *cobra.Command {
	var (
		db        dbFlags
		csvPath   string
		csvKey    string
		targets   string
		unlabeled bool
		maxSize   int64
		workers   int
		rf        int
		progress  string
	)
	c := &cobra.Command{
		Use:   "ingest --dataset NAME [--csv FILE] [--targets DIR] [--unlabeled] ROOT",
		Short: "Load an ImageFolder tree (ROOT/<class>/<file>) and a metadata CSV into a dataset",
		Long: `ingest loads ROOT/<class>/<file> into the dataset, creating it if needed.

Labels are the class directory names in bytewise order (what DALI and torchvision do).
With --csv, each CSV row gives metadata for one file, keyed by its path "<class>/<file>"
in the --csv-key column; every other column becomes a metadata column of the dataset
(names: lowercase letters, digits and '_'). The mount shows them on every file as the
extended attribute user.<column> and in <split>/samples.csv.

With --targets DIR, every image ROOT/<class>/<stem>.<ext> has a target file (a
segmentation mask, a label vector, boxes) at DIR/<class>/<stem>.<any extension>, stored
as a blob of its own; the mount shows them in epoch-N.targets/ beside each epoch-N/, in
the same order. A target that matches no image, an image without a target, two targets
for one image, or a target over --max-size stops the ingest before anything is written.
Every sample of a dataset has a target or none does.

With --unlabeled, the files directly in ROOT (and in DIR for --targets) are the dataset,
as the one class "unlabeled" (datasets without labels, such as pure segmentation); the
CSV names them without a class.

When the files are in, ingest stores the index snapshot mounts start from (see cassfs
dataset snapshot). Re-running the same ingest writes no duplicates and resumes an
interrupted one. Files that cannot be ingested (unreadable, empty, over --max-size,
hidden, nested, directly in ROOT, or with an extension DALI and torchvision cannot read)
are listed with their reason and the exit status is 1; the rest is ingested. Problems in the CSV stop the ingest before
anything is written. Exit status: 0 all ingested, 1 something was not, 2 bad usage.`,
		Example: `  cassfs ingest --dataset tiles --csv meta.csv ./tiles
  cassfs ingest --dataset seg --targets ./masks ./images
  cassfs ingest --hosts 10.0.0.5,10.0.0.6 --dataset imagenet --replication 3 ./train`,
		Args: exactlyOne("ingest", "ROOT directory"),
		RunE: func(c *cobra.Command, args []string) error {
			if maxSize <= 0 || workers <= 0 || rf <= 0 {
				return usageError{errors.New("--max-size, --workers and --replication must be positive")}
			}
			if _, err := db.config(); err != nil {
				return err
			}
			out := c.ErrOrStderr()
			pr := newProgress(out, progress, "ingest")
			// Validate the tree and the CSV before touching the database, so bad input
			// creates nothing.
			plan, err := ingest.Prepare(ingest.Options{
				Root:       args[0],
				Unlabeled:  unlabeled,
				Targets:    targets,
				CSV:        csvPath,
				KeyColumn:  csvKey,
				MaxSize:    maxSize,
				Workers:    workers,
				OnPlan:     pr.plan,
				OnSnapshot: pr.snapshotting,
				Progress:   func(p ingest.Progress) { pr.update(p.Files, p.Bytes) },
			})
			if err != nil {
				return err
			}
			ctx := c.Context()
			st, err := db.openStore(ctx, storeOpts{create: true, replication: rf})
			if err != nil {
				return err
			}
			defer st.Close()
			rep, err := plan.Run(ctx, st)
			pr.finish()
			rep.Print(c.OutOrStdout(), db.dataset)
			if err != nil {
				return err
			}
			if len(rep.Skipped) > 0 {
				return fmt.Errorf("%d file(s) not ingested (listed above); fix or remove them and run the same ingest again", len(rep.Skipped))
			}
			return nil
		},
	}
	db.register(c)
	f := c.Flags()
	f.StringVar(&csvPath, "csv", "", "metadata CSV: header row, one row per file, keyed by --csv-key")
	f.StringVar(&csvKey, "csv-key", "path", "CSV column holding each file's path <class>/<file>")
	f.StringVar(&targets, "targets", "", "tree of target files: DIR/<class>/<stem>.<any extension> for each image <class>/<stem>.<ext>")
	f.BoolVar(&unlabeled, "unlabeled", false, "the files directly in ROOT are the dataset, one class \"unlabeled\"")
	f.Int64Var(&maxSize, "max-size", ingest.DefaultMaxSize, "largest file accepted, in bytes")
	f.IntVar(&workers, "workers", 16, "files read and written in parallel")
	f.IntVar(&rf, "replication", 1, "replication factor of a newly created dataset (SimpleStrategy)")
	f.StringVar(&progress, "progress", "auto", "progress display: auto (a bar on a terminal, lines otherwise), bar, lines, none")
	return c
}
