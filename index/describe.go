package index

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cassfs/cassfs/store"
	"github.com/dustin/go-humanize"
	"github.com/google/uuid"
)

// Catalogue is what `cassfs dataset list` shows of a dataset, every figure read.
type Catalogue struct {
	Samples, Classes int
	Bytes            int64    // of the samples' blobs (targets not counted)
	Splits           []string // stored, by name
	Created          time.Time
}

// Describe reads st's catalogue: when it was made, its index (from its snapshot if it is
// current; a dataset read completely and found empty has zeros, not an error) and its
// stored splits.
func Describe(ctx context.Context, st store.Store) (Catalogue, error) {
	var c Catalogue
	var err error
	if c.Created, err = st.Created(ctx); err != nil {
		return c, err
	}
	// A current snapshot is the catalogue as a scan would read it, in a fraction of the time.
	ix, err := ReadSnapshot(ctx, st)
	if err != nil {
		ix, err = Load(ctx, st)
	}
	if errors.Is(err, ErrEmpty) {
		return c, nil // made but never filled
	}
	if err != nil {
		return c, err
	}
	c.Samples, c.Classes, c.Bytes = ix.Len(), len(ix.Labels()), ix.TotalSize()
	infos, err := st.Splits(ctx)
	if err != nil {
		return c, err
	}
	for _, in := range infos {
		c.Splits = append(c.Splits, in.Name)
	}
	return c, nil
}

// summarize sums st's catalogue up from its snapshot if it is current, else by a scan.
func summarize(ctx context.Context, st store.Store) (store.Summary, error) {
	ix, err := ReadSnapshot(ctx, st)
	if err != nil {
		return store.Summarize(ctx, st)
	}
	cols, err := st.Columns(ctx)
	if err != nil {
		return store.Summary{}, err
	}
	return ix.Summary(cols), nil
}

// Summary is what store.Summarize reads from a scan, from the index: columns are the
// dataset's metadata columns (a column no sample has a value in is not in the index).
func (ix *Index) Summary(columns []string) store.Summary {
	s := store.Summary{Labels: slices.Clone(ix.labels), Columns: columns, Samples: int64(ix.Len()), Bytes: ix.TotalSize(),
		PerClass: make([]int64, len(ix.labels)), Filled: map[string]int64{}}
	for _, l := range ix.label {
		s.PerClass[l]++
	}
	for _, c := range ix.meta {
		var n int64
		for _, r := range c.ref {
			if r != 0 {
				n++
			}
		}
		if n > 0 {
			s.Filled[c.name] = n
		}
	}
	if t := ix.targets; t != nil {
		s.Targets = s.Samples
		for _, size := range t.size {
			s.TargetBytes += int64(size)
		}
		s.TargetExts = slices.Sorted(slices.Values(t.exts))
	}
	return s
}

// CreatedText shows when a dataset was made; "-" if that was not recorded (made by an
// older cassfs).
func CreatedText(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05 MST")
}

// Show writes what `cassfs dataset show` prints: the dataset's size, classes with their
// counts, targets, metadata columns and their fill, and stored splits.
func Show(ctx context.Context, st store.Store, out io.Writer) error {
	sum, err := summarize(ctx, st)
	if err != nil {
		return err
	}
	samples := sum.Samples
	created, err := st.Created(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "dataset %s: %s samples, %s, created %s\n", st.Dataset(), humanize.Comma(samples), humanize.IBytes(uint64(sum.Bytes)), CreatedText(created))
	if sum.Targets > 0 {
		fmt.Fprintf(out, "targets: %s of %s samples, %s (%s)\n", humanize.Comma(sum.Targets), humanize.Comma(samples), humanize.IBytes(uint64(sum.TargetBytes)), strings.Join(sum.TargetExts, " "))
	} else {
		fmt.Fprintln(out, "targets: none (cassfs ingest --targets adds them)")
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\nCLASS\tLABEL\tSAMPLES")
	for l, n := range sum.Labels {
		fmt.Fprintf(tw, "%s\t%d\t%s\n", n, l, humanize.Comma(sum.PerClass[l]))
	}
	if len(sum.Columns) > 0 {
		fmt.Fprintln(tw, "\nMETADATA COLUMN\tFILLED\t")
		for _, c := range sum.Columns {
			fmt.Fprintf(tw, "%s\t%s of %s\t\n", c, humanize.Comma(sum.Filled[c]), humanize.Comma(samples))
		}
	} else {
		fmt.Fprintln(tw, "\n(no metadata columns)\t\t")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	infos, err := st.Splits(ctx)
	if err != nil {
		return err
	}
	if len(infos) == 0 {
		fmt.Fprintln(out, "\nno stored splits (cassfs split create makes some)")
		return nil
	}
	// What changed since the splits were made: samples in none of them.
	inSome := map[uuid.UUID]bool{}
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\nSPLIT\tSAMPLES\tCREATED")
	for _, in := range infos {
		ids, err := st.SplitMembers(ctx, in.Name)
		if err != nil {
			return err
		}
		for _, id := range ids {
			inSome[id] = true
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", in.Name, humanize.Comma(int64(in.Size)), in.Created.Format("2006-01-02 15:04:05 MST"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if missing := samples - int64(len(inSome)); missing > 0 {
		fmt.Fprintf(out, "%s samples are in no split: ingested after the splits were made? (cassfs split create --replace makes them anew)\n", humanize.Comma(missing))
	}
	return nil
}
