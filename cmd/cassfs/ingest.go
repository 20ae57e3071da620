package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/cassfs/cassfs/ingest"
	"github.com/cassfs/cassfs/synth"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

func newIngestCmd() *cobra.Command {
	var (
		db       dbFlags
		csvPath  string
		csvKey   string
		maxSize  int64
		workers  int
		rf       int
		progress string
	)
	c := &cobra.Command{
		Use:   "ingest --dataset NAME [--csv FILE] ROOT",
		Short: "Load an ImageFolder tree (ROOT/<class>/<file>) and a metadata CSV into a dataset",
		Long: `ingest loads ROOT/<class>/<file> into the dataset, creating it if needed.

Labels are the class directory names in bytewise order (what DALI and torchvision do).
With --csv, each CSV row gives metadata for one file, keyed by its path "<class>/<file>"
in the --csv-key column; every other column becomes a metadata column of the dataset
(names: lowercase letters, digits and '_').

Re-running the same ingest writes no duplicates and resumes an interrupted one. Files that
cannot be ingested (unreadable, empty, over --max-size, hidden, nested, directly in ROOT,
or with an extension DALI and torchvision cannot read) are listed with their reason and
the exit status is 1; the rest is ingested. Problems in the CSV stop the ingest before
anything is written. Exit status: 0 all ingested, 1 something was not, 2 bad usage.`,
		Example: `  cassfs ingest --dataset tiles --csv meta.csv ./tiles
  cassfs ingest --hosts 10.0.0.5,10.0.0.6 --dataset imagenet --replication 3 ./train`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError{fmt.Errorf("ingest takes one ROOT directory, got %d arguments", len(args))}
			}
			return nil
		},
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
				Root:      args[0],
				CSV:       csvPath,
				KeyColumn: csvKey,
				MaxSize:   maxSize,
				Workers:   workers,
				OnPlan:    pr.plan,
				Progress:  func(p ingest.Progress) { pr.update(p.Files, p.Bytes) },
			})
			if err != nil {
				return err
			}
			ctx := c.Context()
			st, err := db.open(ctx, true, rf)
			if err != nil {
				return err
			}
			defer st.Close()
			rep, err := plan.Run(ctx, st)
			pr.finish()
			printReport(c.OutOrStdout(), db.dataset, rep)
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
	f.Int64Var(&maxSize, "max-size", ingest.DefaultMaxSize, "largest file accepted, in bytes")
	f.IntVar(&workers, "workers", 16, "files read and written in parallel")
	f.IntVar(&rf, "replication", 1, "replication factor of a newly created dataset (SimpleStrategy)")
	f.StringVar(&progress, "progress", "auto", "progress display: auto (a bar on a terminal, lines otherwise), bar, lines, none")
	return c
}

func printReport(w io.Writer, dataset string, rep ingest.Report) {
	for _, s := range rep.Skipped {
		fmt.Fprintf(w, "skipped %s: %s\n", s.Path, s.Reason)
	}
	secs := rep.Elapsed.Seconds()
	rate := 0.0
	if secs > 0 {
		rate = float64(rep.Written) / secs
	}
	fmt.Fprintf(w, "dataset %s: %d classes; %d files written (%.1f MB), %d unchanged, %d skipped; %.1fs, %.0f files/s, %.1f MB/s\n",
		dataset, len(rep.Classes), rep.Written, float64(rep.Bytes)/1e6, rep.Unchanged, len(rep.Skipped),
		secs, rate, float64(rep.Bytes)/1e6/max(secs, 1e-9))
}

// progressView shows long work: a bar on a terminal, a line every few seconds otherwise.
type progressView struct {
	mode  string
	what  string
	out   io.Writer
	mu    sync.Mutex
	bar   *progressbar.ProgressBar // guarded by mu
	total int64                    // guarded by mu
	last  time.Time                // guarded by mu
	start time.Time
}

func newProgress(out io.Writer, mode, what string) *progressView {
	if mode == "auto" {
		mode = "lines"
		if f, ok := out.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			mode = "bar"
		}
	}
	return &progressView{mode: mode, what: what, out: out, start: time.Now(), last: time.Now()}
}

func (p *progressView) plan(files int, bytes int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.total = int64(files)
	if p.mode == "bar" {
		p.bar = progressbar.NewOptions64(int64(files),
			progressbar.OptionSetWriter(p.out),
			progressbar.OptionSetDescription(p.what),
			progressbar.OptionShowCount(),
			progressbar.OptionShowIts(),
			progressbar.OptionSetItsString("files"),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionFullWidth(),
			progressbar.OptionSetPredictTime(true),
		)
	}
}

func (p *progressView) update(n, bytes int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.bar != nil:
		p.bar.Set64(n)
	case p.mode == "lines" && (time.Since(p.last) >= 5*time.Second || n == p.total):
		p.last = time.Now()
		mb := ""
		if bytes > 0 {
			mb = fmt.Sprintf(", %.1f MB", float64(bytes)/1e6)
		}
		fmt.Fprintf(p.out, "%s: %d/%d files%s, %.0f files/s\n", p.what, n, p.total, mb, float64(n)/time.Since(p.start).Seconds())
	}
}

func (p *progressView) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar != nil {
		p.bar.Finish()
		fmt.Fprintln(p.out)
	}
}

func newGenCmd() *cobra.Command {
	var o synth.Options
	var progress string
	c := &cobra.Command{
		Use:   "gen --out DIR [--count N]",
		Short: "Generate a synthetic image dataset: DIR/images/<class>/*.jpg|png and DIR/metadata.csv",
		Long: `gen writes a dataset of real, decodable JPEG (and some PNG) images in ImageFolder layout
under DIR/images, and DIR/metadata.csv with entity columns (path, patient_id, slide, x, y).
Classes are imbalanced and each patient has a dominant class. The output is a pure
function of the flags: the same --seed gives the same bytes.`,
		Example: `  cassfs gen --out /tmp/ds --count 2000
  cassfs ingest --dataset demo --csv /tmp/ds/metadata.csv /tmp/ds/images`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if o.Out == "" {
				return usageError{errors.New("--out is required")}
			}
			if o.Count <= 0 || o.Classes <= 0 {
				return usageError{errors.New("--count and --classes must be positive")}
			}
			pr := newProgress(c.ErrOrStderr(), progress, "gen")
			pr.plan(o.Count, 0)
			var done int64
			var mu sync.Mutex
			o.Progress = func(int) {
				mu.Lock()
				done++
				n := done
				mu.Unlock()
				pr.update(n, 0)
			}
			err := synth.Generate(c.Context(), o)
			pr.finish()
			if err != nil {
				return err
			}
			root, csvPath := synth.Layout(o.Out)
			fmt.Fprintf(c.OutOrStdout(), "generated %d images in %s, metadata in %s\n", o.Count, root, csvPath)
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&o.Out, "out", "", "output directory (required)")
	f.IntVar(&o.Count, "count", 2000, "number of images")
	f.IntVar(&o.Classes, "classes", 4, "number of classes")
	f.IntVar(&o.MeanSize, "mean-size", 110_000, "mean file size in bytes")
	f.Float64Var(&o.PNGFraction, "png-fraction", 0.1, "share of PNG images (0 for none)")
	f.IntVar(&o.Patients, "patients", 0, "number of patients (default count/25)")
	f.Uint64Var(&o.Seed, "seed", 1, "random seed")
	f.IntVar(&o.Workers, "workers", 2, "images encoded in parallel")
	f.StringVar(&progress, "progress", "auto", "progress display: auto, bar, lines, none")
	return c
}
