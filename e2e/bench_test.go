//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cassfs/cassfs/ingest"
	"github.com/cassfs/cassfs/store"
	"github.com/cassfs/cassfs/synth"
	"github.com/google/uuid"
)

// blobDataset is a dataset of 1,000 generated images of ~110 KB (always the same ones),
// ingested into a new dataset named from prefix, with its samples' ids and mean size.
func blobDataset(b *testing.B, prefix string) (store.Store, []uuid.UUID, int64) {
	dir := b.TempDir()
	if err := synth.Generate(context.Background(), synth.Options{Out: dir, Count: 1000, Classes: 4, MeanSize: 110_000, PNGFraction: 0.1, Seed: 11}); err != nil {
		b.Fatal(err)
	}
	root, _ := synth.Layout(dir)
	st := openStore(b, newDataset(b, prefix), true)
	plan, err := ingest.Prepare(ingest.Options{Root: root, NoSnapshot: true})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := plan.Run(context.Background(), st); err != nil {
		b.Fatal(err)
	}
	var ids []uuid.UUID
	var total int64
	if err := st.Scan(context.Background(), func(s store.Sample) error {
		ids = append(ids, s.ID)
		total += s.Size
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	return st, ids, total / int64(len(ids))
}

// BenchmarkStoreGet measures concurrent point reads of ~110 KB blobs from the real
// Cassandra: the ceiling any filesystem on top of the store is measured against. Each
// sub-benchmark keeps P reads in flight over b.N reads in total, cycling through the
// dataset (which fits Cassandra's page cache: this is the database and driver path, not
// the disk).
func BenchmarkStoreGet(b *testing.B) {
	st, ids, mean := blobDataset(b, "bench")

	for _, p := range []int{1, 8, 32, 128, 256} {
		b.Run(fmt.Sprintf("inflight=%d", p), func(b *testing.B) {
			b.SetBytes(mean)
			b.ReportAllocs()
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			for range p {
				wg.Add(1)
				go func() {
					defer wg.Done()
					buf := make([]byte, 0, 256<<10)
					for {
						i := next.Add(1) - 1
						if i >= int64(b.N) {
							return
						}
						blob, err := st.Get(context.Background(), ids[i%int64(len(ids))], buf)
						if err != nil {
							b.Error(err)
							return
						}
						buf = blob.Data
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "images/s")
		})
	}
}
