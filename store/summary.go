package store

import (
	"context"
	"maps"
	"slices"
)

// Summary is what one scan of a dataset's metadata tells (cassfs dataset show).
type Summary struct {
	Labels   []string // class names, by label
	Columns  []string // metadata columns
	Samples  int64
	Bytes    int64   // the samples' sizes, summed
	PerClass []int64 // samples by label
	// Filled is how many samples have a value in each metadata column.
	Filled      map[string]int64
	Targets     int64    // samples with a target
	TargetBytes int64    // their targets' sizes, summed
	TargetExts  []string // the targets' extensions, sorted
}

// Summarize scans st's metadata once and sums it up.
func Summarize(ctx context.Context, st Store) (Summary, error) {
	var s Summary
	var err error
	if s.Labels, err = st.Labels(ctx); err != nil {
		return Summary{}, err
	}
	if s.Columns, err = st.Columns(ctx); err != nil {
		return Summary{}, err
	}
	s.PerClass = make([]int64, len(s.Labels))
	s.Filled = map[string]int64{}
	exts := map[string]bool{}
	err = st.Scan(ctx, func(x Sample) error {
		s.Samples++
		s.Bytes += x.Size
		if x.Target != nil {
			s.Targets++
			s.TargetBytes += x.Target.Size
			exts[x.Target.Ext] = true
		}
		if x.Label >= 0 && x.Label < len(s.PerClass) {
			s.PerClass[x.Label]++
		}
		for k, v := range x.Meta {
			if v != "" {
				s.Filled[k]++
			}
		}
		return nil
	})
	if err != nil {
		return Summary{}, err
	}
	s.TargetExts = slices.Sorted(maps.Keys(exts))
	return s, nil
}
