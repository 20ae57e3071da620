package prefetch

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cassfs/cassfs/internal/testkit"
)

// countingFetch returns blobOf(i, size) and counts fetches per sample; while gate is
// non-nil a fetch waits for it.
type countingFetch struct {
	size  int
	mu    sync.Mutex
	count map[uint32]int
	total atomic.Int64
}

func newCountingFetch(size int) *countingFetch {
	return &countingFetch{size: size, count: map[uint32]int{}}
}

func (f *countingFetch) fetch(ctx context.Context, i uint32) ([]byte, error) {
	f.mu.Lock()
	f.count[i]++
	f.mu.Unlock()
	f.total.Add(1)
	return blobOf(i, f.size), nil
}

func (f *countingFetch) maxPerSample() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := 0
	for _, n := range f.count {
		m = max(m, n)
	}
	return m
}

// settle waits until no fetch is in flight.
func settle(t *testing.T, c *Cache) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for c.Stats().InFlight > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("fetches still in flight after 10s: %+v", c.Stats())
		}
		runtime.Gosched()
	}
}

// sizeOf is the size of every blob made by blobOf in these tests, as far as the prefetcher
// is told: tests use one size per cache, and the reservation only has to be an upper bound.
func sizeOf(uint32) int64 { return testBlobSize }

const testBlobSize = 1000

// testStream is a Stream of the orders a function gives.
type testStream struct {
	name  string
	order func(e uint64) []uint32
}

func (s *testStream) Name() string            { return s.name }
func (s *testStream) Order(e uint64) []uint32 { return s.order(e) }

// rotated is a stream whose epoch e starts at sample e*7 and walks the n samples.
func rotated(n int) *testStream {
	return &testStream{"all", func(e uint64) []uint32 {
		o := make([]uint32, n)
		for k := range o {
			o[k] = uint32((int(e)*7 + k) % n)
		}
		return o
	}}
}

// TestIssuesUpToTheWindow: every access issues the positions up to head+window, and
// nothing beyond. The clock stands still, so the controller measures no rate and the window
// stays at its initial size: an in-flight limit of 8, a window of 4 × 8.
func TestIssuesUpToTheWindow(t *testing.T) {
	f := newCountingFetch(100)
	c := NewCache(fetchFunc(f.fetch), CacheOptions{MaxBytes: 1 << 30})
	defer c.Close()
	still := time.Now()
	p := NewPrefetcher(c, Options{Size: sizeOf, InitialWindow: 8, MaxWindow: 64, MaxInFlight: 1000, Now: func() time.Time { return still }})
	defer p.Close()
	order := rotated(1000)
	for pos := range 100 {
		p.Access(order, 0)
		if _, err := c.Get(context.Background(), order.Order(0)[pos]); err != nil {
			t.Fatal(err)
		}
	}
	settle(t, c)
	if st := p.Stats()[0]; st.Limit != 8 || st.Window != 32 {
		t.Errorf("limit %d, window %d after 100 accesses at one instant, want the initial 8 and 32", st.Limit, st.Window)
	}
	// Positions 0..131 were issued, and nothing beyond.
	if got := c.Stats().Prefetched; got != 132 {
		t.Errorf("prefetched %d samples, want 132 (positions up to 99+32)", got)
	}
	if s := c.Stats(); s.Misses != 0 {
		t.Errorf("%d demand reads missed although each was prefetched first", s.Misses)
	}
	if m := f.maxPerSample(); m != 1 {
		t.Errorf("a sample was fetched %d times", m)
	}
}

// TestAccessOfNoneStartsTheStream: readers that began to read an epoch and consumed
// nothing yet (AccessN of 0: a record file's first READ, not answered yet) start its
// stream, which issues from the epoch's start; counts that follow move it on as accesses do.
func TestAccessOfNoneStartsTheStream(t *testing.T) {
	f := newCountingFetch(100)
	c := NewCache(fetchFunc(f.fetch), CacheOptions{MaxBytes: 1 << 30})
	defer c.Close()
	still := time.Now()
	p := NewPrefetcher(c, Options{Size: sizeOf, InitialWindow: 8, MaxWindow: 64, MaxInFlight: 1000, Now: func() time.Time { return still }})
	defer p.Close()
	order := rotated(1000)
	// prefetched waits for want prefetches to have come (a fetch counts once it ran), and
	// for nothing more to be in flight, and returns how many there were.
	prefetched := func(want int64) int64 {
		for deadline := time.Now().Add(10 * time.Second); c.Stats().Prefetched < want && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		settle(t, c)
		return c.Stats().Prefetched
	}
	p.AccessN(order, 0, 0)
	if got := prefetched(32); got != 32 {
		t.Fatalf("prefetched %d samples after readers began, want the 32 positions of the first window", got)
	}
	if _, ok := c.Peek(order.Order(0)[0]); !ok {
		t.Fatal("the epoch's first sample was not prefetched")
	}
	p.AccessN(order, 0, 10)
	if got := prefetched(42); got != 42 {
		t.Errorf("prefetched %d samples after 10 accesses, want 42 (positions up to 9+32)", got)
	}
}

// TestContinuesIntoNextEpoch: near the end of epoch N the window reaches into epoch N+1;
// when readers get there, nothing is fetched twice.
func TestContinuesIntoNextEpoch(t *testing.T) {
	const n = 50
	f := newCountingFetch(10)
	c := NewCache(fetchFunc(f.fetch), CacheOptions{MaxBytes: 1 << 30})
	defer c.Close()
	p := NewPrefetcher(c, Options{Size: sizeOf, InitialWindow: 1000, MaxWindow: 20, MaxInFlight: 1000})
	defer p.Close()
	order := rotated(n)
	for range 40 {
		p.Access(order, 0)
	}
	settle(t, c)
	// Positions up to 59 are issued: all of epoch 0 and 10 of epoch 1 (already cached, as
	// epoch 1 visits the same samples).
	if st := p.Stats()[0]; st.Issued != 60 {
		t.Errorf("issued %d, want 60 (into the next epoch)", st.Issued)
	}
	for e := range uint64(3) {
		for pos := range n {
			p.Access(order, e)
			if _, err := c.Get(context.Background(), order.Order(e)[pos]); err != nil {
				t.Fatal(err)
			}
		}
	}
	settle(t, c)
	if got := f.total.Load(); got != n {
		t.Errorf("three epochs over %d samples made %d fetches, want %d (the cache holds them all)", n, got, n)
	}
	if st := p.Stats()[0]; st.Epoch != 2 {
		t.Errorf("stream at epoch %d, want 2", st.Epoch)
	}
}

// TestCacheBoundUnderPrefetch: prefetching pauses when unread blobs fill the cache short of
// KeepFree, resumes as readers consume, evicts consumed blobs first, never exceeds the
// bound, and fetches every sample once.
func TestCacheBoundUnderPrefetch(t *testing.T) {
	const size, n = 1000, 300
	const bound = 20 * size
	f := newCountingFetch(size)
	c := NewCache(fetchFunc(f.fetch), CacheOptions{MaxBytes: bound, Samples: n})
	defer c.Close()
	p := NewPrefetcher(c, Options{Size: sizeOf, InitialWindow: 100, MaxWindow: 100, MaxInFlight: 1000, KeepFree: 4 * size})
	defer p.Close()
	order := rotated(n)
	for pos := range n {
		p.Access(order, 0)
		if err := c.checkInvariants(); err != nil {
			t.Fatalf("position %d: %v", pos, err)
		}
		i := order.Order(0)[pos]
		data, err := c.Get(context.Background(), i)
		if err != nil || data[0] != byte(i) {
			t.Fatalf("position %d: wrong content or %v", pos, err)
		}
		// Near the end the window reaches into epoch 1, which refetches samples consumed
		// and evicted early in epoch 0; but no sample is fetched twice before its read.
		f.mu.Lock()
		n := f.count[i]
		f.mu.Unlock()
		if n != 1 {
			t.Errorf("sample %d fetched %d times by its first read: a prefetched blob was evicted unread", i, n)
		}
	}
	settle(t, c)
	if err := c.checkInvariants(); err != nil {
		t.Fatal(err)
	}
	if got := c.Stats().Misses; got > 0 {
		t.Errorf("%d demand misses; the prefetcher should have kept ahead", got)
	}
}

// TestDemandJumpsTheQueue: with prefetches stalled on a slow store, a demand read of
// another sample is fetched at once, not queued behind them.
func TestDemandJumpsTheQueue(t *testing.T) {
	release := make(chan struct{})
	fetch := func(ctx context.Context, i uint32) ([]byte, error) {
		if i < 1000 {
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return blobOf(i, 10), nil
	}
	c := NewCache(fetchFunc(fetch), CacheOptions{})
	defer c.Close()
	p := NewPrefetcher(c, Options{Size: sizeOf, InitialWindow: 64, MaxInFlight: 8})
	defer p.Close()
	p.Access(rotated(1000), 0)
	if got := c.Stats().Prefetches; got != 8 {
		t.Errorf("%d prefetches in flight, want the cap 8", got)
	}
	done := make(chan error)
	go func() { _, err := c.Get(context.Background(), 5000); done <- err }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a demand read waited behind stalled prefetches")
	}
	close(release)
}

func TestPrefetcherCloseLeavesNoGoroutine(t *testing.T) {
	before := runtime.NumGoroutine()
	c := NewCache(fetchFunc(func(ctx context.Context, i uint32) ([]byte, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}), CacheOptions{})
	p := NewPrefetcher(c, Options{Size: sizeOf, InitialWindow: 50})
	p.Access(rotated(100), 0)
	if c.Stats().Prefetches == 0 {
		t.Fatal("nothing prefetched")
	}
	p.Close()
	c.Close()
	p.Access(rotated(100), 0) // after Close: ignored, no panic
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		runtime.Gosched()
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines after Close, %d before", n, before)
	}
}

// TestConcurrentReadersExactlyOnce: several readers walk one epoch concurrently (each taking
// the next position), with prefetching and a store whose latency varies per sample; every
// sample is read once with the right content and fetched once.
func TestConcurrentReadersExactlyOnce(t *testing.T) {
	const n = 2000
	var fetches sync.Map
	fetch := func(ctx context.Context, i uint32) ([]byte, error) {
		if _, dup := fetches.LoadOrStore(i, true); dup {
			t.Errorf("sample %d fetched twice", i)
		}
		if i%97 == 0 {
			time.Sleep(20 * time.Millisecond) // a straggler
		}
		return blobOf(i, 50), nil
	}
	c := NewCache(fetchFunc(fetch), CacheOptions{MaxBytes: 1 << 30})
	defer c.Close()
	p := NewPrefetcher(c, Options{Size: sizeOf, InitialWindow: 32, MaxInFlight: 64})
	defer p.Close()
	order := rotated(n)
	var next atomic.Int64
	var wg sync.WaitGroup
	seen := make([]atomic.Int32, n)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				pos := int(next.Add(1)) - 1
				if pos >= n {
					return
				}
				p.Access(order, 0)
				i := order.Order(0)[pos]
				data, err := c.Get(context.Background(), i)
				if err != nil || data[0] != byte(i) {
					t.Errorf("position %d: wrong content or %v", pos, err)
				}
				seen[i].Add(1)
			}
		}()
	}
	wg.Wait()
	for i := range seen {
		if seen[i].Load() != 1 {
			t.Fatalf("sample %d read %d times", i, seen[i].Load())
		}
	}
}

// TestPrefetchKeepsReusedBlobs: a blob read in epoch N and prefetched again for epoch N+1 is
// protected from used-first eviction until it is read again.
func TestPrefetchKeepsReusedBlobs(t *testing.T) {
	f := newCountingFetch(testBlobSize)
	c := NewCache(fetchFunc(f.fetch), CacheOptions{MaxBytes: 10 * testBlobSize, Samples: 200})
	defer c.Close()
	ctx := context.Background()
	for i := range uint32(5) {
		c.Get(ctx, i) // used
	}
	if !c.Prefetch(2, PrefetchOptions{Size: testBlobSize, MaxInFlight: 100}) {
		t.Fatal("Prefetch of a cached blob refused")
	}
	// Fill the cache with other demand reads: used blobs go, the re-prefetched one stays.
	for i := uint32(100); i < 109; i++ {
		c.Get(ctx, i)
	}
	if !c.Has(2) {
		t.Error("a blob prefetched again was evicted before its reader came")
	}
	if c.Has(0) || c.Has(1) {
		t.Error("used blobs were kept over a fresh one")
	}
	if err := c.checkInvariants(); err != nil {
		t.Error(err)
	}
	if f.total.Load() != 14 {
		t.Errorf("%d fetches, want 14 (the re-prefetch of a cached blob fetches nothing)", f.total.Load())
	}
}

// TestEpochsShorterThanTheWindow: when the window reaches past the whole next epoch (small
// splits, shards), readers entering that epoch carry on into the one after, and epochs of
// different lengths (a resumed view's rest of an epoch, then whole ones) are walked within
// their bounds.
func TestEpochsShorterThanTheWindow(t *testing.T) {
	const n = 10
	f := newCountingFetch(10)
	c := NewCache(fetchFunc(f.fetch), CacheOptions{MaxBytes: 1 << 30})
	defer c.Close()
	p := NewPrefetcher(c, Options{Size: sizeOf, InitialWindow: 64, MaxInFlight: 1000})
	defer p.Close()
	// Distinct samples per epoch: epoch e holds e*n ... e*n+n-1.
	distinct := func(e uint64) []uint32 {
		o := make([]uint32, n)
		for k := range o {
			o[k] = uint32(int(e)*n + k)
		}
		return o
	}
	small := &testStream{"small", distinct}
	for e := range uint64(4) {
		for range n {
			p.Access(small, e) // panicked before when epoch e+1 was issued to its end
		}
		settle(t, c)
		if got, want := f.total.Load(), int64((e+2)*n); got != want {
			t.Fatalf("after epoch %d: %d fetches, want %d (this epoch and all of the next)", e, got, want)
		}
	}
	// A resumed stream: its first epoch is the last 3 of epoch 0, later ones are whole.
	resumed := func(e uint64) []uint32 {
		if e == 0 {
			return distinct(100)[7:]
		}
		return distinct(100 + e)
	}
	p.Access(&testStream{"small@7", resumed}, 0)
	settle(t, c)
	if got := f.total.Load(); got != 5*n+3+n {
		t.Errorf("resumed stream: %d fetches in all, want %d (its 3, then the next epoch's %d)", got, 5*n+3+n, n)
	}
}

// TestOneEpochFetchesEachSampleOnce: readers walking one epoch in order through a cache a
// quarter of the dataset's size, with the default window, make one fetch per sample and
// hardly any beyond the epoch: nothing prefetched is evicted before it is read, and the
// prefetcher runs only NextEpochAhead samples into the epoch nobody enters.
func TestOneEpochFetchesEachSampleOnce(t *testing.T) {
	const n = 4000
	f := newCountingFetch(testBlobSize)
	c := NewCache(fetchFunc(f.fetch), CacheOptions{MaxBytes: n / 4 * testBlobSize, Samples: 2 * n})
	defer c.Close()
	p := NewPrefetcher(c, Options{Size: sizeOf})
	defer p.Close()
	// Epoch e visits samples e*n ... e*n+n-1, so fetches beyond the epoch are counted apart.
	order := &testStream{"all", func(e uint64) []uint32 {
		o := make([]uint32, n)
		for k := range o {
			o[k] = uint32(int(e)*n + k)
		}
		return o
	}}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for pos := int(next.Add(1)) - 1; pos < n; pos = int(next.Add(1)) - 1 {
				p.Access(order, 0)
				if _, err := c.Get(context.Background(), uint32(pos)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	settle(t, c)
	f.mu.Lock()
	defer f.mu.Unlock()
	within, beyond := 0, 0
	for i, k := range f.count {
		if i < n {
			within += k
			if k != 1 {
				t.Errorf("sample %d fetched %d times", i, k)
			}
		} else {
			beyond += k
		}
	}
	if within != n || float64(within+beyond)/n > 1.02 {
		t.Errorf("%d fetches for the epoch's %d samples and %d beyond it: %.3f per sample, want at most 1.02", within, n, beyond, float64(within+beyond)/n)
	}
	if err := c.checkInvariants(); err != nil {
		t.Error(err)
	}
}

// TestDemandJoinsPrefetchInFlight: a reader asking for a sample whose prefetch is in flight
// waits for that fetch and issues none of its own, and gets its bytes when it lands.
func TestDemandJoinsPrefetchInFlight(t *testing.T) {
	release := make(chan struct{})
	var fetches atomic.Int32
	fetch := func(ctx context.Context, i uint32) ([]byte, error) {
		fetches.Add(1)
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return blobOf(i, 10), nil
	}
	c := NewCache(fetchFunc(fetch), CacheOptions{})
	defer c.Close()
	p := NewPrefetcher(c, Options{Size: sizeOf, InitialWindow: 4, MaxInFlight: 100})
	defer p.Close()
	order := rotated(100)
	p.Access(order, 0)
	issued := c.Stats().Prefetched
	next := order.Order(0)[2] // in the window: prefetched, still in flight
	done := make(chan []byte)
	go func() {
		data, err := c.Get(context.Background(), next)
		if err != nil {
			t.Error(err)
		}
		done <- data
	}()
	waitFor(t, "the Get to join the prefetch", func() bool { return c.Stats().Waits == 1 })
	waitFor(t, "the prefetches to start", func() bool { return int64(fetches.Load()) >= issued })
	if s := c.Stats(); s.Misses != 0 || int64(fetches.Load()) != issued {
		t.Errorf("a Get of a sample in flight started a fetch: %d misses, %d fetches for %d prefetches", s.Misses, fetches.Load(), issued)
	}
	close(release)
	if data := <-done; len(data) != 10 || data[0] != byte(next) {
		t.Errorf("the joined Get returned %v", data)
	}
}

// TestAheadMarksDoNotOutliveTheirEpoch: a sample pushed when its name was looked up ahead
// after the prefetcher had passed it in that epoch leaves a mark Prefetch never consumed
// there; in the next epoch, where nothing pushed it, the prefetcher must fetch it rather
// than pass it over (it did, and readers then fetched such samples themselves: a push
// lost, BenchmarkSlowdown's dip).
func TestAheadMarksDoNotOutliveTheirEpoch(t *testing.T) {
	const n = 20
	f := newCountingFetch(testBlobSize)
	c := NewCache(fetchFunc(f.fetch), CacheOptions{MaxBytes: 8 * testBlobSize, Samples: n, Push: func(uint32, []byte) bool { return true }})
	defer c.Close()
	still := time.Now()
	p := NewPrefetcher(c, Options{Size: sizeOf, InitialWindow: 2, MaxWindow: 64, MaxInFlight: 1000, KeepFree: 1, Now: func() time.Time { return still }})
	defer p.Close()
	order := rotated(n)
	ctx := context.Background()
	read := func(e uint64) {
		for _, i := range order.Order(e) {
			p.Access(order, e)
			testkit.Must(c.Get(ctx, i))(t)
			settle(t, c)
		}
	}
	read(0)
	// Epoch 0's last sample, held and passed by the prefetcher long ago, looked up ahead:
	// pushed and marked.
	last := order.Order(0)[n-1]
	if !c.PushHeld(last) {
		t.Fatalf("sample %d not held at the end of epoch 0", last)
	}
	read(1)
	if s := c.Stats(); s.PushesLost != 0 {
		t.Errorf("epoch 1: %d pushes lost, want 0 (sample %d was pushed in epoch 0, not in 1)", s.PushesLost, last)
	}
}

// TestRewindLooksAgainAtPassedOverSamples: samples the cache's Local reports are passed
// over; once they are not local any more (pages the kernel reclaimed), Rewind has the
// stream fetch those between its readers and its window's end, and nothing else again.
func TestRewindLooksAgainAtPassedOverSamples(t *testing.T) {
	f := newCountingFetch(100)
	var inPageCache atomic.Bool
	inPageCache.Store(true)
	c := NewCache(fetchFunc(f.fetch), CacheOptions{MaxBytes: 1 << 30, Local: func(i uint32) bool { return inPageCache.Load() && i%2 == 0 }})
	defer c.Close()
	still := time.Now()
	p := NewPrefetcher(c, Options{Size: sizeOf, InitialWindow: 8, MaxWindow: 64, MaxInFlight: 1000, Now: func() time.Time { return still }})
	defer p.Close()
	order := rotated(1000) // epoch 0: sample k at position k
	for range 10 {
		p.Access(order, 0)
	}
	// An arrival issues the next position after it leaves the in-flight count: wait for
	// the fetches wanted (the odd samples up to 41, then also the even ones from 10),
	// then for a moment more for any beyond.
	fetched := func(want int64) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); f.total.Load() < want && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(20 * time.Millisecond)
		settle(t, c)
	}
	fetched(21)
	count := func(i uint32) int { f.mu.Lock(); defer f.mu.Unlock(); return f.count[i] }
	// The readers are at position 9 with a window of 32: positions up to 41 were issued.
	for i := range uint32(42) {
		if want := int(i % 2); count(i) != want {
			t.Fatalf("before the rewind: sample %d fetched %d times, want %d (even ones are local)", i, count(i), want)
		}
	}
	inPageCache.Store(false)
	p.Rewind()
	fetched(21 + 16)
	for i := range uint32(50) {
		want := 1 // from the readers' position to the window's end, each once
		switch {
		case i < 9 && i%2 == 0:
			want = 0 // behind the readers: not wanted any more
		case i > 41:
			want = 0 // beyond the window
		}
		if count(i) != want {
			t.Errorf("after the rewind: sample %d fetched %d times, want %d", i, count(i), want)
		}
	}
}
