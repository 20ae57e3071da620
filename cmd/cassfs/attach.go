package main

import (
	"github.com/cassfs/cassfs/attach"
	"github.com/cassfs/cassfs/store/cassandra"
	"github.com/spf13/cobra"
)

func newDatasetAttachCmd() *cobra.Command {
	var (
		db       dbFlags
		fl       attach.Flags
		progress string
	)
	c := &cobra.Command{
		Use:   "attach NAME --data-table [SPLIT=]KEYSPACE.TABLE... [--metadata-table [SPLIT=]KEYSPACE.TABLE...]",
		Short: "Make a dataset of tables another tool wrote, without copying a blob",
		Long: `attach makes dataset NAME of existing image tables (CassandraDL's data_by_uuid +
metadata_by_uuid, the DALI plugin's data_train + metadata_train, ...), to mount, split and
inspect as an ingested one. Nothing is copied or written into them: cassfs keeps its
catalogue in keyspace NAME (which may exist, empty) and reads each blob from its table;
the login needs SELECT on them and all permissions on NAME.

From each table's schema: the id is its one uuid partition key, the image its blob column,
the label an int column named label (none: one class); flags name them where that is not
enough, and a table that cannot work is refused saying what would. A metadata table is
joined on the id: its label must agree, a text column with one value per label names the
classes (or_label; else class_<label>), the rest is metadata (xattrs, samples.csv,
--group-by). Files are named <uuid>.<format's extension> unless --name-column. Tables
with SPLIT= become stored splits; several without are named from the table (data_train:
train); one alone is the mount's "all".

Every blob is read once for its size and checksums: one changed later is never served.
Attaching again reads only rows written since; an interrupted attach resumes. Bad input
stops it with an error naming the row; the dataset is listed only once complete, and a
first attach stopped by bad input leaves nothing. dataset delete removes the catalogue.`,
		Example: `  cassfs dataset attach imagenette --data-table train=imagenette.data_train \
      --data-table val=imagenette.data_val --metadata-table imagenette.metadata_train \
      --metadata-table imagenette.metadata_val
  cassfs dataset attach tissue --data-table tissue_patches.data_by_uuid \
      --metadata-table tissue_patches.metadata_by_uuid`,
		Args: objectArg("dataset attach", "dataset NAME", "dataset"),
		RunE: func(c *cobra.Command, args []string) error {
			if _, err := db.config(); err != nil {
				return err
			}
			opts, err := fl.Options()
			if err != nil {
				return usageError{err}
			}
			pr := newProgress(c.ErrOrStderr(), progress, "attach")
			opts.OnPlan, opts.OnSnapshot = pr.plan, pr.snapshotting
			opts.Progress = func(p attach.Progress) { pr.update(p.Rows, p.Bytes) }
			ctx := c.Context()
			st, err := db.openStore(ctx, storeOpts{create: true, attach: true, replication: fl.Replication})
			if err != nil {
				return err
			}
			defer st.Close()
			cs := st.(*cassandra.Store)
			_, rep, err := attach.Attach(ctx, cs, cs, opts)
			pr.finish()
			if err == nil {
				rep.Print(c.OutOrStdout(), cs.Dataset())
			}
			return err
		},
	}
	db.register(c)
	f := c.Flags()
	fl.Register(f)
	f.StringVar(&progress, "progress", "auto", "progress display: auto (a bar on a terminal, lines otherwise), bar, lines, none")
	return c
}
