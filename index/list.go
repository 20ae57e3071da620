package index

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/cassfs/cassfs/store"
	"github.com/dustin/go-humanize"
)

// List prints, as cassfs dataset list does, a line for each dataset of names, each read from the store open
// gives. A dataset that cannot be read is named on errOut with the reason, the others are
// still listed, and the error says how many failed: a count is printed only if it was read.
func List(ctx context.Context, names []string, open func(context.Context, string) (store.Store, error), out, errOut io.Writer) error {
	if len(names) == 0 {
		fmt.Fprintln(out, "the cluster holds no dataset (cassfs ingest makes one)")
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSAMPLES\tBYTES\tCLASSES\tSPLITS\tCREATED")
	var failed []string
	for _, n := range names {
		row, err := datasetRow(ctx, n, open)
		if err != nil {
			failed = append(failed, n)
			fmt.Fprintf(errOut, "cassfs: dataset %s could not be read: %v\n", n, err)
			continue
		}
		fmt.Fprintln(tw, row)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d of %d datasets could not be read (%s; see above): run the command again, or look at the database's health", len(failed), len(names), strings.Join(failed, ", "))
	}
	return nil
}

// datasetRow is a dataset's line of dataset list.
func datasetRow(ctx context.Context, name string, open func(context.Context, string) (store.Store, error)) (string, error) {
	st, err := open(ctx, name)
	if err != nil {
		return "", err
	}
	defer st.Close()
	c, err := Describe(ctx, st)
	if err != nil {
		return "", err
	}
	sp := strings.Join(c.Splits, ",")
	if sp == "" {
		sp = "-"
	}
	return fmt.Sprintf("%s\t%s\t%s\t%d\t%s\t%s", st.Dataset(), humanize.Comma(int64(c.Samples)), humanize.IBytes(uint64(c.Bytes)), c.Classes, sp, CreatedText(c.Created)), nil
}
