package main

import (
	"errors"
	"fmt"
	"sync"

	"github.com/cassfs/cassfs/synth"
	"github.com/spf13/cobra"
)

func newGenCmd() *cobra.Command {
	var o synth.Options
	var progress string
	c := &cobra.Command{
		Use:   "gen --out DIR [--count N]",
		Short: "Generate a synthetic image dataset: DIR/images/<class>/*.jpg|png and DIR/metadata.csv",
		Long: `gen writes a dataset of real, decodable JPEG (and some PNG) images in ImageFolder layout
under DIR/images, and DIR/metadata.csv with entity columns (path, patient_id, slide, x, y).
Classes are imbalanced (class c is drawn in proportion to c+1) and each patient has a
dominant class; every class gets at least one image, so --count must be at least
--classes. The output is a pure
function of the flags: the same --seed gives the same bytes.`,
		Example: `  cassfs gen --out /tmp/ds --count 2000
  cassfs ingest --dataset demo --csv /tmp/ds/metadata.csv /tmp/ds/images`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if o.Out == "" {
				return usageError{errors.New("--out is required")}
			}
			if err := synth.CheckCounts(o.Count, o.Classes); err != nil {
				return usageError{fmt.Errorf("--count %d --classes %d: %w", o.Count, o.Classes, err)}
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
			if o.Masks {
				fmt.Fprintf(c.OutOrStdout(), "and a mask per image in %s\n", synth.MaskRoot(o.Out))
			}
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
	f.BoolVar(&o.Masks, "masks", false, "also write a target per image, DIR/masks/<class>/<stem>.png: a 32x4 grayscale PNG whose first row is the image's SHA-256 and whose other rows are its class (for cassfs ingest --targets)")
	f.Uint64Var(&o.Seed, "seed", 1, "random seed")
	f.IntVar(&o.Workers, "workers", 2, "images encoded in parallel")
	f.StringVar(&progress, "progress", "auto", "progress display: auto, bar, lines, none")
	return c
}
