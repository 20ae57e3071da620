package prefetch

import (
	"context"
	"testing"
	"time"

	"github.com/cassfs/cassfs/splits"
)

// permStream is a split's stream: epoch e is splits.Permutation's order of n samples.
func permStream(n int) *testStream {
	return &testStream{"train", func(e uint64) []uint32 { return splits.Permutation(n, "train", 42, e) }}
}

// readEpochs reads epochs 0..epochs-1 of st in order, a lookup (Access) then a Get per
// sample, and returns the fetches each epoch made.
func readEpochs(t *testing.T, withFuture bool, n, epochs int) []int64 {
	t.Helper()
	f := newCountingFetch(testBlobSize)
	c := NewCache(f.fetch, CacheOptions{MaxBytes: int64(n/2) * testBlobSize})
	defer c.Close()
	opts := Options{Size: sizeOf, InitialWindow: 16, MaxWindow: 64, MaxInFlight: 16}
	if withFuture {
		opts.Samples = n
	}
	p := NewPrefetcher(c, opts)
	defer p.Close()
	st := permStream(n)
	var per []int64
	for e := range uint64(epochs) {
		before := f.total.Load()
		for _, i := range st.Order(e) {
			p.Access(st, e)
			if _, err := c.Get(context.Background(), i); err != nil {
				t.Fatal(err)
			}
		}
		settle(t, c)
		per = append(per, f.total.Load()-before)
		if err := c.checkInvariants(); err != nil {
			t.Fatal(err)
		}
	}
	return per
}

// With the future known, a cache of half the split keeps, from one epoch to the next, the
// blobs the next epoch reads first: later epochs fetch about half the split (the bound for
// a cache of half of it), where LRU fetches nearly all of it again.
func TestFutureEvictionKeepsWhatIsReadNext(t *testing.T) {
	const n, epochs = 2000, 4
	lru := readEpochs(t, false, n, epochs)
	min := readEpochs(t, true, n, epochs)
	t.Logf("fetches per epoch: LRU %v, known future %v", lru, min)
	for e := 1; e < epochs; e++ {
		if min[e] > n*65/100 {
			t.Errorf("epoch %d fetched %d of %d samples with the future known, want about half", e, min[e], n)
		}
		if min[e] >= lru[e]*85/100 {
			t.Errorf("epoch %d: %d fetches with the future known, %d with LRU: want clearly fewer", e, min[e], lru[e])
		}
	}
}

// Next: the reads before a sample is read again, from the readers' position, in this
// epoch or the next; Never for a sample no known order reads.
func TestPrefetcherNext(t *testing.T) {
	c := NewCache(newCountingFetch(10).fetch, CacheOptions{MaxBytes: 1 << 20})
	defer c.Close()
	still := time.Now()
	p := NewPrefetcher(c, Options{Size: sizeOf, Samples: 10, InitialWindow: 1, MaxWindow: 1, MaxInFlight: 1, Now: func() time.Time { return still }})
	defer p.Close()
	st := &testStream{"s", func(e uint64) []uint32 {
		if e == 0 {
			return []uint32{4, 2, 7, 1}
		}
		return []uint32{1, 7, 4, 2}
	}}
	p.Access(st, 0) // readers at position 0 (sample 4)
	p.Access(st, 0) // position 1 (sample 2)
	settle(t, c)
	for sample, want := range map[uint32]uint64{7: 100, 1: 101, 9: Never} {
		if got := p.Next(sample, 100); got != want {
			t.Errorf("at position 1: Next(%d) = %d, want %d", sample, got, want)
		}
	}
	p.Access(st, 0)
	p.Access(st, 0) // position 3, the last: the next epoch's order is known now
	settle(t, c)
	for sample, want := range map[uint32]uint64{1: 100, 7: 101, 4: 102, 2: 103, 9: Never} {
		if got := p.Next(sample, 100); got != want {
			t.Errorf("at the end of epoch 0: Next(%d) = %d, want %d", sample, got, want)
		}
	}
}
