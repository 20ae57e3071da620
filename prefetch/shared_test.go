package prefetch

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cassfs/cassfs/internal/inflight"
)

// TestSharedBoundHoldsAcrossCaches: two caches whose prefetches share one bound (a
// database session's, package inflight) hold no more than it together; a cache turned
// away issues again as soon as the other's prefetches end, with no access of its own.
func TestSharedBoundHoldsAcrossCaches(t *testing.T) {
	shared := inflight.New(4)
	release := make(chan struct{})
	var inFlight, most atomic.Int64
	slow := fetchFunc(func(ctx context.Context, i uint32) ([]byte, error) {
		n := inFlight.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		defer inFlight.Add(-1)
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return blobOf(i, testBlobSize), nil
	})
	still := time.Now()
	o := Options{Size: sizeOf, InitialWindow: 8, MaxWindow: 64, MaxInFlight: 1000, Now: func() time.Time { return still }}
	var caches []*Cache
	var ps []*Prefetcher
	for range 2 {
		c := NewCache(slow, CacheOptions{MaxBytes: 1 << 30, Shared: shared})
		defer c.Close()
		p := NewPrefetcher(c, o)
		defer p.Close()
		caches, ps = append(caches, c), append(ps, p)
	}
	ps[0].Access(rotated(100), 0)
	ps[1].Access(rotated(100), 0)
	if a, b := caches[0].Stats().Prefetches, caches[1].Stats().Prefetches; a+b != 4 || b != 0 {
		t.Fatalf("prefetches in flight %d and %d, want the bound of 4 taken by the first", a, b)
	}
	close(release) // every fetch ends at once from here
	waitFor(t, "the second cache to prefetch its window", func() bool { return caches[1].Stats().Prefetched >= 32 })
	settle(t, caches[0])
	settle(t, caches[1])
	if m := most.Load(); m > 4 {
		t.Errorf("%d prefetches were in flight at once, want at most the shared 4", m)
	}
}
