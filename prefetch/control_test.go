package prefetch

import (
	"context"
	"crypto/sha256"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cassfs/cassfs/store"
	"github.com/cassfs/cassfs/store/memstore"
	"github.com/google/uuid"
)

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Unix(1_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// TestWindowFromRateAndLatency: the in-flight limit is the initial window plus gain × rate
// × latency, the rate measured from the accesses, the latency the smallest of the horizon,
// and the window reaches four times the limit ahead; a rate fades once readers stop, and a
// latency is forgotten after the horizon.
func TestWindowFromRateAndLatency(t *testing.T) {
	// Fetches that never end: no arrival measures a latency behind the test's back.
	never := func(ctx context.Context, i uint32) ([]byte, error) { <-ctx.Done(); return nil, ctx.Err() }
	c := NewCache(never, CacheOptions{MaxBytes: 1 << 30})
	defer c.Close()
	clock := newFakeClock()
	p := NewPrefetcher(c, Options{Size: sizeOf, InitialWindow: 8, MaxWindow: 1000, MaxInFlight: 10_000, Now: clock.Now})
	defer p.Close()
	p.latency.add(clock.Now(), 300*time.Millisecond)
	p.latency.add(clock.Now(), 100*time.Millisecond) // the smallest counts
	order := rotated(100_000)
	for range 1000 { // 1,000 samples/s
		clock.Add(time.Millisecond)
		p.Access(order, 0)
	}
	st := p.Stats()[0]
	if st.Rate < 999 || st.Rate > 1001 {
		t.Errorf("rate %.0f samples/s, want 1,000", st.Rate)
	}
	// 8 + 2 × 1,000/s × 0.1 s in flight (ceil of a float product: 208 or 209)
	if st.Limit < 208 || st.Limit > 209 || st.Window != min(1000, 4*st.Limit) {
		t.Errorf("limit %d, window %d at 1,000 samples/s and 100 ms, want 208 and 4 × 208", st.Limit, st.Window)
	}
	if p.Latency() != 100*time.Millisecond {
		t.Errorf("latency %v, want the smallest seen, 100ms", p.Latency())
	}

	// Readers pause 3 s: the rate fades to about 1/8 (three half-lives, less two ticks).
	clock.Add(3 * time.Second)
	p.Access(order, 0)
	if st := p.Stats()[0]; st.Limit < 8+25 || st.Limit > 8+30 { // 2 × ~130/s × 0.1 s
		t.Errorf("limit %d after a pause of 3 s, want about %d (rate faded to ~1/8)", st.Limit, 8+26)
	}
	// Twice the horizon later the latency is forgotten: back to the initial window.
	clock.Add(2 * latencyHorizon)
	p.Access(order, 0)
	if st := p.Stats()[0]; st.Limit != 8 || st.Window != 32 || p.Latency() != 0 {
		t.Errorf("limit %d, window %d, latency %v after the horizon, want 8, 32 and none", st.Limit, st.Window, p.Latency())
	}
	// Readers far faster than the window allows: the window stops at MaxWindow.
	p.latency.add(clock.Now(), time.Second)
	for range 10_000 {
		clock.Add(100 * time.Microsecond)
		p.Access(order, 0)
	}
	if st := p.Stats()[0]; st.Window != 1000 {
		t.Errorf("window %d at 10,000 samples/s and 1 s, want the cap 1000", st.Window)
	}
}

// TestMinFilterHorizon: the filter forgets a minimum after one to two half-horizons.
func TestMinFilterHorizon(t *testing.T) {
	var f minFilter
	t0 := time.Unix(0, 0)
	f.add(t0, 50*time.Millisecond)
	f.add(t0.Add(latencyHorizon/2+time.Second), 80*time.Millisecond)
	if got := f.get(t0.Add(latencyHorizon/2 + time.Second)); got != 50*time.Millisecond {
		t.Errorf("one half later: %v, want 50ms (the previous half still counts)", got)
	}
	if got := f.get(t0.Add(latencyHorizon + time.Second)); got != 80*time.Millisecond {
		t.Errorf("two halves later: %v, want 80ms (the first half forgotten)", got)
	}
	if got := f.get(t0.Add(3 * latencyHorizon)); got != 0 {
		t.Errorf("after the horizon: %v, want none", got)
	}
}

// pacedRun is what TestControllerOverSlowLink saw.
type pacedRun struct {
	peakInFlight int   // most prefetches in flight at once
	peakHeld     int64 // most bytes of unread prefetched blobs plus reservations
	shortfall    int   // samples the readers ended behind their pace at the worst
	afterStop    int64 // prefetches issued while the readers paused
	windowAtStop int
	windowAfter  int // window at the first access after a pause
}

// runPaced has readers consume n samples of one epoch in order at rate samples/s from a
// cache over an in-memory store of latency lat, then pause, then read one more.
func runPaced(t *testing.T, lat time.Duration, rate float64, n int, cacheBytes int64) pacedRun {
	t.Helper()
	st := memstore.New("paced", memstore.Options{Latency: func(uuid.UUID) time.Duration { return lat }})
	ids := make([]uuid.UUID, n+1000)
	blob := make([]byte, testBlobSize)
	for k := range ids {
		ids[k] = uuid.New()
		if err := st.Put(context.Background(), store.Sample{ID: ids[k], Name: "c/" + ids[k].String(), Size: testBlobSize, Checksum: sha256.Sum256(blob)}, blob, nil); err != nil {
			t.Fatal(err)
		}
	}
	fetch := func(ctx context.Context, i uint32) ([]byte, error) {
		b, err := st.Get(ctx, ids[i], nil)
		if err != nil {
			return nil, err
		}
		return b.Data, nil
	}
	c := NewCache(fetch, CacheOptions{MaxBytes: cacheBytes})
	defer c.Close()
	p := NewPrefetcher(c, Options{Size: sizeOf})
	defer p.Close()
	order := rotated(len(ids))

	var run pacedRun
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // samples the cache while the readers run
		defer wg.Done()
		for !stop.Load() {
			s := c.Stats()
			c.mu.Lock()
			held := c.freshBytes + c.reserved
			c.mu.Unlock()
			run.peakInFlight = max(run.peakInFlight, s.Prefetches)
			run.peakHeld = max(run.peakHeld, held)
			time.Sleep(time.Millisecond)
		}
	}()
	start := time.Now()
	for pos := range n {
		due := start.Add(time.Duration(float64(pos) / rate * float64(time.Second)))
		if d := time.Until(due); d > 0 {
			time.Sleep(d)
		} else {
			run.shortfall = max(run.shortfall, int(-d.Seconds()*rate))
		}
		p.Access(order, 0)
		if _, err := c.Get(context.Background(), order.Order(0)[pos]); err != nil {
			t.Fatal(err)
		}
	}
	run.windowAtStop = p.Stats()[0].Window
	settle(t, c) // what the last accesses issued arrives
	issued := c.Stats().Prefetched
	time.Sleep(2 * time.Second) // readers pause: two half-lives of the rate
	run.afterStop = c.Stats().Prefetched - issued
	p.Access(order, 0)
	run.windowAfter = p.Stats()[0].Window
	stop.Store(true)
	wg.Wait()
	if err := c.checkInvariants(); err != nil {
		t.Error(err)
	}
	return run
}

// TestControllerOverSlowLink: readers consuming 1,000 samples/s over a link of 150 ms need
// 150 fetches in flight. With default options the controller gets there within a few round
// trips (the readers fall behind their pace by less than five round trips' worth of
// samples, where a fixed initial window of 64 would lose ground all the way), holds no more
// than the cache allows, and stops issuing when the readers stop.
func TestControllerOverSlowLink(t *testing.T) {
	if testing.Short() {
		t.Skip("reads for 2.5 s over an emulated 150 ms link")
	}
	const lat, rate, n = 150 * time.Millisecond, 1000.0, 2500
	need := int(rate * lat.Seconds())
	// A cache of 400 blobs: it holds the need with room to spare, not gain × need + 64.
	const cacheBytes = 400 * testBlobSize
	run := runPaced(t, lat, rate, n, cacheBytes)
	t.Logf("%+v", run)
	if run.peakInFlight < need {
		t.Errorf("at most %d prefetches in flight, want at least the %d the link needs", run.peakInFlight, need)
	}
	if max5 := int(5 * rate * lat.Seconds()); run.shortfall > max5 {
		t.Errorf("readers fell %d samples behind their pace, want at most 5 round trips' worth (%d)", run.shortfall, max5)
	}
	if bound := int64(cacheBytes - cacheBytes/8); run.peakHeld > bound {
		t.Errorf("held %d bytes of unread and in-flight prefetches, over the bound of %d", run.peakHeld, bound)
	}
	if run.afterStop != 0 {
		t.Errorf("%d prefetches issued after the readers stopped", run.afterStop)
	}
	if run.windowAfter > run.windowAtStop/2 {
		t.Errorf("window %d after a 2 s pause, want at most half of the %d before: the rate should have faded", run.windowAfter, run.windowAtStop)
	}
}
