package prefetch

import (
	"context"

	"github.com/cassfs/cassfs/splits"
	"github.com/cassfs/cassfs/store"
)

// StoreFetch reads samples of ix from st and verifies each blob against the index (size,
// label, checksum), so corrupt data is an error, never bytes served to a reader. It gives
// Get no buffer: a store that can hand over its own bytes (the Cassandra backend) then
// copies nothing.
func StoreFetch(st store.Store, ix *splits.Index) Fetch {
	return func(ctx context.Context, i uint32) ([]byte, error) {
		b, err := st.Get(ctx, ix.ID(i), nil)
		if err != nil {
			return nil, err
		}
		if err := ix.Verify(i, b); err != nil {
			return nil, err
		}
		return b.Data, nil
	}
}
