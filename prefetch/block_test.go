package prefetch

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cassfs/cassfs/store"
)

// blockFetcher is a BlockFetcher over blobOf: it records the blocks it was asked for and
// the samples fetched alone; hold, if set, is waited for before a block is answered, and
// fail fails the samples it chooses.
type blockFetcher struct {
	mu     sync.Mutex
	blocks [][]uint32
	alone  []uint32
	hold   chan struct{}
	fail   func(i uint32) error
}

func (f *blockFetcher) Fetch(ctx context.Context, i uint32) ([]byte, error) {
	f.mu.Lock()
	f.alone = append(f.alone, i)
	f.mu.Unlock()
	if f.fail != nil {
		if err := f.fail(i); err != nil {
			return nil, err
		}
	}
	return blobOf(i, 100), nil
}

func (f *blockFetcher) FetchBlock(ctx context.Context, samples []uint32, got func(k int, data []byte, err error)) {
	f.mu.Lock()
	f.blocks = append(f.blocks, slices.Clone(samples))
	hold := f.hold
	f.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			for k := range samples {
				got(k, nil, ctx.Err())
			}
			return
		}
	}
	for k, i := range samples {
		if f.fail != nil {
			if err := f.fail(i); err != nil {
				got(k, nil, err)
				continue
			}
		}
		got(k, blobOf(i, 100), nil)
	}
}

func (f *blockFetcher) record() (blocks [][]uint32, alone []uint32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.blocks), slices.Clone(f.alone)
}

// TestPrefetchesGoInFullBlocks: prefetches issued together are read in blocks of
// BlockOptions.Samples, each sample in one block once; a part-filled block is sent at
// once when no block is in flight (flush), and waits while one is.
func TestPrefetchesGoInFullBlocks(t *testing.T) {
	f := &blockFetcher{hold: make(chan struct{})}
	c := NewCache(f, CacheOptions{MaxBytes: 1 << 20, Samples: 100, Block: BlockOptions{Samples: 8}})
	defer c.Close()
	for i := range uint32(20) {
		if !c.Prefetch(i, PrefetchOptions{Size: 100, MaxInFlight: 100}) {
			t.Fatalf("Prefetch(%d) refused", i)
		}
	}
	c.flush() // two full blocks in flight: the four queued wait
	waitFor(t, "two blocks sent", func() bool { b, _ := f.record(); return len(b) >= 2 })
	if blocks, _ := f.record(); len(blocks) != 2 || len(blocks[0]) != 8 || len(blocks[1]) != 8 {
		t.Fatalf("20 prefetches with two blocks of 8 in flight: blocks %v, want two of 8 (the rest waiting)", blocks)
	}
	close(f.hold) // the blocks answered: the four go out, as the answers flush them
	waitFor(t, "every prefetch cached", func() bool { return c.Stats().Prefetches == 0 })
	blocks, alone := f.record()
	var all []uint32
	for _, b := range blocks {
		all = append(all, b...)
	}
	slices.Sort(all)
	if len(alone) != 0 || len(blocks) != 3 || !slices.Equal(all, []uint32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19}) {
		t.Errorf("blocks %v, fetched alone %v; want 8, 8, 4: each sample once, none alone", blocks, alone)
	}
	for i := range uint32(20) {
		if !c.Has(i) {
			t.Errorf("sample %d not cached after its block", i)
		}
	}
	if s := c.Stats(); s.Blocks != 3 || s.BlockSamples != 20 {
		t.Errorf("stats: %d blocks of %d samples, want 3 of 20", s.Blocks, s.BlockSamples)
	}
	if err := c.checkInvariants(); err != nil {
		t.Error(err)
	}
}

// TestReaderNeverWaitsBehindABlock: a Get of a sample queued for a block that has not gone
// out fetches it alone at once; a Get of a sample in a block in flight past HedgeAfter
// fetches it alone as well, and the first answer wins.
func TestReaderNeverWaitsBehindABlock(t *testing.T) {
	f := &blockFetcher{hold: make(chan struct{})}
	c := NewCache(f, CacheOptions{MaxBytes: 1 << 20, Samples: 100, Block: BlockOptions{Samples: 4, HedgeAfter: 20 * time.Millisecond}})
	defer c.Close()
	for i := range uint32(6) { // a block of 4 in flight (held), 4 and 5 queued
		c.Prefetch(i, PrefetchOptions{Size: 100, MaxInFlight: 100})
	}
	c.flush()
	got, err := c.Get(context.Background(), 5)
	if err != nil || len(got) != 100 || got[0] != 5 {
		t.Fatalf("Get(5), queued: %d bytes, %v", len(got), err)
	}
	if _, alone := f.record(); !slices.Equal(alone, []uint32{5}) {
		t.Errorf("fetched alone %v after a Get of the queued 5, want [5]", alone)
	}
	start := time.Now()
	got, err = c.Get(context.Background(), 2) // in the held block
	if err != nil || len(got) != 100 || got[0] != 2 {
		t.Fatalf("Get(2), in a block held: %d bytes, %v", len(got), err)
	}
	if waited := time.Since(start); waited < 20*time.Millisecond {
		t.Errorf("Get(2) returned after %v, before HedgeAfter: not from the block's hedge", waited)
	}
	if _, alone := f.record(); !slices.Equal(alone, []uint32{5, 2}) {
		t.Errorf("fetched alone %v, want [5 2]", alone)
	}
	if h := c.Stats().BlockHedges; h != 1 {
		t.Errorf("%d block hedges, want 1", h)
	}
	close(f.hold)
	waitFor(t, "every prefetch cached", func() bool { return c.Stats().Prefetches == 0 })
	if err := c.checkInvariants(); err != nil {
		t.Error(err)
	}
}

// TestFailureInABlockIsItsSampleAlone: a sample a block fails fails alone: the others of its
// block are cached, and a reader of it gets its error.
func TestFailureInABlockIsItsSampleAlone(t *testing.T) {
	bad := errors.New("corrupt")
	f := &blockFetcher{fail: func(i uint32) error {
		if i == 3 {
			return bad
		}
		return nil
	}}
	c := NewCache(f, CacheOptions{MaxBytes: 1 << 20, Samples: 100, Block: BlockOptions{Samples: 8}})
	defer c.Close()
	for i := range uint32(8) {
		c.Prefetch(i, PrefetchOptions{Size: 100, MaxInFlight: 100})
	}
	waitFor(t, "the block answered", func() bool { return c.Stats().Prefetches == 0 })
	for i := range uint32(8) {
		if c.Has(i) != (i != 3) {
			t.Errorf("sample %d cached: %v, want %v", i, c.Has(i), i != 3)
		}
	}
	if _, err := c.Get(context.Background(), 3); !errors.Is(err, bad) {
		t.Errorf("Get(3) = %v, want its own error", err)
	}
}

// TestCloseEndsQueuedPrefetches: prefetches queued for a block that never filled end with
// Close, and a reader waiting on one is told.
func TestCloseEndsQueuedPrefetches(t *testing.T) {
	f := &blockFetcher{hold: make(chan struct{})}
	c := NewCache(f, CacheOptions{MaxBytes: 1 << 20, Samples: 100, Block: BlockOptions{Samples: 4, HedgeAfter: -1}})
	for i := range uint32(6) {
		c.Prefetch(i, PrefetchOptions{Size: 100, MaxInFlight: 100})
	}
	c.flush()
	done := make(chan error, 1)
	go func() {
		_, err := c.Get(context.Background(), 1) // in the held block; no hedge
		done <- err
	}()
	waitFor(t, "the Get to wait", func() bool { return c.Stats().Waits == 1 })
	c.Close()
	if err := <-done; err == nil {
		t.Error("a Get of a block's sample across Close: no error")
	}
	if s := c.Stats(); s.Prefetches != 0 || s.InFlight != 0 {
		t.Errorf("after Close: %d prefetches, %d fetches in flight", s.Prefetches, s.InFlight)
	}
}

// silentFetcher answers every sample of a block but sample 2.
type silentFetcher struct{ blockFetcher }

func (f *silentFetcher) FetchBlock(ctx context.Context, samples []uint32, got func(k int, data []byte, err error)) {
	for k, i := range samples {
		if i != 2 {
			got(k, blobOf(i, 100), nil)
		}
	}
}

// TestUnansweredSampleOfABlockFails: a sample a block's fetch never answers fails with an
// error; it is never cached empty.
func TestUnansweredSampleOfABlockFails(t *testing.T) {
	c := NewCache(&silentFetcher{}, CacheOptions{MaxBytes: 1 << 20, Samples: 100, Block: BlockOptions{Samples: 4}})
	defer c.Close()
	for i := range uint32(4) {
		c.Prefetch(i, PrefetchOptions{Size: 100, MaxInFlight: 100})
	}
	waitFor(t, "the block answered", func() bool { return c.Stats().Prefetches == 0 })
	if c.Has(2) || !c.Has(1) {
		t.Errorf("cached: sample 2 %v (never answered), sample 1 %v; want false, true", c.Has(2), c.Has(1))
	}
	if s := c.Stats(); s.FetchErrors != 1 {
		t.Errorf("%d fetch errors, want 1 (the unanswered sample)", s.FetchErrors)
	}
}

// TestAloneSamplesSkipBlocks: samples BlockOptions.Alone reports (the disk tier's) are
// fetched by themselves, the others in blocks.
func TestAloneSamplesSkipBlocks(t *testing.T) {
	f := &blockFetcher{}
	c := NewCache(f, CacheOptions{MaxBytes: 1 << 20, Samples: 100, Block: BlockOptions{Samples: 4, Alone: func(i uint32) bool { return i%2 == 0 }}})
	defer c.Close()
	for i := range uint32(8) {
		c.Prefetch(i, PrefetchOptions{Size: 100, MaxInFlight: 100})
	}
	c.flush()
	waitFor(t, "every prefetch cached", func() bool { return c.Stats().Prefetches == 0 })
	blocks, alone := f.record()
	slices.Sort(alone)
	var inBlocks []uint32
	for _, b := range blocks {
		inBlocks = append(inBlocks, b...)
	}
	slices.Sort(inBlocks)
	if !slices.Equal(alone, []uint32{0, 2, 4, 6}) || !slices.Equal(inBlocks, []uint32{1, 3, 5, 7}) {
		t.Errorf("fetched alone %v, in blocks %v; want the even ones alone, the odd ones in blocks", alone, inBlocks)
	}
}

// TestBlockWakesAllBeforePushing: a push of one sample of a block may wait for a reader of
// another (a record file's READ spans several samples, and the kernel holds its pages
// locked until it is answered), so every sample of a block is handed to its waiters before
// the first is pushed: a push waiting for a later sample of its own block gets it at once,
// not after BlockOptions.HedgeAfter.
func TestBlockWakesAllBeforePushing(t *testing.T) {
	f := &blockFetcher{}
	var c *Cache
	waited := make(chan time.Duration, 8)
	c = NewCache(f, CacheOptions{MaxBytes: 1 << 20, Samples: 100, Block: BlockOptions{Samples: 4, HedgeAfter: time.Minute},
		Push: func(i uint32, data []byte) bool {
			if i == 0 {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				start := time.Now()
				if _, err := c.Get(ctx, 3); err != nil {
					t.Errorf("a push of sample 0 waiting for sample 3 of its block: %v", err)
				}
				waited <- time.Since(start)
			}
			return true
		}})
	defer c.Close()
	for i := range uint32(4) {
		c.Prefetch(i, PrefetchOptions{Size: 100, MaxInFlight: 100})
	}
	select {
	case d := <-waited:
		if d > time.Second {
			t.Errorf("the push of sample 0 waited %v for sample 3", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the push of sample 0 never got sample 3")
	}
	if b, _ := f.record(); len(b) != 1 || len(b[0]) != 4 {
		t.Errorf("blocks %v, want one of the four samples", b)
	}
}

// partFetcher answers a block in two parts, as a block the store split between two nodes
// comes (parts: what it tells store.TellParts): its first two samples at once, the others
// once slow is closed.
type partFetcher struct {
	blockFetcher
	parts int
	slow  chan struct{}
}

func (f *partFetcher) FetchBlock(ctx context.Context, samples []uint32, got func(k int, data []byte, err error)) {
	store.TellParts(ctx, f.parts)
	for k, i := range samples {
		if k == 2 {
			<-f.slow
		}
		got(k, blobOf(i, 100), nil)
	}
}

// TestSplitBlockHandsOnAsItComes: of a block split between nodes, the samples of the part
// that came are cached, their readers woken and the others pushed before the slow part
// comes, none from a hedge. A block in one part is handed on together once all came, as
// before (pushed row by row it read slower).
func TestSplitBlockHandsOnAsItComes(t *testing.T) {
	for _, parts := range []int{2, 1} {
		f := &partFetcher{parts: parts, slow: make(chan struct{})}
		var pushes sync.Map
		c := NewCache(f, CacheOptions{MaxBytes: 1 << 20, Samples: 100, Block: BlockOptions{Samples: 4, HedgeAfter: time.Minute},
			Push: func(i uint32, data []byte) bool { pushes.Store(i, true); return true }})
		release := sync.OnceFunc(func() { close(f.slow) })
		for i := range uint32(4) {
			c.Prefetch(i, PrefetchOptions{Size: 100, MaxInFlight: 100})
		}
		got := make(chan error, 1)
		go func() {
			data, err := c.Get(context.Background(), 1)
			if err == nil && (len(data) != 100 || data[0] != 1) {
				err = errors.New("wrong bytes")
			}
			got <- err
		}()
		if parts > 1 {
			select {
			case err := <-got:
				if err != nil {
					t.Errorf("split block: Get(1), its part answered: %v", err)
				}
			case <-time.After(5 * time.Second):
				t.Errorf("split block: Get(1) not answered while the other part was held")
			}
			waitFor(t, "sample 0 pushed while the other part is held", func() bool { _, ok := pushes.Load(uint32(0)); return ok })
		} else {
			select {
			case err := <-got:
				t.Errorf("block in one part: Get(1) answered (%v) before the whole block came", err)
				got <- nil // for the wait below
			case <-time.After(100 * time.Millisecond):
			}
			n := 0
			pushes.Range(func(any, any) bool { n++; return true })
			if n != 0 {
				t.Errorf("block in one part: %d samples pushed before the whole block came", n)
			}
		}
		release()
		if parts == 1 {
			if err := <-got; err != nil {
				t.Errorf("block in one part: Get(1): %v", err)
			}
		}
		waitFor(t, "the block's unread samples pushed", func() bool {
			_, zero := pushes.Load(uint32(0))
			_, two := pushes.Load(uint32(2))
			_, three := pushes.Load(uint32(3))
			return zero && two && three
		})
		if _, alone := f.record(); len(alone) != 0 {
			t.Errorf("%d parts: fetched alone %v, want none (no hedge)", parts, alone)
		}
		for i := range uint32(4) {
			if !c.Has(i) {
				t.Errorf("%d parts: sample %d not cached after its block", parts, i)
			}
		}
		if err := c.checkInvariants(); err != nil {
			t.Error(err)
		}
		c.Close()
	}
}
