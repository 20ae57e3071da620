package prefetch

import (
	"math"
	"sync"
	"time"
)

// The window controller sizes each stream's window from two measurements (see the package
// doc, "Window controller"): the link's latency, as the smallest fetch latency since the
// last probe (linkDelay), and the stream's consumption rate (rateMeter).

const (
	// gain is how many times the measured need (rate × latency) a window holds. Above 1 it
	// is the headroom that lets readers that are held back by the window speed up: each
	// round trip, the rate the window allows grows by up to this factor.
	gain = 2
	// probeEvery is how old the smallest latency may grow before it is measured again with
	// the queue drained: long enough that draining costs little (a probe takes a few round
	// trips), short enough to follow a route that changed.
	probeEvery = 10 * time.Second
	// firstProbe is when the first probe comes where the latency is below
	// firstProbeBelow: a stream starts with a burst of InitialWindow prefetches, so on a
	// busy database even its first fetches may have queued behind each other, and the
	// smallest of them is no link's latency. A probe costs a few round trips of little
	// issuing, which a long link's start cannot spare (bench/README.md, "the window
	// controller cannot feed on its own queue"), and where a round trip is long the
	// queue's share of the smallest latency is small: there the first probe waits for
	// probeEvery.
	firstProbe      = time.Second
	firstProbeBelow = 20 * time.Millisecond
	// probeCap is how many prefetches may be in flight while a probe drains the queue: few
	// enough that they queue behind nothing of ours at the database.
	probeCap = 4
	// probeSamples is how many prefetches issued after the drain a probe measures.
	probeSamples = 4
	// probeGiveUp ends a probe that has not drained and measured within it (readers gone
	// idle, or a database so slow that no prefetch issued after the drain came back): the
	// latency it had stands until the next one.
	probeGiveUp = 2 * time.Second
	// rateHorizon is how long a measured rate counts while readers go on at a lower one.
	rateHorizon = time.Second
	// rateHalfLife is how fast a rate measured before fades once readers slow down or stop.
	rateHalfLife = time.Second
	// minTick is the shortest interval a rate is measured over.
	minTick = 20 * time.Millisecond
)

// linkDelay estimates the link's latency d, the delay a fetch has with no queue of ours in
// front of it, as the smallest fetch latency seen; and it keeps that estimate from being
// its own queue's, as BBR keeps its round-trip estimate (ProbeRTT). When the database is
// the bottleneck every fetch waits behind the others in flight, so no fetch is faster than
// the queue, and a minimum over a sliding horizon rises to the queueing delay once the
// horizon has passed: the limit (about rate × d) then grows with the queue, and the queue
// with the limit, up to MaxInFlight. So the minimum is never forgotten by age; instead,
// when no fetch has come back as fast as it for probeEvery (firstProbe for the first
// time: a start's burst may have queued even the first fetches), the prefetcher drains its
// queue — every stream's limit falls to probeCap until the prefetches in flight are down
// to it — and takes the smallest latency of the next probeSamples prefetches issued after
// the drain as the new minimum (up or down: a route that got longer is followed). A probe
// costs the time to drain and a few round trips at a small limit, every probeEvery; the
// window the readers read ahead of covers it.
type linkDelay struct {
	every time.Duration // probeEvery; tests shorten it

	mu       sync.Mutex
	min      time.Duration // the estimate; 0 until the first fetch came back
	stamp    time.Time     // when min was last confirmed: a fetch as fast, or a probe
	probing  bool
	probed   bool          // a probe has ended
	start    time.Time     // of the probe
	drained  time.Time     // when the probe's drain was done; zero before
	probeMin time.Duration // smallest latency of the prefetches issued after the drain
	probeN   int           // how many came back
}

// add records one prefetch that came back at now after took.
func (l *linkDelay) add(now time.Time, took time.Duration) {
	took = max(took, 1) // zero means none
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.min == 0 || took <= l.min {
		l.min, l.stamp = took, now
	}
	if l.probing && !l.drained.IsZero() && !now.Add(-took).Before(l.drained) {
		if l.probeN == 0 || took < l.probeMin {
			l.probeMin = took
		}
		l.probeN++
	}
}

// get returns the estimate, 0 if there is none yet.
func (l *linkDelay) get() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.min
}

// control returns the estimate and, during a probe, the cap on prefetches in flight (0:
// none); it starts and ends probes. inFlight counts the prefetches in flight now; it is
// called only while a probe waits for the drain.
func (l *linkDelay) control(now time.Time, inFlight func() int) (time.Duration, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.probing {
		every := l.every
		if every == 0 {
			every = probeEvery
		}
		if !l.probed && l.min < firstProbeBelow {
			every = min(every, firstProbe)
		}
		if l.min == 0 || now.Sub(l.stamp) < every {
			return l.min, 0
		}
		l.probing, l.start, l.drained, l.probeN = true, now, time.Time{}, 0
	}
	if l.drained.IsZero() && inFlight() <= probeCap {
		l.drained = now
	}
	switch {
	case !l.drained.IsZero() && l.probeN >= probeSamples:
		l.min, l.stamp, l.probing, l.probed = l.probeMin, now, false, true
		return l.min, 0
	case now.Sub(l.start) >= probeGiveUp:
		l.stamp, l.probing, l.probed = now, false, true
		return l.min, 0
	}
	return l.min, probeCap
}

// rateMeter measures a stream's consumption in samples per second. A measurement covers a
// tick of at least a round trip, the time a window's worth of fetches takes to show in the
// rate: arrivals come in bursts, and a shorter tick would measure a burst. The rate is the
// highest tick of the last rateHorizon (kept as the highest of its two halves, as BBR keeps
// its bottleneck bandwidth), so a higher rate counts at once, one slow tick (readers
// waiting on a straggler) does not shrink the window, and a lower rate that lasts (a
// database that slowed down, another client taking its share) is the rate after at most
// rateHorizon: the limit then comes down with it. Once readers stop, the last rate fades
// with rateHalfLife after two ticks without a measurement.
type rateMeter struct {
	cur, prev float64       // highest tick rate of the current and of the previous half-horizon
	half      time.Time     // when the current half began
	last      float64       // the rate at the last measurement, for the fade
	at        time.Time     // when the last measurement was
	tick      time.Duration // the tick it was measured over
	count     int           // accesses in the current tick
	start     time.Time     // start of the current tick (zero: none yet)
}

func (m *rateMeter) rotate(now time.Time) {
	h := rateHorizon / 2
	switch el := now.Sub(m.half); {
	case el >= 2*h:
		m.cur, m.prev, m.half = 0, 0, now
	case el >= h:
		m.prev, m.cur, m.half = m.cur, 0, m.half.Add(h)
	}
}

// add counts one access; tick is the shortest measuring interval.
func (m *rateMeter) add(now time.Time, tick time.Duration) { m.addN(now, tick, 1) }

// addN counts n accesses at once.
func (m *rateMeter) addN(now time.Time, tick time.Duration, n int) {
	if m.start.IsZero() {
		m.start, m.half = now, now // the accesses that open the first tick are not in it
		return
	}
	m.count += n
	el := now.Sub(m.start)
	if el < max(tick, minTick) {
		return
	}
	// Readers back from a pause start from the faded rate they left with, not from the
	// one tick that spans the pause.
	faded := 0.0
	if now.Sub(m.at)-2*m.tick > 0 {
		faded = m.get(now)
	}
	m.rotate(now)
	m.cur = max(m.cur, float64(m.count)/el.Seconds(), faded)
	m.last = max(m.cur, m.prev)
	m.at, m.tick, m.start, m.count = now, el, now, 0
}

// get returns the rate as it stands at now: faded if no measurement came for two ticks.
func (m *rateMeter) get(now time.Time) float64 {
	late := now.Sub(m.at) - 2*m.tick
	if late <= 0 {
		m.rotate(now)
		return max(m.cur, m.prev)
	}
	return m.last * math.Exp2(-late.Seconds()/rateHalfLife.Seconds())
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
