package prefetch

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cassfs/cassfs/internal/testkit"
)

// blobOf is sample i's content in these tests: i+1 bytes of value i.
func blobOf(i uint32, size int) []byte {
	b := make([]byte, size)
	for k := range b {
		b[k] = byte(i)
	}
	return b
}

func TestConcurrentGetsShareOneFetch(t *testing.T) {
	var fetches atomic.Int64
	release := make(chan struct{})
	c := NewCache(fetchFunc(func(ctx context.Context, i uint32) ([]byte, error) {
		fetches.Add(1)
		<-release
		return blobOf(i, 100), nil
	}), CacheOptions{MaxBytes: 1 << 20})
	defer c.Close()
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			data, err := c.Get(context.Background(), 7)
			if err != nil || len(data) != 100 || data[0] != 7 {
				t.Errorf("Get = %d bytes, %v", len(data), err)
			}
		}()
	}
	// Wait until all 50 joined the one fetch, then let it finish.
	waitFor(t, "50 Gets to join", func() bool { return c.Stats().Misses+c.Stats().Waits >= 50 })
	close(release)
	wg.Wait()
	if n := fetches.Load(); n != 1 {
		t.Errorf("50 concurrent Gets made %d fetches, want 1", n)
	}
	if _, err := c.Get(context.Background(), 7); err != nil || c.Stats().Hits != 1 {
		t.Errorf("a Get after the fetch: %v, hits %d; want a hit", err, c.Stats().Hits)
	}
}

func TestByteBoundHolds(t *testing.T) {
	const bound = 10_000
	c := NewCache(fetchFunc(func(ctx context.Context, i uint32) ([]byte, error) {
		return blobOf(i, 500+int(i%7)*300), nil
	}), CacheOptions{MaxBytes: bound, Samples: 60})
	defer c.Close()
	for i := range uint32(500) {
		data, err := c.Get(context.Background(), i%60)
		if err != nil || data[0] != byte(i%60) {
			t.Fatalf("Get(%d): wrong content or %v", i%60, err)
		}
		if err := c.checkInvariants(); err != nil {
			t.Fatalf("after Get(%d): %v", i%60, err)
		}
	}
	if c.Stats().Evictions == 0 {
		t.Errorf("no evictions although the working set exceeds the bound")
	}
	// A blob larger than the bound is served but not kept.
	big := NewCache(fetchFunc(func(ctx context.Context, i uint32) ([]byte, error) { return blobOf(i, 2*bound), nil }), CacheOptions{MaxBytes: bound})
	defer big.Close()
	if data, err := big.Get(context.Background(), 1); err != nil || len(data) != 2*bound {
		t.Fatalf("oversized Get: %d bytes, %v", len(data), err)
	}
	if s := big.Stats(); s.Bytes != 0 || s.Entries != 0 {
		t.Errorf("oversized blob cached: %d bytes in %d entries", s.Bytes, s.Entries)
	}
	if err := big.checkInvariants(); err != nil {
		t.Error(err)
	}
}

func TestFailureIsShared(t *testing.T) {
	cause := errors.New("node down")
	release := make(chan struct{})
	c := NewCache(fetchFunc(func(ctx context.Context, i uint32) ([]byte, error) {
		<-release
		return nil, cause
	}), CacheOptions{})
	defer c.Close()
	errs := make(chan error, 10)
	for range 10 {
		go func() { _, err := c.Get(context.Background(), 3); errs <- err }()
	}
	waitFor(t, "10 Gets to join", func() bool { return c.Stats().Misses+c.Stats().Waits >= 10 })
	close(release)
	for range 10 {
		err := <-errs
		var fe *FetchError
		if !errors.As(err, &fe) || !errors.Is(err, cause) || fe.Sample != 3 {
			t.Fatalf("error %v: want a FetchError for sample 3 wrapping the cause", err)
		}
	}
	if n := c.Stats().FetchErrors; n != 1 {
		t.Errorf("10 waiters on one failing fetch: %d fetch errors, want 1", n)
	}
	// A Get right after the failure (the kernel's retry) gets the same error at once.
	if _, err := c.Get(context.Background(), 3); !errors.Is(err, cause) || c.Stats().Misses != 1 {
		t.Errorf("Get right after a failure: %v with %d misses; want the remembered error, no new fetch", err, c.Stats().Misses)
	}
}

func TestFailureMemoryOff(t *testing.T) {
	cause := errors.New("node down")
	c := NewCache(fetchFunc(func(ctx context.Context, i uint32) ([]byte, error) { return nil, cause }), CacheOptions{FailureMemory: -1})
	defer c.Close()
	for range 2 {
		if _, err := c.Get(context.Background(), 3); !errors.Is(err, cause) {
			t.Fatalf("Get: %v", err)
		}
	}
	if got := c.Stats().Misses; got != 2 {
		t.Errorf("without failure memory, 2 Gets made %d fetches, want 2", got)
	}
}

func TestCancelledWaiterDoesNotCancelFetch(t *testing.T) {
	release := make(chan struct{})
	c := NewCache(fetchFunc(func(ctx context.Context, i uint32) ([]byte, error) {
		select {
		case <-release:
			return blobOf(i, 10), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}), CacheOptions{})
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan error)
	go func() { _, err := c.Get(ctx, 1); first <- err }()
	waitFor(t, "the first Get to fetch", func() bool { return c.Stats().Misses >= 1 })
	second := make(chan error)
	go func() { _, err := c.Get(context.Background(), 1); second <- err }()
	waitFor(t, "the second Get to join", func() bool { return c.Stats().Waits >= 1 })
	cancel()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Get: %v, want context.Canceled", err)
	}
	close(release)
	if err := <-second; err != nil {
		t.Errorf("the other waiter failed with %v when the first gave up", err)
	}
}

func TestCloseStopsFetchesAndLeavesNoGoroutine(t *testing.T) {
	before := runtime.NumGoroutine()
	c := NewCache(fetchFunc(func(ctx context.Context, i uint32) ([]byte, error) {
		<-ctx.Done() // a fetch that only ends when cancelled
		return nil, ctx.Err()
	}), CacheOptions{})
	var wg sync.WaitGroup
	for i := range uint32(20) {
		wg.Add(1)
		go func() { defer wg.Done(); c.Get(context.Background(), i) }()
	}
	waitFor(t, "20 fetches in flight", func() bool { return c.Stats().InFlight >= 20 })
	c.Close()
	wg.Wait()
	if _, err := c.Get(context.Background(), 1); err == nil {
		t.Error("Get after Close succeeded")
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		runtime.Gosched()
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<16)
		t.Errorf("%d goroutines after Close, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}
}

func BenchmarkCacheHit(b *testing.B) {
	c := NewCache(fetchFunc(func(ctx context.Context, i uint32) ([]byte, error) { return blobOf(i, 110_000), nil }), CacheOptions{})
	defer c.Close()
	for i := range uint32(1000) {
		c.Get(context.Background(), i)
	}
	b.SetBytes(110_000)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := uint32(0)
		for pb.Next() {
			if _, err := c.Get(context.Background(), i%1000); err != nil {
				b.Fatal(fmt.Sprint(err))
			}
			i++
		}
	})
}

// TestFailedPrefetchIsForgotten: a prefetch that fails while nobody waits leaves no trace;
// the reader who comes later gets a fetch of its own, which succeeds.
func TestFailedPrefetchIsForgotten(t *testing.T) {
	var calls atomic.Int32
	c := NewCache(fetchFunc(func(ctx context.Context, i uint32) ([]byte, error) {
		if calls.Add(1) == 1 {
			return nil, errors.New("node down")
		}
		return blobOf(i, 4), nil
	}), CacheOptions{MaxBytes: 1 << 10})
	defer c.Close()
	if !c.Prefetch(5, PrefetchOptions{Size: 4, MaxInFlight: 8}) {
		t.Fatal("Prefetch refused")
	}
	waitFor(t, "the prefetch to fail", func() bool { return c.Stats().FetchErrors > 0 })
	waitFor(t, "no fetch in flight", func() bool { return c.Stats().InFlight == 0 })
	data, err := c.Get(context.Background(), 5)
	if err != nil || len(data) != 4 || calls.Load() != 2 {
		t.Errorf("Get after a failed prefetch: %v, %d bytes, %d fetches; want the blob from a second fetch", err, len(data), calls.Load())
	}
}

// waitFor waits until cond holds, failing the test after 10 s instead of spinning until
// the test binary's timeout.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10s for %s", what)
		}
		runtime.Gosched()
	}
}

// TestHasWithAndWithoutLock: Has answers the same from the presence bitset as from the
// entries, through fetches and evictions.
func TestHasWithAndWithoutLock(t *testing.T) {
	fetch := func(ctx context.Context, i uint32) ([]byte, error) { return blobOf(i, 1000), nil }
	locked := NewCache(fetchFunc(fetch), CacheOptions{MaxBytes: 5000})
	free := NewCache(fetchFunc(fetch), CacheOptions{MaxBytes: 5000, Samples: 100})
	defer locked.Close()
	defer free.Close()
	for k := range uint32(300) {
		i := (k * 37) % 100
		for _, c := range []*Cache{locked, free} {
			if _, err := c.Get(context.Background(), i); err != nil {
				t.Fatal(err)
			}
		}
		for j := range uint32(100) {
			if a, b := locked.Has(j), free.Has(j); a != b {
				t.Fatalf("after %d Gets: Has(%d) = %v with the lock, %v without", k+1, j, a, b)
			}
		}
		if err := free.checkInvariants(); err != nil {
			t.Fatal(err)
		}
	}
	if free.Has(1000) {
		t.Error("Has of a sample beyond Samples")
	}
}

// Drop frees a blob's memory, fresh or used, and Has no longer reports it.
func TestCacheDrop(t *testing.T) {
	c := NewCache(fetchFunc(func(ctx context.Context, i uint32) ([]byte, error) { return make([]byte, 100), nil }), CacheOptions{MaxBytes: 1000, Samples: 10})
	defer c.Close()
	testkit.Must(c.Get(context.Background(), 1))(t)
	if !c.Prefetch(2, PrefetchOptions{Size: 100, MaxInFlight: 10}) {
		t.Fatal("prefetch refused")
	}
	for !c.Has(2) {
		time.Sleep(time.Millisecond)
	}
	c.Drop(1)
	c.Drop(2)
	c.Drop(3) // not cached: nothing happens
	if st := c.Stats(); st.Bytes != 0 || st.FreshBytes != 0 || st.Entries != 0 || c.Has(1) || c.Has(2) {
		t.Errorf("after Drop: %+v, has 1: %v, has 2: %v", st, c.Has(1), c.Has(2))
	}
	if err := c.checkInvariants(); err != nil {
		t.Error(err)
	}
}

// A prefetched blob is handed to Push as it arrives; one pushed counts as read once its
// reader looks it up (no READ may come), so it stops holding back prefetching, and stays
// cached for a READ that still comes; held and wanted again, it is pushed again. A blob whose push failed stays fresh until read; a
// demand read is never pushed (its READ is on its way).
func TestPushedBlobsCountAsReadAtLookup(t *testing.T) {
	var mu sync.Mutex
	pushed := map[uint32]int{}
	c := NewCache(fetchFunc(func(ctx context.Context, i uint32) ([]byte, error) {
		return blobOf(i, 1000), nil
	}), CacheOptions{MaxBytes: 1 << 20, Push: func(i uint32, data []byte) bool {
		mu.Lock()
		defer mu.Unlock()
		if len(data) != 1000 || data[0] != byte(i) {
			t.Errorf("push of sample %d handed %d bytes of %d", i, len(data), data[0])
		}
		pushed[i]++
		return i != 2 // sample 2: the kernel does not know its inode
	}})
	defer c.Close()
	for i := range uint32(3) {
		c.Prefetch(i, PrefetchOptions{Size: 1000, MaxInFlight: 10})
	}
	waitFor(t, "three prefetches to arrive", func() bool { return c.Stats().Entries == 3 && c.Stats().InFlight == 0 })
	// Pushes end after the arrival is visible: wait until sample 2's refusal is recorded.
	// The push of sample 0 or 1 may still be on its way when sample 2's has ended: wait for
	// all three to have been handed over as well.
	waitFor(t, "the three pushes to end", func() bool {
		mu.Lock()
		n := len(pushed)
		mu.Unlock()
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.pushed) == 2 && n == 3
	})
	if err := c.checkInvariants(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(pushed) != 3 || pushed[0] != 1 || pushed[1] != 1 || pushed[2] != 1 {
		t.Errorf("pushes %v, want each prefetched sample pushed once", pushed)
	}
	mu.Unlock()
	if fb := c.Stats().FreshBytes; fb != 3000 {
		t.Fatalf("fresh bytes %d before any lookup, want 3000", fb)
	}
	c.Looked(0)
	c.Looked(2) // not pushed: still waits for its READ
	c.Looked(7) // not cached at all
	if fb := c.Stats().FreshBytes; fb != 2000 {
		t.Errorf("fresh bytes %d after the lookup of pushed sample 0, want 2000 (only it counts as read)", fb)
	}
	if err := c.checkInvariants(); err != nil {
		t.Fatal(err)
	}
	// A READ that still comes (pages reclaimed) is served from memory.
	hits := c.Stats().Hits
	for _, i := range []uint32{0, 2} {
		if data, err := c.Get(context.Background(), i); err != nil || len(data) != 1000 || data[0] != byte(i) {
			t.Errorf("Get(%d) after its lookup: %d bytes, %v", i, len(data), err)
		}
	}
	if c.Stats().Hits != hits+2 || c.Stats().Misses != 0 {
		t.Errorf("stats %+v: want both Gets served from memory", c.Stats())
	}
	// Read, then wanted again (a later epoch): its pages may be gone, so it is pushed again.
	c.Prefetch(0, PrefetchOptions{Size: 1000, MaxInFlight: 10})
	waitFor(t, "sample 0 pushed again", func() bool { mu.Lock(); defer mu.Unlock(); return pushed[0] == 2 })
	if _, err := c.Get(context.Background(), 9); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if pushed[9] != 0 {
		t.Errorf("a demand read was pushed")
	}
	if err := c.checkInvariants(); err != nil {
		t.Error(err)
	}
}

// PushHeld (a name looked up ahead of its reader) pushes a held blob unless it was pushed
// already, and counts it as read either way; a used blob pushed so is not pushed again when
// Prefetch wants it next; a blob not held is false.
func TestPushHeld(t *testing.T) {
	var mu sync.Mutex
	pushes := map[uint32]int{}
	refuse := map[uint32]bool{1: true} // sample 1: the kernel did not know its inode at arrival
	c := NewCache(fetchFunc(func(ctx context.Context, i uint32) ([]byte, error) {
		return blobOf(i, 1000), nil
	}), CacheOptions{MaxBytes: 1 << 20, Push: func(i uint32, data []byte) bool {
		mu.Lock()
		defer mu.Unlock()
		pushes[i]++
		ok := !refuse[i]
		refuse[i] = false // known from now on
		return ok
	}})
	defer c.Close()
	count := func(i uint32) int { mu.Lock(); defer mu.Unlock(); return pushes[i] }
	c.Prefetch(0, PrefetchOptions{Size: 1000, MaxInFlight: 10})
	c.Prefetch(1, PrefetchOptions{Size: 1000, MaxInFlight: 10})
	waitFor(t, "two prefetches", func() bool { return c.Stats().Entries == 2 && c.Stats().InFlight == 0 })
	// Pushes end after the arrival is visible: wait until sample 1's refusal is recorded.
	waitFor(t, "the two pushes to end", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return len(c.pushed) == 1 })
	if !c.PushHeld(0) || count(0) != 1 {
		t.Errorf("sample 0, pushed as it arrived: PushHeld pushed it again (%d pushes)", count(0))
	}
	if !c.PushHeld(1) || count(1) != 2 {
		t.Errorf("sample 1, whose push at arrival failed: %d pushes, want it pushed now", count(1))
	}
	if fb := c.Stats().FreshBytes; fb != 0 {
		t.Errorf("fresh bytes %d after both were looked up ahead, want 0 (read)", fb)
	}
	// Both are used now: looked up ahead in a later epoch, pushed again; Prefetch, coming
	// after, leaves them alone.
	if !c.PushHeld(0) || count(0) != 2 {
		t.Errorf("a used blob looked up ahead: %d pushes, want 2", count(0))
	}
	c.Prefetch(0, PrefetchOptions{Size: 1000, MaxInFlight: 10})
	c.Prefetch(1, PrefetchOptions{Size: 1000, MaxInFlight: 10}) // not looked up ahead this time: pushed again
	waitFor(t, "sample 1 pushed again by Prefetch", func() bool { return count(1) == 3 })
	if count(0) != 2 {
		t.Errorf("Prefetch pushed sample 0 again after PushHeld had (%d pushes)", count(0))
	}
	if c.PushHeld(9) || count(9) != 0 {
		t.Error("PushHeld of a sample not held reported true or pushed")
	}
	if err := c.checkInvariants(); err != nil {
		t.Error(err)
	}
}

// A held blob wanted again is not handed to Push where SkipPush says its bytes are where
// its reader reads them already; it still counts as pushed (read once looked up).
func TestSkipPush(t *testing.T) {
	var mu sync.Mutex
	pushes := map[uint32]int{}
	resident := map[uint32]bool{}
	c := NewCache(fetchFunc(func(ctx context.Context, i uint32) ([]byte, error) {
		return blobOf(i, 1000), nil
	}), CacheOptions{MaxBytes: 1 << 20, Push: func(i uint32, data []byte) bool {
		mu.Lock()
		defer mu.Unlock()
		pushes[i]++
		return true
	}, SkipPush: func(i uint32) bool {
		mu.Lock()
		defer mu.Unlock()
		return resident[i]
	}})
	defer c.Close()
	count := func(i uint32) int { mu.Lock(); defer mu.Unlock(); return pushes[i] }
	for i := range uint32(2) {
		c.Prefetch(i, PrefetchOptions{Size: 1000, MaxInFlight: 10})
	}
	waitFor(t, "two pushes at arrival", func() bool { return count(0) == 1 && count(1) == 1 })
	c.Looked(0)
	c.Looked(1)
	mu.Lock()
	resident[0] = true // sample 1's pages are gone
	mu.Unlock()
	c.Prefetch(0, PrefetchOptions{Size: 1000, MaxInFlight: 10})
	c.Prefetch(1, PrefetchOptions{Size: 1000, MaxInFlight: 10})
	waitFor(t, "sample 1 pushed again", func() bool { return count(1) == 2 })
	c.Close() // every push started has ended
	if count(0) != 1 {
		t.Errorf("sample 0, resident, pushed %d times, want 1 (at arrival only)", count(0))
	}
	c.mu.Lock()
	_, pushed := c.pushed[0]
	c.mu.Unlock()
	if !pushed {
		t.Error("sample 0, skipped as resident, is not counted as pushed: its reader's lookup would not count it read")
	}
	if err := c.checkInvariants(); err != nil {
		t.Error(err)
	}
}

// fetchFunc is a function used as a prefetch.Fetcher.
type fetchFunc func(ctx context.Context, i uint32) ([]byte, error)

func (f fetchFunc) Fetch(ctx context.Context, i uint32) ([]byte, error) { return f(ctx, i) }

// A sample Prefetch passed over as pushed ahead and then fetched for a reader is a push
// lost; one fetched again by Prefetch first is not.
func TestPushesLost(t *testing.T) {
	c := NewCache(fetchFunc(func(ctx context.Context, i uint32) ([]byte, error) {
		return blobOf(i, 1000), nil
	}), CacheOptions{MaxBytes: 2500, Samples: 10, Push: func(uint32, []byte) bool { return true }})
	defer c.Close()
	ctx := context.Background()
	for i := range uint32(2) { // read once: held as used blobs
		testkit.Must(c.Get(ctx, i))(t)
	}
	for i := range uint32(2) { // looked up ahead: pushed, and passed over by Prefetch
		if !c.PushHeld(i) || !c.Prefetch(i, PrefetchOptions{Size: 1000, MaxInFlight: 10}) {
			t.Fatalf("sample %d: not pushed, or refused", i)
		}
	}
	for i := uint32(2); i < 5; i++ { // three more blobs evict both (room for two)
		testkit.Must(c.Get(ctx, i))(t)
	}
	c.Prefetch(1, PrefetchOptions{Size: 1000, MaxInFlight: 10}) // sample 1 fetched again by the prefetcher first
	waitFor(t, "sample 1 prefetched", func() bool { return c.Stats().InFlight == 0 })
	for _, i := range []uint32{1, 5, 6, 7} { // read, then evicted
		testkit.Must(c.Get(ctx, i))(t)
	}
	testkit.Must(c.Get(ctx, 0))(t)
	testkit.Must(c.Get(ctx, 1))(t) // a reader's fetch, but not after a pass-over
	if s := c.Stats(); s.PushesLost != 1 {
		t.Errorf("%d pushes lost, want 1 (sample 0: passed over, then a reader's fetch)", s.PushesLost)
	}
}
