package index

import (
	"context"
	"errors"
	"time"

	"github.com/cassfs/cassfs/store"
)

// Catalogue is what `cassfs dataset list` shows of a dataset, every figure read.
type Catalogue struct {
	Samples, Classes int
	Bytes            int64    // of the samples' blobs (targets not counted)
	Splits           []string // stored, by name
	Created          time.Time
}

// Describe reads st's catalogue: when it was made, its index (a dataset read completely and
// found empty has zeros, not an error) and its stored splits.
func Describe(ctx context.Context, st store.Store) (Catalogue, error) {
	var c Catalogue
	var err error
	if c.Created, err = st.Created(ctx); err != nil {
		return c, err
	}
	ix, err := Load(ctx, st)
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
