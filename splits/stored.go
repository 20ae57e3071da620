package splits

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cassfs/cassfs/index"
	"github.com/cassfs/cassfs/store"
	"github.com/google/uuid"
)

// ErrUnknownColumn is wrapped by LoadItems's error for a group-by column the dataset lacks.
var ErrUnknownColumn = errors.New("no such metadata column")

// ErrUnknownSplit is wrapped by LoadStored's error for a split named but not stored.
var ErrUnknownSplit = errors.New("no such split")

// LoadStored returns the splits a mount shows: All(ix) and the stored ones selected by
// which ("*" for every one, "" for none, else comma-separated names), with members as
// canonical indices of ix. A stored split that lists samples missing from the dataset is
// left out with a warning: it was made before those samples were removed, and serving part
// of it would change what it means. It is FetchStored then Resolve.
func LoadStored(ctx context.Context, st store.Store, ix *index.Index, which string, log *slog.Logger) ([]*Split, error) {
	f, err := FetchStored(ctx, st, which, log)
	if err != nil {
		return nil, err
	}
	return f.Resolve(ix, log), nil
}

// Stored is what FetchStored read: the selected stored splits' member ids, not yet
// resolved against an index.
type Stored struct {
	names []string
	ids   [][]uuid.UUID
}

// FetchStored reads the stored splits selected by which (see LoadStored) from st. It needs
// no index, so a mount runs it while the index loads: at long round trips each is a few
// round trips in series. The splits' members are read in parallel.
func FetchStored(ctx context.Context, st store.Store, which string, log *slog.Logger) (*Stored, error) {
	infos, err := st.Splits(ctx)
	if err != nil {
		return nil, err
	}
	var names []string
	switch strings.TrimSpace(which) {
	case "*":
		for _, in := range infos {
			names = append(names, in.Name)
		}
	case "":
	default:
		for _, n := range strings.Split(which, ",") {
			n = strings.TrimSpace(n)
			if !slices.ContainsFunc(infos, func(in store.SplitInfo) bool { return in.Name == n }) {
				return nil, fmt.Errorf("dataset %q has no split %q (see cassfs split list): %w", st.Dataset(), n, ErrUnknownSplit)
			}
			names = append(names, n)
		}
	}
	names = slices.DeleteFunc(names, func(n string) bool {
		if ValidName(n) != nil {
			log.Warn("stored split has a name that cannot be a directory; not shown", "split", n)
			return true
		}
		return false
	})
	f := &Stored{names: names, ids: make([][]uuid.UUID, len(names))}
	// Every split is read to the end and every failure is reported (errors.Join), so this is
	// not an errgroup, whose Wait keeps only the first error.
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for k, n := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.ids[k], errs[k] = st.SplitMembers(ctx, n)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return f, nil
}

// Resolve returns All(ix) and the fetched splits with members as canonical indices of ix,
// leaving out (with a warning) those that list samples ix lacks or list one twice.
func (f *Stored) Resolve(ix *index.Index, log *slog.Logger) []*Split {
	out := []*Split{All(ix)}
	for k, n := range f.names {
		ids := f.ids[k]
		s := &Split{Name: n, Members: make([]uint32, 0, len(ids))}
		missing := 0
		for _, id := range ids {
			i, ok := ix.Find(id)
			if !ok {
				missing++
				continue
			}
			s.Members = append(s.Members, i)
		}
		if missing > 0 {
			log.Warn("stored split lists samples the dataset no longer has; not shown (create it again)", "split", n, "missing", missing, "members", len(ids))
			continue
		}
		slices.Sort(s.Members)
		if len(slices.Compact(slices.Clone(s.Members))) != len(s.Members) {
			log.Warn("stored split lists a sample twice; not shown (create it again)", "split", n)
			continue
		}
		out = append(out, s)
		log.Info("split loaded", "split", n, "samples", len(s.Members))
	}
	return out
}

// LoadItems reads every sample's id, label and group key (the values of the groupBy
// columns; each sample its own group if none), reporting progress to progress (nil:
// nowhere). A column the dataset lacks wraps ErrUnknownColumn; a sample without a value in
// a groupBy column is an error naming it.
func LoadItems(ctx context.Context, st store.Store, groupBy []string, progress io.Writer) ([]Item, error) {
	if progress == nil {
		progress = io.Discard
	}
	start, last := time.Now(), time.Now()
	fmt.Fprintf(progress, "reading the metadata of dataset %s...\n", st.Dataset())
	cols, err := st.Columns(ctx)
	if err != nil {
		return nil, err
	}
	for _, g := range groupBy {
		if !slices.Contains(cols, g) {
			have := strings.Join(cols, ", ")
			if have == "" {
				have = "none (ingest with --csv to add metadata)"
			}
			return nil, fmt.Errorf("--group-by: dataset %q has no metadata column %q; its columns are: %s: %w", st.Dataset(), g, have, ErrUnknownColumn)
		}
	}
	var items []Item
	missing := map[string][]string{} // column → the first sample names lacking it
	nmissing := map[string]int{}
	add := func(id uuid.UUID, label int, name string, value func(column string) string) {
		it := Item{ID: id, Label: label}
		if len(groupBy) == 0 {
			it.Group = string(id[:])
		} else {
			vals := make([]string, len(groupBy))
			for k, g := range groupBy {
				vals[k] = value(g)
				if vals[k] == "" {
					nmissing[g]++
					// The first three by name: the same examples whatever the order read.
					m := missing[g]
					if at, _ := slices.BinarySearch(m, name); at < 3 {
						missing[g] = slices.Insert(m, at, name)[:min(len(m)+1, 3)]
					}
				}
			}
			it.Group = strings.Join(vals, "\x1f")
		}
		items = append(items, it)
	}
	// The items' order does not matter (Create); a current index snapshot holds the same
	// samples as a scan, in a fraction of the time.
	if ix, serr := index.ReadSnapshot(ctx, st); serr == nil {
		for i := range uint32(ix.Len()) {
			add(ix.ID(i), ix.Label(i), ix.Path(i), func(column string) string {
				if c, ok := ix.Column(column); ok {
					v, _ := ix.Meta(i, c)
					return string(v)
				}
				return ""
			})
		}
	} else if err = st.Scan(ctx, func(s store.Sample) error {
		add(s.ID, s.Label, s.Name, func(column string) string { return s.Meta[column] })
		if time.Since(last) > 5*time.Second {
			last = time.Now()
			fmt.Fprintf(progress, "  %d samples read\n", len(items))
		}
		return nil
	}); err != nil {
		return nil, err
	}
	fmt.Fprintf(progress, "read %d samples in %.1fs\n", len(items), time.Since(start).Seconds())
	for _, g := range groupBy {
		if n := nmissing[g]; n > 0 {
			return nil, fmt.Errorf("--group-by %s: %d sample(s) have no value in it (e.g. %s); a sample without an entity cannot be kept apart from others: fill it in the metadata CSV and ingest again, or group by other columns",
				g, n, strings.Join(missing[g], ", "))
		}
	}
	return items, nil
}

// ExportFormat is the format tag of ExportFile.
const ExportFormat = "cassfs-splits/v1"

// ExportFile is the JSON form of stored splits (cassfs split export and import).
type ExportFile struct {
	Format  string        `json:"format"`
	Dataset string        `json:"dataset"`
	Splits  []ExportSplit `json:"splits"`
}

// ExportSplit is one split of an ExportFile.
type ExportSplit struct {
	Name    string          `json:"name"`
	Params  json.RawMessage `json:"params,omitempty"`
	Report  json.RawMessage `json:"report,omitempty"`
	Members []uuid.UUID     `json:"members"`
}

// Export writes the named stored splits (every one if names is empty) to w as an
// ExportFile.
func Export(ctx context.Context, st store.Store, names []string, w io.Writer) error {
	infos, err := st.Splits(ctx)
	if err != nil {
		return err
	}
	if len(names) == 0 {
		for _, in := range infos {
			names = append(names, in.Name)
		}
		if len(names) == 0 {
			return fmt.Errorf("dataset %q has no stored splits to export", st.Dataset())
		}
	}
	f := ExportFile{Format: ExportFormat, Dataset: st.Dataset()}
	for _, n := range names {
		k := slices.IndexFunc(infos, func(in store.SplitInfo) bool { return in.Name == n })
		if k < 0 {
			return fmt.Errorf("split %q of dataset %q: %w (see cassfs split list)", n, st.Dataset(), store.ErrNotFound)
		}
		in := infos[k]
		ids, err := st.SplitMembers(ctx, n)
		if err != nil {
			return err
		}
		f.Splits = append(f.Splits, ExportSplit{Name: n, Params: rawJSON(in.Params), Report: rawJSON(in.Report), Members: ids})
	}
	return json.NewEncoder(w).Encode(f)
}

func rawJSON(s string) json.RawMessage {
	if s == "" || !json.Valid([]byte(s)) {
		return nil
	}
	return json.RawMessage(s)
}

// Import stores every split of the ExportFile read from r (named source in errors) in st,
// all at once: every sample id must exist in the dataset and names must be new (or
// replace), else nothing is stored. It returns the names stored.
func Import(ctx context.Context, st store.Store, r io.Reader, source string, replace bool) ([]string, error) {
	var f ExportFile
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%s: not a split export file: %w", source, err)
	}
	if f.Format != ExportFormat {
		return nil, fmt.Errorf("%s: format %q, want %q (written by cassfs split export)", source, f.Format, ExportFormat)
	}
	if len(f.Splits) == 0 {
		return nil, fmt.Errorf("%s holds no splits", source)
	}
	known := map[uuid.UUID]bool{}
	if err := st.Scan(ctx, func(s store.Sample) error { known[s.ID] = true; return nil }); err != nil {
		return nil, err
	}
	var ns []store.NewSplit
	var names []string
	original := map[string]json.RawMessage{}
	for _, s := range f.Splits {
		if err := ValidName(s.Name); err != nil {
			return nil, fmt.Errorf("%s: %w", source, err)
		}
		seen := make(map[uuid.UUID]bool, len(s.Members))
		var unknown []string
		nunknown := 0
		for _, id := range s.Members {
			if seen[id] {
				return nil, fmt.Errorf("%s: split %q lists sample %s twice", source, s.Name, id)
			}
			seen[id] = true
			if !known[id] {
				nunknown++
				if len(unknown) < 3 {
					unknown = append(unknown, id.String())
				}
			}
		}
		if nunknown > 0 {
			return nil, fmt.Errorf("%s: split %q lists %d sample(s) not in dataset %q (e.g. %s); was it exported from another dataset (%q)? nothing was stored",
				source, s.Name, nunknown, st.Dataset(), strings.Join(unknown, ", "), f.Dataset)
		}
		members := slices.Clone(s.Members)
		slices.SortFunc(members, compareIDs)
		ns = append(ns, store.NewSplit{Name: s.Name, Members: members})
		names = append(names, s.Name)
		original[s.Name] = s.Params
	}
	pj, _ := json.Marshal(map[string]any{"command": "import", "source": filepath.Base(source), "from_dataset": f.Dataset, "params": original})
	report := ""
	if r0 := f.Splits[0].Report; r0 != nil {
		report = string(r0)
	}
	if err := st.PutSplits(ctx, ns, string(pj), report, replace); err != nil {
		if errors.Is(err, store.ErrExists) {
			return nil, fmt.Errorf("%w; nothing was stored (use --replace to replace)", err)
		}
		return nil, err
	}
	return names, nil
}
