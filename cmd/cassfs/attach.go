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
		Long: `attach makes dataset NAME of existing image tables (the DALI plugin's data_train +
metadata_train, CassandraDL's data_by_uuid + metadata_by_uuid, ...) without copying or
writing into them: cassfs keeps its catalogue in keyspace NAME (which may exist, empty;
the login needs all permissions there and SELECT on the tables) and reads each blob from
its table. Columns are found from the schemas where they say enough (the one uuid
partition key, the blob column, an int label column), else named by flags; a table that
cannot work is refused saying what would. A metadata table is joined on the id: its label
must agree, a text column with one value per label names the classes, the rest becomes
metadata. Tables given as SPLIT=KEYSPACE.TABLE become stored splits. Every blob is read
once for its checksums, so one changed later is never served; attaching again reads only
rows written since. Bad input stops it naming the row, and the dataset is listed only
once complete. docs/coming-from-the-dali-plugin.md explains each rule.`,
		Example: `  cassfs dataset attach imagenette --data-table train=imagenette.data_train \
      --data-table val=imagenette.data_val --metadata-table imagenette.metadata_train \
      --metadata-table imagenette.metadata_val`,
		Args: objectArg("dataset attach", "dataset NAME", "dataset"),
		RunE: func(c *cobra.Command, args []string) error {
			opts, err := fl.Options()
			if err != nil {
				return usageError{err}
			}
			pr := newProgress(c.ErrOrStderr(), progress, "attach")
			opts.OnPlan, opts.OnSnapshot = pr.plan, pr.snapshotting
			opts.Progress = func(p attach.Progress) { pr.update(p.Rows, p.Bytes) }
			st, err := db.openStore(c.Context(), storeOpts{create: true, attach: true, replication: fl.Replication})
			if err != nil {
				return err
			}
			defer st.Close()
			cs := st.(*cassandra.Store)
			_, err = attach.Attach(c.Context(), cs, cs, opts, c.OutOrStdout())
			pr.finish()
			return err
		},
	}
	db.register(c)
	fl.Register(c.Flags())
	c.Flags().StringVar(&progress, "progress", "auto", "progress display: auto (a bar on a terminal, lines otherwise), bar, lines, none")
	return c
}
