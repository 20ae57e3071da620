package prefetch

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strings"
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
// × latency, the rate the lower of the readers' (measured from the accesses) and the
// prefetches' (measured from their arrivals), the latency the smallest since the last
// probe, and the window reaches four times the limit ahead; a rate fades once readers stop,
// and a latency not confirmed for probeEvery is probed.
func TestWindowFromRateAndLatency(t *testing.T) {
	// Fetches that never end: no arrival measures a latency behind the test's back.
	never := func(ctx context.Context, i uint32) ([]byte, error) { <-ctx.Done(); return nil, ctx.Err() }
	c := NewCache(fetchFunc(never), CacheOptions{MaxBytes: 1 << 30})
	defer c.Close()
	clock := newFakeClock()
	p := NewPrefetcher(c, Options{Size: sizeOf, InitialWindow: 8, MaxWindow: 1000, MaxInFlight: 10_000, Now: clock.Now})
	defer p.Close()
	p.latency.add(clock.Now(), 300*time.Millisecond)
	p.latency.add(clock.Now(), 100*time.Millisecond) // the smallest counts
	p.latency.probed = true                          // the first probe comes early: not here
	order := rotated(100_000)
	// Each access comes with a prefetch arriving (which the never-ending fetches do not
	// report): the prefetches keep up with the readers.
	access := func() {
		p.Access(order, 0)
		p.dmu.Lock()
		p.delivered.add(clock.Now(), p.latency.get())
		p.dmu.Unlock()
	}
	for range 1000 { // 1,000 samples/s
		clock.Add(time.Millisecond)
		access()
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
	// Readers come back after 20 s: the latency has not been confirmed for probeEvery, so a
	// probe caps the limit at probeCap until the prefetches in flight (which never end
	// here) drain; the window keeps its size, and the latency its value.
	clock.Add(20 * time.Second)
	access()
	if st := p.Stats()[0]; st.Limit != probeCap || st.Window != 4*(8+1) || p.Latency() != 100*time.Millisecond {
		t.Errorf("limit %d, window %d, latency %v in a probe, want %d, %d and 100ms", st.Limit, st.Window, p.Latency(), probeCap, 4*(8+1))
	}
	// The queue never drains: the probe gives up and the limit is the controller's again.
	clock.Add(probeGiveUp)
	p.Access(order, 0)
	if st := p.Stats()[0]; st.Limit <= probeCap {
		t.Errorf("limit %d after a probe gave up, want the controller's", st.Limit)
	}
	// Readers far faster than the window allows: the window stops at MaxWindow.
	for range 10_000 {
		clock.Add(100 * time.Microsecond)
		access()
	}
	if st := p.Stats()[0]; st.Window != 1000 {
		t.Errorf("window %d at 10,000 samples/s and 100 ms, want the cap 1000", st.Window)
	}
}

// TestLinkDelayProbe: the smallest latency is kept however old, until a probe measures it
// again with the queue drained: only prefetches issued after the drain count, and their
// smallest latency replaces the estimate, larger or smaller; a probe that cannot drain gives
// up and keeps the estimate.
func TestLinkDelayProbe(t *testing.T) {
	var l linkDelay
	t0 := time.Unix(0, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	inFlight := 100
	count := func() int { return inFlight }
	// Below firstProbeBelow the first probe comes after firstProbe: a start's burst may
	// have queued even its first fetches.
	var short linkDelay
	short.add(t0, 5*time.Millisecond)
	if _, probe := short.control(at(firstProbe/2), count); probe != 0 {
		t.Fatalf("a probe %v after the first fetch", firstProbe/2)
	}
	if _, probe := short.control(at(firstProbe), count); probe != probeCap {
		t.Fatalf("no first probe after %v at 5 ms", firstProbe)
	}
	if d, probe := short.control(at(firstProbe+probeGiveUp), count); d != 5*time.Millisecond || probe != 0 {
		t.Fatalf("the first probe, never drained: %v, cap %d; want 5ms kept and no cap", d, probe)
	}
	// Above it the first probe waits for probeEvery, as every later one does.
	l.add(t0, 50*time.Millisecond)
	if d, probe := l.control(at(firstProbe), count); d != 50*time.Millisecond || probe != 0 {
		t.Fatalf("control %v after one fetch of 50ms: %v, cap %d; want 50ms, no probe", firstProbe, d, probe)
	}
	// Queued fetches come back slower: the minimum stands (it is not forgotten by age).
	for k := range 20 {
		l.add(at(time.Second+time.Duration(k)*400*time.Millisecond), 900*time.Millisecond)
	}
	d, probe := l.control(at(probeEvery+time.Second), count)
	if d != 50*time.Millisecond || probe != probeCap {
		t.Fatalf("control %v after the minimum was last seen: %v, cap %d; want 50ms and a probe capping at %d", probeEvery, d, probe, probeCap)
	}
	inFlight = probeCap // the queue drained
	if _, probe := l.control(at(probeEvery+1100*time.Millisecond), count); probe != probeCap {
		t.Fatalf("drained, nothing measured: cap %d, want the probe to go on", probe)
	}
	l.add(at(probeEvery+1200*time.Millisecond), 500*time.Millisecond) // issued before the drain: ignored
	for k := range probeSamples {
		l.add(at(probeEvery+1300*time.Millisecond+time.Duration(k)*time.Millisecond), time.Duration(120+k)*time.Millisecond)
	}
	if d, probe := l.control(at(probeEvery+1400*time.Millisecond), count); d != 120*time.Millisecond || probe != 0 {
		t.Errorf("after the probe: %v, cap %d; want the probe's smallest, 120ms, and no cap", d, probe)
	}
	// The next probe cannot drain: it gives up after probeGiveUp and keeps the estimate.
	inFlight = 100
	start := probeEvery + 1400*time.Millisecond + probeEvery
	if _, probe := l.control(at(start), count); probe != probeCap {
		t.Fatalf("second probe did not start")
	}
	if d, probe := l.control(at(start+probeGiveUp), count); d != 120*time.Millisecond || probe != 0 {
		t.Errorf("a probe that could not drain: %v, cap %d; want 120ms kept and no cap", d, probe)
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
	c := NewCache(fetchFunc(fetch), CacheOptions{MaxBytes: cacheBytes})
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

// queueDB is a simulated database behind a link: a fetch crosses the link (half of link
// each way) and waits its turn for one of a few workers, each serving one fetch at a time
// in service (which a test may change mid-run: a slowdown). So it has a throughput of
// workers/service, a latency of link + service when idle, and a queue that grows with
// everything a client keeps in flight beyond that.
type queueDB struct {
	link    time.Duration
	slots   chan struct{}
	service atomic.Int64 // nanoseconds
	queued  atomic.Int64 // fetches waiting for a worker
}

func newQueueDB(link time.Duration, workers int, service time.Duration) *queueDB {
	q := &queueDB{link: link, slots: make(chan struct{}, workers)}
	q.service.Store(int64(service))
	return q
}

func (q *queueDB) fetch(ctx context.Context, i uint32) ([]byte, error) {
	time.Sleep(q.link / 2)
	q.queued.Add(1)
	select {
	case q.slots <- struct{}{}:
	case <-ctx.Done():
		q.queued.Add(-1)
		return nil, ctx.Err()
	}
	q.queued.Add(-1)
	time.Sleep(time.Duration(q.service.Load()))
	<-q.slots
	time.Sleep(q.link / 2)
	return make([]byte, testBlobSize), nil
}

// queueRun is what a run against a queueDB saw, sampled every few milliseconds.
type queueRun struct {
	at       []time.Duration // since the start
	inFlight []int           // prefetches in flight
	queued   []int64         // fetches waiting at the database
	read     []int64         // samples read so far
	limit    []int           // the stream's limit
	measured []float64       // the readers' rate as the controller measures it
	lat      []time.Duration // the controller's latency
	latency  time.Duration   // the controller's latency at the end
}

// trace is the run's samples in [from, to), every tenth, for a failure message.
func (r *queueRun) trace(from, to time.Duration) string {
	var b strings.Builder
	n := 0
	r.between(from, to, func(k int) {
		if n++; n%10 == 1 {
			fmt.Fprintf(&b, "\n  %v: in flight %d, queued %d, limit %d, rate %.0f/s, latency %v", r.at[k].Round(time.Millisecond), r.inFlight[k], r.queued[k], r.limit[k], r.measured[k], r.lat[k].Round(100*time.Microsecond))
		}
	})
	return b.String()
}

// between returns the samples of f in [from, to) of the run.
func (r *queueRun) between(from, to time.Duration, f func(k int)) {
	for k, at := range r.at {
		if at >= from && at < to {
			f(k)
		}
	}
}

// rate is the samples read per second in [from, to).
func (r *queueRun) rate(from, to time.Duration) float64 {
	first, last := -1, -1
	r.between(from, to, func(k int) {
		if first < 0 {
			first = k
		}
		last = k
	})
	if first < 0 || last == first {
		return 0
	}
	return float64(r.read[last]-r.read[first]) / (r.at[last] - r.at[first]).Seconds()
}

// runQueue has 16 readers read n samples of one epoch in order as fast as they can through
// a cache and a prefetcher (with opts, probing every probe) over db; during, if it is
// called, runs beside them (a slowdown).
func runQueue(t *testing.T, db *queueDB, n int, opts Options, probe time.Duration, during func()) *queueRun {
	t.Helper()
	c := NewCache(fetchFunc(db.fetch), CacheOptions{MaxBytes: 4000 * testBlobSize})
	defer c.Close()
	opts.Size = sizeOf
	p := NewPrefetcher(c, opts)
	defer p.Close()
	p.latency.every = probe
	order := rotated(n)
	run := &queueRun{}
	var read atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	start := time.Now()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			run.at = append(run.at, time.Since(start))
			run.inFlight = append(run.inFlight, c.Stats().Prefetches)
			run.queued = append(run.queued, db.queued.Load())
			run.read = append(run.read, read.Load())
			var st StreamStats
			if sts := p.Stats(); len(sts) > 0 {
				st = sts[0]
			}
			run.limit = append(run.limit, st.Limit)
			run.measured = append(run.measured, st.Rate)
			run.lat = append(run.lat, p.Latency())
			time.Sleep(5 * time.Millisecond)
		}
	}()
	if during != nil {
		go during()
	}
	var next atomic.Int64
	var readers sync.WaitGroup
	for range 16 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				pos := int(next.Add(1)) - 1
				if pos >= n {
					return
				}
				p.Access(order, 0)
				if _, err := c.Get(context.Background(), order.Order(0)[pos]); err != nil {
					t.Error(err)
					return
				}
				read.Add(1)
			}
		}()
	}
	readers.Wait()
	run.latency = p.Latency()
	stop.Store(true)
	wg.Wait()
	return run
}

// TestControllerOnASaturatedDatabase: readers faster than the database (2 workers of 1 ms:
// 2,000 samples/s, next to no link). The database's own queue must not pass for the link:
// the latency the controller keeps stays near what a fetch takes with only the readers' own
// requests queued, the prefetches in flight stay near the initial window (the database
// needs 2), and the readers get the throughput a fixed window of 64 gets them. A controller
// whose latency is the smallest of a recent horizon takes the queueing delay for the link
// once the horizon has passed, and doubles its limit each round on its own queue, up to
// MaxInFlight.
func TestControllerOnASaturatedDatabase(t *testing.T) {
	if testing.Short() {
		t.Skip("reads for 6 s from a simulated database")
	}
	fixed := runQueue(t, newQueueDB(0, 2, time.Millisecond), 6000, Options{InitialWindow: 64, MaxInFlight: 64}, 300*time.Millisecond, nil)
	fixedRate := fixed.rate(500*time.Millisecond, time.Hour)
	db := newQueueDB(0, 2, time.Millisecond)
	run := runQueue(t, db, 6000, Options{}, 300*time.Millisecond, nil)
	var peak int
	var peakQueue int64
	run.between(500*time.Millisecond, time.Hour, func(k int) {
		peak, peakQueue = max(peak, run.inFlight[k]), max(peakQueue, run.queued[k])
	})
	rate := run.rate(500*time.Millisecond, time.Hour)
	t.Logf("after 0.5 s: up to %d prefetches in flight, %d queued; %.0f samples/s (a fixed window of 64: %.0f); latency %v", peak, peakQueue, rate, fixedRate, run.latency)
	if peak > 200 || peakQueue > 200 {
		t.Errorf("up to %d prefetches in flight and %d fetches queued at the database, want at most 200: the controller fed on its own queue", peak, peakQueue)
	}
	if run.latency > 20*time.Millisecond {
		t.Errorf("the controller's latency is %v on a link of next to none with 1 ms of service: it measured its own queue", run.latency)
	}
	if rate < 0.9*fixedRate {
		t.Errorf("readers got %.0f samples/s, with a fixed window of 64 %.0f", rate, fixedRate)
	}
}

// TestControllerThroughASlowdown: over a 20 ms link, a database of 2,000 samples/s slows to
// 400/s for 1.5 s (a compaction, another client) and recovers. While it is slow the
// prefetches in flight come down (the readers' rate, and with it the limit, falls within
// the rate's horizon), and within a second after it the readers are back at speed.
func TestControllerThroughASlowdown(t *testing.T) {
	if testing.Short() {
		t.Skip("reads for 5 s from a simulated database")
	}
	db := newQueueDB(20*time.Millisecond, 2, time.Millisecond)
	const slowFrom, slowTo = 1500 * time.Millisecond, 3 * time.Second
	run := runQueue(t, db, 7500, Options{}, 300*time.Millisecond, func() {
		time.Sleep(slowFrom)
		db.service.Store(int64(5 * time.Millisecond))
		time.Sleep(slowTo - slowFrom)
		db.service.Store(int64(time.Millisecond))
	})
	mean := func(from, to time.Duration) float64 {
		sum, n := 0, 0
		run.between(from, to, func(k int) { sum += run.inFlight[k]; n++ })
		return float64(sum) / float64(max(n, 1))
	}
	before, slow := mean(500*time.Millisecond, slowFrom), mean(slowFrom+time.Second, slowTo)
	rateBefore, rateAfter := run.rate(500*time.Millisecond, slowFrom), run.rate(slowTo+time.Second, time.Hour)
	t.Logf("in flight %.0f before, %.0f in the slowdown's last half second; %.0f samples/s before, %.0f a second after", before, slow, rateBefore, rateAfter)
	if slow > 0.8*before {
		t.Errorf("%.0f prefetches in flight while the database was slow, %.0f before: the limit did not come down%s", slow, before, run.trace(500*time.Millisecond, slowTo))
	}
	if rateAfter < 0.8*rateBefore {
		t.Errorf("%.0f samples/s a second after the slowdown, %.0f before: not recovered", rateAfter, rateBefore)
	}
}

// continuingStream is a testStream that takes over from another (Continuing).
type continuingStream struct {
	*testStream
	from string
}

func (s *continuingStream) Continues() string { return s.from }

// TestContinuingStreamStartsAtItsReadersRate: a stream that takes over from another starts
// with the other's readers' rate, so its first access sizes its window for them; a stream
// of its own starts at InitialWindow.
func TestContinuingStreamStartsAtItsReadersRate(t *testing.T) {
	never := func(ctx context.Context, i uint32) ([]byte, error) { <-ctx.Done(); return nil, ctx.Err() }
	c := NewCache(fetchFunc(never), CacheOptions{MaxBytes: 1 << 30})
	defer c.Close()
	clock := newFakeClock()
	p := NewPrefetcher(c, Options{Size: sizeOf, InitialWindow: 8, MaxWindow: 10_000, MaxInFlight: 10_000, Now: clock.Now})
	defer p.Close()
	p.latency.add(clock.Now(), 100*time.Millisecond)
	p.latency.probed = true
	first := rotated(100_000)
	for range 1000 { // 1,000 samples/s
		clock.Add(time.Millisecond)
		p.Access(first, 0)
		p.dmu.Lock()
		p.delivered.add(clock.Now(), p.latency.get())
		p.dmu.Unlock()
	}
	next := &continuingStream{&testStream{"next", first.order}, "all"}
	alone := &continuingStream{&testStream{"alone", first.order}, "none"}
	p.Access(next, 0)
	p.Access(alone, 0)
	stats := map[string]StreamStats{}
	for _, st := range p.Stats() {
		stats[st.Name] = st
	}
	if got, want := stats["next"].Limit, stats["all"].Limit; got < want-2 || want < 100 {
		t.Errorf("a continuing stream's first limit %d, want about its predecessor's %d", got, want)
	}
	if got := stats["alone"].Limit; got > 16 {
		t.Errorf("a stream continuing none starts with limit %d, want about InitialWindow (8)", got)
	}
}
