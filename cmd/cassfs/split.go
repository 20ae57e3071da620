package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cassfs/cassfs/splits"
	"github.com/cassfs/cassfs/store"
	"github.com/google/renameio/v2"
	"github.com/spf13/cobra"
)

func newSplitCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "split",
		Short: "Create, list, show, delete, export and import a dataset's splits",
		Long: `A split is a named list of sample ids stored in the dataset itself, so every machine
and every rank of a job sees the same one. A mount shows one directory per stored split
beside "all".

  cassfs split create   make splits from metadata: entity-disjoint, class-balanced, seeded
  cassfs split list     the stored splits
  cassfs split show     how a split was made and what it achieved
  cassfs split delete   remove splits
  cassfs split export   write splits to a JSON file
  cassfs split import   store splits from such a file`,
		Args: subcommandsOnly("split", "create, list, show, delete, export or import"),
		RunE: func(c *cobra.Command, args []string) error { return c.Help() },
	}
	c.AddCommand(newSplitCreateCmd(), newSplitListCmd(), newSplitShowCmd(), newSplitDeleteCmd(), newSplitExportCmd(), newSplitImportCmd())
	return c
}

// withStore makes a command's RunE that opens the dataset named by db (which must exist)
// and runs run with it.
func withStore(db *dbFlags, run func(c *cobra.Command, args []string, st store.Store) error) func(c *cobra.Command, args []string) error {
	return func(c *cobra.Command, args []string) error {
		st, err := db.openStore(c.Context(), storeOpts{})
		if err != nil {
			return err
		}
		defer st.Close()
		return run(c, args, st)
	}
}

// createOpts are the flags of split create.
type createOpts struct {
	names           string
	ratios          string
	groupBy         string
	balance         string
	maxSamples      int
	seed            uint64
	folds           int
	tolerance       float64
	acceptShortfall bool
	replace         bool
	dryRun          bool
	progress        io.Writer // where the metadata scan reports progress (nil: nowhere)
}

func newSplitCreateCmd() *cobra.Command {
	var (
		db dbFlags
		o  createOpts
	)
	c := &cobra.Command{
		Use:   "create --dataset NAME [flags]",
		Short: "Make splits from metadata: entity-disjoint, class-balanced, seeded",
		Long: `create makes named splits of a dataset from its metadata and stores them in it.

Samples with the same values in the --group-by columns (a patient, a slide) form a group,
and a group never spans two splits. Splits get --ratios of the samples and each split gets
the classes in the --balance proportions: the dataset's own (original), equal (uniform),
or given weights per class in label order ("3:1") or by name ("normal=3,tumor=1").
--max-samples caps the total. The same data, flags and --seed give the same splits.

Groups are dealt round-robin to the splits without overflowing their targets (those
holding the largest share of a class first), the rest placed at random; samples are then
drawn round-robin across each split's groups (the method of Versaci and Busonera,
"Scaling deep learning data management with Cassandra DB", 2021). A split whose groups lack a class is scaled down as a whole so that its
balance holds; if that leaves it more than --tolerance short, nothing is stored unless
--accept-shortfall. The command prints what it achieved against what was asked.

--folds K makes K entity-disjoint folds for cross-validation instead: splits
<prefix>-<i>-train and <prefix>-<i>-val for i = 0..K-1, with --names giving the prefix.

Splits are written all at once: either every one is stored or none. An existing name fails
the command unless --replace.`,
		Example: `  cassfs split create -d tiles --group-by patient_id --ratios 7:2:1 --names train,val,test --seed 1
  cassfs split create -d tiles --group-by patient_id,slide --balance uniform --max-samples 100000
  cassfs split create -d tiles --group-by patient_id --folds 5 --names cv`,
		Args: noArgs("split create"),
		RunE: withStore(&db, func(c *cobra.Command, args []string, st store.Store) error {
			o.progress = c.ErrOrStderr()
			return createSplits(c.Context(), st, o, c.OutOrStdout())
		}),
	}
	db.register(c)
	f := c.Flags()
	f.StringVar(&o.names, "names", "train,val,test", "comma-separated split names (with --folds: the prefix, default fold)")
	f.StringVar(&o.ratios, "ratios", "7:2:1", "relative split sizes, one per name, e.g. 7:2:1 or 0.8,0.2")
	f.StringVar(&o.groupBy, "group-by", "", "comma-separated metadata columns that identify an entity (e.g. patient_id or patient_id,slide); default: every sample on its own")
	f.StringVar(&o.balance, "balance", "original", "class balance in every split: original, uniform, or weights (3:1 in label order, or normal=3,tumor=1)")
	f.IntVar(&o.maxSamples, "max-samples", 0, "cap on the samples over all splits (0: as many as the balance allows)")
	f.Uint64Var(&o.seed, "seed", 0, "seed of the assignment (same seed, same splits)")
	f.IntVar(&o.folds, "folds", 0, "make this many cross-validation folds instead of --ratios splits")
	f.Float64Var(&o.tolerance, "tolerance", 0.1, "largest accepted shortfall of a split below its asked size (0.1 = 10%)")
	f.BoolVar(&o.acceptShortfall, "accept-shortfall", false, "store splits even when the balance leaves one short by more than --tolerance")
	f.BoolVar(&o.replace, "replace", false, "replace splits of the same names")
	f.BoolVar(&o.dryRun, "dry-run", false, "print what would be made; store nothing")
	return c
}

// exactlyOne accepts one positional argument, described by what.
func exactlyOne(cmd, what string) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if len(args) != 1 {
			return usageError{fmt.Errorf("%s takes one %s, got %d arguments", cmd, what, len(args))}
		}
		return nil
	}
}

// subcommandsOnly is the Args of a command group such as "split": a word that is not one of
// its subcommands (listed in use) is a usage error saying which there are.
func subcommandsOnly(group, use string) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if len(args) > 0 {
			return usageError{fmt.Errorf("unknown %s command %q: use %s", group, args[0], use)}
		}
		return nil
	}
}

// objectArg is the Args of a command whose object (the dataset of dataset show, the cache
// directory of cache show) is named by its one argument, as split show names its split and
// mount its mountpoint, or by --flag, the older form, kept for scripts and --config files.
// Both at once must agree. The argument sets the flag, so a --config file cannot override it.
func objectArg(cmd, what, flag string) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		switch {
		case len(args) == 0:
			return nil
		case len(args) > 1:
			return usageError{fmt.Errorf("%s takes one %s, got %d arguments: %q", cmd, what, len(args), args)}
		}
		fl := c.Flags().Lookup(flag)
		if fl.Changed && fl.Value.String() != args[0] {
			return usageError{fmt.Errorf("%s: %s %q and --%s %q differ: give it once", cmd, what, args[0], flag, fl.Value.String())}
		}
		return c.Flags().Set(flag, args[0])
	}
}

func noArgs(cmd string) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if len(args) > 0 {
			return usageError{fmt.Errorf("%s takes no arguments, got %q", cmd, args)}
		}
		return nil
	}
}

func createSplits(ctx context.Context, st store.Store, o createOpts, out io.Writer) error {
	var groupBy []string
	for _, g := range strings.Split(o.groupBy, ",") {
		if g = strings.TrimSpace(g); g != "" {
			groupBy = append(groupBy, g)
		}
	}
	names := strings.Split(o.names, ",")
	for k := range names {
		names[k] = strings.TrimSpace(names[k])
	}
	if o.tolerance < 0 || o.tolerance >= 1 {
		return usageError{fmt.Errorf("--tolerance %v: want a fraction in [0, 1)", o.tolerance)}
	}
	if o.maxSamples < 0 {
		return usageError{fmt.Errorf("--max-samples %d: want 0 (no cap) or more", o.maxSamples)}
	}
	spec := splits.Spec{MaxSamples: o.maxSamples, Seed: o.seed, Tolerance: o.tolerance, AcceptShortfall: o.acceptShortfall}
	if o.tolerance == 0 {
		spec.Tolerance = 1e-9 // 0 means "the default" to splits.Create
	}
	switch {
	case o.folds != 0:
		if o.folds < 2 {
			return usageError{fmt.Errorf("--folds %d: cross-validation needs at least 2", o.folds)}
		}
		if o.names == "train,val,test" {
			names = []string{"fold"}
		}
		if len(names) != 1 {
			return usageError{fmt.Errorf("--folds takes one name in --names, the prefix of the folds' splits; got %q", o.names)}
		}
	default:
		r, err := splits.ParseRatios(o.ratios)
		if err != nil {
			return usageError{fmt.Errorf("--ratios: %w", err)}
		}
		if len(r) != len(names) {
			return usageError{fmt.Errorf("--names has %d splits (%s) but --ratios %d (%s): give one ratio per name", len(names), o.names, len(r), o.ratios)}
		}
		spec.Names, spec.Ratios = names, r
	}
	req := splits.Request{Spec: spec, Balance: o.balance, GroupBy: groupBy, Folds: o.folds, Progress: o.progress,
		Params: splits.Params{Command: "create", MaxSamples: o.maxSamples, Seed: o.seed, Folds: o.folds, Tolerance: o.tolerance, AcceptShortfall: o.acceptShortfall}}
	if o.folds != 0 {
		req.Prefix = names[0]
	}
	ns, params, rep, err := splits.Make(ctx, st, req)
	if rep != nil {
		rep.Print(out, st.Dataset(), groupBy)
	}
	var bad *splits.RequestError
	if errors.As(err, &bad) {
		return usageError{err}
	}
	if err != nil {
		return err
	}
	if o.dryRun {
		fmt.Fprintf(out, "dry run: would store %s\n", joinNames(ns))
		return nil
	}
	pj, _ := json.Marshal(params)
	rj, _ := json.Marshal(rep)
	if err := st.PutSplits(ctx, ns, string(pj), string(rj), o.replace); err != nil {
		if errors.Is(err, store.ErrExists) {
			return fmt.Errorf("%w; nothing was stored (use --replace to replace, or other --names)", err)
		}
		return err
	}
	fmt.Fprintf(out, "stored %s in dataset %s\n", joinNames(ns), st.Dataset())
	return nil
}

func joinNames(ns []store.NewSplit) string {
	var names []string
	for _, s := range ns {
		names = append(names, s.Name)
	}
	return strings.Join(names, ", ")
}

func newSplitListCmd() *cobra.Command {
	var db dbFlags
	c := &cobra.Command{
		Use:   "list --dataset NAME",
		Short: "List the stored splits",
		Args:  noArgs("split list"),
		RunE: withStore(&db, func(c *cobra.Command, args []string, st store.Store) error {
			return listSplits(c.Context(), st, c.OutOrStdout())
		}),
	}
	db.register(c)
	return c
}

func listSplits(ctx context.Context, st store.Store, out io.Writer) error {
	infos, err := st.Splits(ctx)
	if err != nil {
		return err
	}
	if len(infos) == 0 {
		fmt.Fprintf(out, "dataset %s has no stored splits (cassfs split create makes some); a mount shows \"all\"\n", st.Dataset())
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSAMPLES\tCREATED\tMADE BY")
	for _, in := range infos {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", in.Name, in.Size, in.Created.Format(time.RFC3339), splits.SummarizeParams(in.Params))
	}
	return tw.Flush()
}

func newSplitShowCmd() *cobra.Command {
	var db dbFlags
	c := &cobra.Command{
		Use:   "show --dataset NAME SPLIT",
		Short: "Show how a split was made and what it achieved",
		Args:  exactlyOne("split show", "SPLIT"),
		RunE: withStore(&db, func(c *cobra.Command, args []string, st store.Store) error {
			return showSplit(c.Context(), st, args[0], c.OutOrStdout())
		}),
	}
	db.register(c)
	return c
}

func showSplit(ctx context.Context, st store.Store, name string, out io.Writer) error {
	in, err := splits.Find(ctx, st, name)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "split %s of dataset %s: %d samples, created %s\n", in.Name, st.Dataset(), in.Size, in.Created.Format(time.RFC3339))
	var params any
	if json.Unmarshal([]byte(in.Params), &params) == nil {
		pj, _ := json.MarshalIndent(params, "", "  ")
		fmt.Fprintf(out, "made with: %s\n", pj)
	}
	var rep splits.Report
	if json.Unmarshal([]byte(in.Report), &rep) == nil && len(rep.Splits) > 0 {
		var p splits.Params
		json.Unmarshal([]byte(in.Params), &p)
		fmt.Fprintln(out, "achieved (with the splits made together):")
		rep.Print(out, st.Dataset(), p.GroupBy)
	}
	return nil
}

func newSplitDeleteCmd() *cobra.Command {
	var db dbFlags
	c := &cobra.Command{
		Use:   "delete --dataset NAME SPLIT...",
		Short: "Delete stored splits (all named ones, or none if one does not exist)",
		Args: func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError{errors.New("split delete takes the names of the splits to delete")}
			}
			return nil
		},
		RunE: withStore(&db, func(c *cobra.Command, args []string, st store.Store) error {
			if err := st.DeleteSplits(c.Context(), args); err != nil {
				return err
			}
			fmt.Fprintf(c.OutOrStdout(), "deleted %s from dataset %s\n", strings.Join(args, ", "), st.Dataset())
			return nil
		}),
	}
	db.register(c)
	return c
}

func newSplitExportCmd() *cobra.Command {
	var (
		db     dbFlags
		output string
	)
	c := &cobra.Command{
		Use:   "export --dataset NAME [-o FILE] [SPLIT...]",
		Short: "Write splits (default: all) to a JSON file",
		Long: `export writes the named splits (default: every stored one) as JSON:
{"format": "` + splits.ExportFormat + `", "dataset": ..., "splits": [{"name", "params", "report",
"members": [sample ids]}]}. import reads it back, into this or another copy of the dataset.`,
		RunE: withStore(&db, func(c *cobra.Command, args []string, st store.Store) error {
			return writeFileOrStdout(output, func(w io.Writer) error { return splits.Export(c.Context(), st, args, w) })
		}),
	}
	db.register(c)
	c.Flags().StringVarP(&output, "output", "o", "-", "file to write (- for standard output)")
	return c
}

// writeFileOrStdout writes through a temporary file renamed into place, so a failed export
// leaves no half-written file.
func writeFileOrStdout(path string, write func(io.Writer) error) error {
	if path == "-" {
		return write(os.Stdout)
	}
	f, err := renameio.NewPendingFile(path)
	if err != nil {
		return err
	}
	defer f.Cleanup()
	if err := write(f); err != nil {
		return err
	}
	return f.CloseAtomicallyReplace()
}

func newSplitImportCmd() *cobra.Command {
	var (
		db      dbFlags
		replace bool
	)
	c := &cobra.Command{
		Use:   "import --dataset NAME FILE",
		Short: "Store the splits of a file written by split export",
		Long: `import stores every split in FILE (written by split export) in the dataset, all at once:
every sample id must exist in the dataset and names must be new (or --replace), else
nothing is stored.`,
		Args: exactlyOne("split import", "FILE"),
		RunE: withStore(&db, func(c *cobra.Command, args []string, st store.Store) error {
			f, err := os.Open(args[0])
			if err != nil {
				return err
			}
			defer f.Close()
			return importSplits(c.Context(), st, f, args[0], replace, c.OutOrStdout())
		}),
	}
	db.register(c)
	c.Flags().BoolVar(&replace, "replace", false, "replace splits of the same names")
	return c
}

func importSplits(ctx context.Context, st store.Store, r io.Reader, source string, replace bool, out io.Writer) error {
	names, err := splits.Import(ctx, st, r, source, replace)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "imported %s into dataset %s\n", strings.Join(names, ", "), st.Dataset())
	return nil
}
