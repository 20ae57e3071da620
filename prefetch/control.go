package prefetch

import (
	"math"
	"sync"
	"time"
)

// The window controller sizes each stream's window from two measurements (see the package
// doc, "Window controller"): the link's latency, as the smallest fetch latency over the last
// latencyHorizon (minFilter), and the stream's consumption rate (rateMeter).

const (
	// gain is how many times the measured need (rate × latency) a window holds. Above 1 it
	// is the headroom that lets readers that are held back by the window speed up: each
	// round trip, the rate the window allows grows by up to this factor.
	gain = 2
	// latencyHorizon is how long a latency measurement counts: long enough to span many
	// round trips, short enough to follow a route that changed.
	latencyHorizon = 10 * time.Second
	// rateHalfLife is how fast a rate measured before fades once readers slow down or stop.
	rateHalfLife = time.Second
	// minTick is the shortest interval a rate is measured over.
	minTick = 10 * time.Millisecond
)

// minFilter is the smallest latency over a sliding horizon, kept as the minima of its two
// halves: the current half and the one before.
type minFilter struct {
	mu        sync.Mutex
	cur, prev time.Duration // 0: no sample in that half
	start     time.Time     // when the current half began
}

func (f *minFilter) rotateLocked(now time.Time) {
	half := latencyHorizon / 2
	switch el := now.Sub(f.start); {
	case el >= 2*half:
		f.cur, f.prev, f.start = 0, 0, now
	case el >= half:
		f.prev, f.cur, f.start = f.cur, 0, f.start.Add(half)
	}
}

// add records one fetch's latency.
func (f *minFilter) add(now time.Time, d time.Duration) {
	if d <= 0 {
		d = 1 // a sample all the same: zero means none
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rotateLocked(now)
	if f.cur == 0 || d < f.cur {
		f.cur = d
	}
}

// get returns the smallest latency of the horizon, 0 if there is none.
func (f *minFilter) get(now time.Time) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rotateLocked(now)
	switch {
	case f.prev == 0:
		return f.cur
	case f.cur == 0:
		return f.prev
	}
	return min(f.cur, f.prev)
}

// rateMeter measures a stream's consumption in samples per second. A measurement covers a
// tick of at least half a round trip (the time a window's worth of fetches takes to show in
// the rate); a higher rate is taken at once, a lower one fades with rateHalfLife once two
// ticks have passed without a measurement, so one slow tick (readers waiting on a
// straggler) does not shrink the window.
type rateMeter struct {
	rate  float64       // samples/s
	at    time.Time     // when rate was measured
	tick  time.Duration // the tick it was measured over
	count int           // accesses in the current tick
	start time.Time     // start of the current tick (zero: none yet)
}

// add counts one access; tick is the shortest measuring interval.
func (m *rateMeter) add(now time.Time, tick time.Duration) {
	if m.start.IsZero() {
		m.start = now // the access that opens the first tick is not in it
		return
	}
	m.count++
	el := now.Sub(m.start)
	if el < max(tick, minTick) {
		return
	}
	m.rate = max(float64(m.count)/el.Seconds(), m.get(now))
	m.at, m.tick, m.start, m.count = now, el, now, 0
}

// get returns the rate as it stands at now: faded if no measurement came for two ticks.
func (m *rateMeter) get(now time.Time) float64 {
	if m.rate == 0 {
		return 0
	}
	late := now.Sub(m.at) - 2*m.tick
	if late <= 0 {
		return m.rate
	}
	return m.rate * math.Exp2(-late.Seconds()/rateHalfLife.Seconds())
}

// limitFor is the number of prefetches a stream may have in flight to keep rate samples per
// second coming when each fetch takes latency: gain times what is in flight at that rate
// (Little's law), on top of the initial window, within [initial, most].
func limitFor(rate float64, latency time.Duration, initial, most int) int {
	need := gain * rate * latency.Seconds()
	if need > float64(most) {
		return most
	}
	return min(most, initial+int(math.Ceil(need)))
}

// aheadFactor is how many times its in-flight limit a stream's window reaches ahead of the
// readers. The slack between the two is what keeps the database busy when the readers stop
// for a late sample (strict order waits for each sample in turn): issuing goes on while
// the window lasts, instead of draining the requests in flight.
const aheadFactor = 4
