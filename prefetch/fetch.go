package prefetch

import (
	"context"

	"github.com/cassfs/cassfs/index"
	"github.com/cassfs/cassfs/store"
)

// StoreFetch reads samples of ix through r (a store.Store, or a wrapper around its blob read)
// and verifies each blob against the index (size, label, checksum), so corrupt data is an
// error, never bytes served to a reader. It gives Get no buffer: a reader that can hand over
// its own bytes (the Cassandra backend) then copies nothing.
//
// In a dataset with targets, a sample's fetch reads its blob and its target's at once (two
// requests in flight, one round trip) into one buffer: the blob, then the target
// (index.Index.BlobSize), each verified against its own checksum.
func StoreFetch(r store.BlobReader, ix *index.Index) *StoreFetcher {
	return &StoreFetcher{r: r, ix: ix}
}

// StoreFetcher is the Fetcher that reads from the store: the bottom of the read chain.
type StoreFetcher struct {
	r  store.BlobReader
	ix *index.Index
}

// Fetch implements Fetcher.
func (f *StoreFetcher) Fetch(ctx context.Context, i uint32) ([]byte, error) {
	r, ix := f.r, f.ix
	if ix.HasTargets() {
		return fetchWithTarget(ctx, r, ix, i)
	}
	b, err := r.Get(ctx, ix.ID(i), nil)
	if err != nil {
		return nil, err
	}
	if err := ix.Verify(i, b); err != nil {
		return nil, err
	}
	return b.Data, nil
}

// fetchWithTarget reads sample i's blob and its target's at once into one buffer, the blob
// first, and verifies each.
func fetchWithTarget(ctx context.Context, r store.BlobReader, ix *index.Index, i uint32) ([]byte, error) {
	n, tn := ix.Size(i), ix.TargetSize(i)
	buf := make([]byte, n+tn)
	var (
		tb   store.Blob
		terr error
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		tb, terr = r.Get(ctx, store.TargetID(ix.ID(i)), buf[n:n+tn:n+tn])
		if terr == nil {
			terr = ix.VerifyTarget(i, tb)
		}
	}()
	b, err := r.Get(ctx, ix.ID(i), buf[:n:n]) // capped: a longer blob must not reach the target's bytes
	if err == nil {
		err = ix.Verify(i, b)
	}
	<-done
	if err != nil {
		return nil, err
	}
	if terr != nil {
		return nil, terr
	}
	// A reader may not have used the buffer (it is a hint).
	if n > 0 && &b.Data[0] != &buf[0] {
		copy(buf[:n], b.Data)
	}
	if tn > 0 && &tb.Data[0] != &buf[n] {
		copy(buf[n:], tb.Data)
	}
	return buf, nil
}

// FetchBlock implements BlockFetcher: the samples' blobs in one block of the store
// (store.GetBlock: one request per node owning some of them, or one Get each where the
// reader reads no blocks), each verified as Fetch verifies it. A dataset with targets
// reads each sample by Fetch (a blob and its target), all at once.
func (f *StoreFetcher) FetchBlock(ctx context.Context, samples []uint32, got func(k int, data []byte, err error)) {
	ix := f.ix
	if ix.HasTargets() {
		FetchBlock(ctx, fetchOnly{f}, samples, got)
		return
	}
	store.GetBlock(ctx, f.r, ix.IDs(samples), func(k int, b store.Blob, err error) {
		if err == nil {
			err = ix.Verify(samples[k], b)
		}
		if err != nil {
			got(k, nil, err)
			return
		}
		got(k, b.Data, nil)
	})
}

// fetchOnly hides a fetcher's FetchBlock: FetchBlock then fetches sample by sample.
type fetchOnly struct{ f Fetcher }

func (o fetchOnly) Fetch(ctx context.Context, i uint32) ([]byte, error) { return o.f.Fetch(ctx, i) }
