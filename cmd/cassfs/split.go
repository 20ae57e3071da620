package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cassfs/cassfs/splits"
	"github.com/cassfs/cassfs/store"
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

// createParams is what split create stores with the splits: how they were made.
type createParams struct {
	Command         string    `json:"command"`
	Names           []string  `json:"names"`
	Ratios          []float64 `json:"ratios"`
	GroupBy         []string  `json:"group_by,omitempty"`
	Balance         string    `json:"balance"`
	Weights         []float64 `json:"weights,omitempty"`
	MaxSamples      int       `json:"max_samples,omitempty"`
	Seed            uint64    `json:"seed"`
	Folds           int       `json:"folds,omitempty"`
	Tolerance       float64   `json:"tolerance"`
	AcceptShortfall bool      `json:"accept_shortfall,omitempty"`
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

// parseBalance reads --balance against the dataset's classes.
func parseBalance(s string, labels []string) (string, []float64, error) {
	switch s {
	case "", splits.BalanceOriginal:
		return splits.BalanceOriginal, nil, nil
	case splits.BalanceUniform:
		return splits.BalanceUniform, nil, nil
	}
	w := make([]float64, len(labels))
	if strings.Contains(s, "=") {
		named := map[string]bool{}
		for _, kv := range strings.Split(s, ",") {
			k, v, _ := strings.Cut(kv, "=")
			k = strings.TrimSpace(k)
			c := slices.Index(labels, k)
			if c < 0 {
				return "", nil, fmt.Errorf("--balance %q: no class %q; the classes are %s", s, k, strings.Join(labels, ", "))
			}
			x, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return "", nil, fmt.Errorf("--balance %q: weight %q of class %s is not a number", s, v, k)
			}
			w[c], named[k] = x, true
		}
		for _, l := range labels {
			if !named[l] {
				return "", nil, fmt.Errorf("--balance %q: class %q has no weight; give every class one (0 leaves it out)", s, l)
			}
		}
		return splits.BalanceWeights, w, nil
	}
	parts := strings.Split(s, ":")
	if len(parts) != len(labels) {
		return "", nil, fmt.Errorf("--balance %q: want original, uniform, or %d weights (one per class: %s)", s, len(labels), strings.Join(labels, ", "))
	}
	for c, p := range parts {
		x, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil {
			return "", nil, fmt.Errorf("--balance %q: %q is not a number", s, p)
		}
		w[c] = x
	}
	return splits.BalanceWeights, w, nil
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
	labels, err := st.Labels(ctx)
	if err != nil {
		return err
	}
	if len(labels) == 0 {
		return fmt.Errorf("dataset %q has no classes: ingest data into it first", st.Dataset())
	}
	if spec.Balance, spec.Weights, err = parseBalance(o.balance, labels); err != nil {
		return usageError{err}
	}
	items, err := splits.LoadItems(ctx, st, groupBy, o.progress)
	if errors.Is(err, splits.ErrUnknownColumn) {
		return usageError{err}
	}
	if err != nil {
		return err
	}
	var made []splits.Made
	var rep *splits.Report
	if o.folds != 0 {
		made, rep, err = splits.Folds(items, labels, o.folds, names[0], spec)
	} else {
		made, rep, err = splits.Create(items, labels, spec)
	}
	if rep != nil {
		printSplitReport(out, st.Dataset(), rep, groupBy)
	}
	if err != nil {
		return err
	}
	params := createParams{Command: "create", Names: spec.Names, Ratios: spec.Ratios, GroupBy: groupBy, Balance: spec.Balance,
		Weights: spec.Weights, MaxSamples: o.maxSamples, Seed: o.seed, Folds: o.folds, Tolerance: o.tolerance, AcceptShortfall: o.acceptShortfall}
	if o.folds != 0 {
		params.Names = []string{names[0]}
	}
	var ns []store.NewSplit
	for _, m := range made {
		ns = append(ns, store.NewSplit{Name: m.Name, Members: m.Members})
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

// printSplitReport prints what was achieved against what was asked.
func printSplitReport(w io.Writer, dataset string, rep *splits.Report, groupBy []string) {
	grouping := "each sample on its own"
	if len(groupBy) > 0 {
		grouping = "grouped by " + strings.Join(groupBy, ",")
	}
	fmt.Fprintf(w, "dataset %s: %d samples in %d groups (%s); %d asked, %d placed\n", dataset, rep.Available, rep.Groups, grouping, rep.Asked, rep.Total)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "split\tsize (asked)\tratio (asked)\tgroups\t"
	for _, c := range rep.Classes {
		head += c + " (asked)\t"
	}
	fmt.Fprintln(tw, head)
	for _, s := range rep.Splits {
		line := fmt.Sprintf("%s\t%d (%d)\t%.3f (%.3f)\t%d\t", s.Name, s.Size, s.AskedSize, s.Ratio, s.AskedRatio, s.Groups)
		for c := range rep.Classes {
			line += fmt.Sprintf("%d (%d)\t", s.ByClass[c], s.AskedByClass[c])
		}
		fmt.Fprintln(tw, line)
	}
	tw.Flush()
	for _, s := range rep.Splits {
		if s.ShortfallNote != "" {
			fmt.Fprintf(w, "note: split %s is %.0f%% short: %s\n", s.Name, 100*s.Shortfall, s.ShortfallNote)
		}
	}
	for _, n := range rep.Notes {
		fmt.Fprintln(w, "note: "+n)
	}
	if rep.SharedGroups == 0 {
		fmt.Fprintln(w, "check: no group is in more than one split")
	} else {
		fmt.Fprintf(w, "check FAILED: %d groups are in more than one split\n", rep.SharedGroups)
	}
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
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", in.Name, in.Size, in.Created.Format(time.RFC3339), summarizeParams(in.Params))
	}
	return tw.Flush()
}

// summarizeParams is a one-line account of how a split was made.
func summarizeParams(raw string) string {
	var p createParams
	if json.Unmarshal([]byte(raw), &p) != nil || p.Command == "" {
		return "?"
	}
	if p.Command == "import" {
		return "import"
	}
	s := fmt.Sprintf("create seed=%d balance=%s", p.Seed, p.Balance)
	if p.Folds > 0 {
		s += fmt.Sprintf(" folds=%d", p.Folds)
	} else {
		var r []string
		for _, x := range p.Ratios {
			r = append(r, strconv.FormatFloat(x, 'g', -1, 64))
		}
		s += " ratios=" + strings.Join(r, ":")
	}
	if len(p.GroupBy) > 0 {
		s += " group-by=" + strings.Join(p.GroupBy, ",")
	}
	if p.MaxSamples > 0 {
		s += fmt.Sprintf(" max-samples=%d", p.MaxSamples)
	}
	return s
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

func findSplit(ctx context.Context, st store.Store, name string) (store.SplitInfo, error) {
	infos, err := st.Splits(ctx)
	if err != nil {
		return store.SplitInfo{}, err
	}
	for _, in := range infos {
		if in.Name == name {
			return in, nil
		}
	}
	var names []string
	for _, in := range infos {
		names = append(names, in.Name)
	}
	have := strings.Join(names, ", ")
	if have == "" {
		have = "none"
	}
	return store.SplitInfo{}, fmt.Errorf("split %q of dataset %q: %w (stored splits: %s)", name, st.Dataset(), store.ErrNotFound, have)
}

func showSplit(ctx context.Context, st store.Store, name string, out io.Writer) error {
	in, err := findSplit(ctx, st, name)
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
		var p createParams
		json.Unmarshal([]byte(in.Params), &p)
		fmt.Fprintln(out, "achieved (with the splits made together):")
		printSplitReport(out, st.Dataset(), &rep, p.GroupBy)
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
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := write(tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
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
