package prefetch

import (
	"context"
	"testing"
	"time"

	"github.com/cassfs/cassfs/evict"
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
	c := NewCache(fetchFunc(f.fetch), CacheOptions{MaxBytes: int64(n/2) * testBlobSize})
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
// epoch or the next; a sample the readers just passed counts as still being read for
// readingSpan positions; evict.Never for a sample no known order reads.
func TestPrefetcherNext(t *testing.T) {
	const n = 300
	c := NewCache(fetchFunc(newCountingFetch(10).fetch), CacheOptions{MaxBytes: 1 << 20})
	defer c.Close()
	still := time.Now()
	p := NewPrefetcher(c, Options{Size: sizeOf, Samples: n + 1, InitialWindow: 1, MaxWindow: 1, MaxInFlight: 1, Now: func() time.Time { return still }})
	defer p.Close()
	// Epoch 0 reads 0, 1, ..., n-1; epoch 1 reads them backwards. Sample n is in neither.
	st := &testStream{"s", func(e uint64) []uint32 {
		o := make([]uint32, n)
		for k := range o {
			o[k] = uint32(k)
			if e == 1 {
				o[k] = uint32(n - 1 - k)
			}
		}
		return o
	}}
	for range 200 { // readers at position 199
		p.Access(st, 0)
	}
	settle(t, c)
	for sample, want := range map[uint32]uint64{
		250: 1000 + 50,                   // ahead in this epoch: 50 reads on
		190: 1000 + readingSpan - 10,     // passed 10 positions ago: still being read
		10:  1000 + n - 200 + n - 10 - 1, // passed long ago: next read in epoch 1 (known since readers entered epoch 0)
		n:   evict.Never,                 // in no order
	} {
		if got := p.Next(sample, 1000); got != want {
			t.Errorf("at position 199: Next(%d) = %d, want %d", sample, got, want)
		}
	}
	for range n - 200 { // the end of epoch 0
		p.Access(st, 0)
	}
	settle(t, c)
	if got, want := p.Next(10, 1000), uint64(1000+n-10-1); got != want {
		t.Errorf("at the end of epoch 0: Next(10) = %d, want %d (position %d of epoch 1)", got, want, n-10-1)
	}
	// Reuse: the read after the next one. Readers are at the end of epoch 0 (position
	// n-1): sample n-5 is being read, then read again at position 4 of epoch 1; sample 10
	// is read next in epoch 1 and not again as far as is known.
	for sample, want := range map[uint32]uint64{
		n - 5: 1000 + 4,
		10:    evict.Never,
		n:     evict.Never,
	} {
		if got := p.Reuse(sample, 1000); got != want {
			t.Errorf("at the end of epoch 0: Reuse(%d) = %d, want %d", sample, got, want)
		}
	}
}
