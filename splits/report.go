package splits

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/cassfs/cassfs/store"
)

// Params is what `cassfs split create` stores with the splits (as JSON, store.SplitInfo.Params):
// how they were made.
type Params struct {
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

// ParseBalance reads a balance (--balance) against the dataset's classes: original,
// uniform, one weight per class in label order (w0:w1:...), or CLASS=WEIGHT for every class.
// It returns the mode of Spec.Balance and, for BalanceWeights, the weights.
func ParseBalance(s string, labels []string) (string, []float64, error) {
	switch s {
	case "", BalanceOriginal:
		return BalanceOriginal, nil, nil
	case BalanceUniform:
		return BalanceUniform, nil, nil
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
		return BalanceWeights, w, nil
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
	return BalanceWeights, w, nil
}

// Print writes what was achieved against what was asked, as a table, with the notes and the
// check that no group is in two splits; groupBy names the grouping columns.
func (rep *Report) Print(w io.Writer, dataset string, groupBy []string) {
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

// SummarizeParams is a one-line account of how a split was made, from its stored Params
// ("?" if they cannot be read).
func SummarizeParams(raw string) string {
	var p Params
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

// Find returns the stored split name, or an error wrapping store.ErrNotFound that lists the
// stored ones.
func Find(ctx context.Context, st store.Store, name string) (store.SplitInfo, error) {
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

// Request is what Make is asked for: the Spec (Balance and Weights are read from Balance
// against the dataset's classes), the metadata columns samples are grouped by, Folds (0: the
// splits of Spec.Names; else that many folds named Prefix-K), and how they were asked for
// (Params: Command and the flags' values; Make fills in what it decides).
type Request struct {
	Spec     Spec
	Balance  string
	GroupBy  []string
	Folds    int
	Prefix   string
	Params   Params
	Progress io.Writer // where the metadata scan reports progress (nil: nowhere)
}

// RequestError is a request the dataset cannot satisfy as asked: a balance that does not fit
// its classes, a column it does not have. The caller's mistake, not the database's.
type RequestError struct{ Err error }

func (e *RequestError) Error() string { return e.Err.Error() }
func (e *RequestError) Unwrap() error { return e.Err }

// Make reads the dataset's classes and items and makes the splits r asks for, returning
// them with the Params to store beside them. The Report, if not nil, says what was
// achieved, also when Make fails because a split fell short. Nothing is stored.
func Make(ctx context.Context, st store.Store, r Request) ([]store.NewSplit, Params, *Report, error) {
	p := r.Params
	labels, err := st.Labels(ctx)
	if err != nil {
		return nil, p, nil, err
	}
	if len(labels) == 0 {
		return nil, p, nil, fmt.Errorf("dataset %q has no classes: ingest data into it first", st.Dataset())
	}
	spec := r.Spec
	if spec.Balance, spec.Weights, err = ParseBalance(r.Balance, labels); err != nil {
		return nil, p, nil, &RequestError{err}
	}
	items, err := LoadItems(ctx, st, r.GroupBy, r.Progress)
	if errors.Is(err, ErrUnknownColumn) {
		return nil, p, nil, &RequestError{err}
	}
	if err != nil {
		return nil, p, nil, err
	}
	var made []Made
	var rep *Report
	if r.Folds != 0 {
		made, rep, err = Folds(items, labels, r.Folds, r.Prefix, spec)
	} else {
		made, rep, err = Create(items, labels, spec)
	}
	if err != nil {
		return nil, p, rep, err
	}
	p.Names, p.Ratios, p.GroupBy, p.Balance, p.Weights = spec.Names, spec.Ratios, r.GroupBy, spec.Balance, spec.Weights
	if r.Folds != 0 {
		p.Names = []string{r.Prefix}
	}
	ns := make([]store.NewSplit, 0, len(made))
	for _, m := range made {
		ns = append(ns, store.NewSplit{Name: m.Name, Members: m.Members})
	}
	return ns, p, rep, nil
}
