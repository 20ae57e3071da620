package prefetch

import (
	"sync"
	"sync/atomic"
	"time"
)

// Options configure a Prefetcher.
type Options struct {
	Size          func(i uint32) int64 // sample i's blob size (required)
	InitialWindow int                  // window and in-flight limit at the start of a stream, and the least limit (default 64)
	MaxWindow     int                  // largest window (default 8192); the controller sizes it below
	MaxInFlight   int                  // most prefetches in flight at once (default 1024); the controller sizes the limit below
	KeepFree      int64                // cache bytes kept free of unread prefetched blobs (default 1/8 of the bound)
	// NextEpochAhead bounds how far the prefetcher runs into the next epoch before readers
	// enter it (default 32): enough to start it without a wait, and little fetched in vain
	// when the readers stop at the end of the epoch.
	NextEpochAhead int
	// Now is the clock the controller measures with (default time.Now); tests set it.
	Now func() time.Time
	// Samples, if set, is the number of samples (canonical indices 0 .. Samples-1): the
	// prefetcher then tells the cache when each blob will be read again, and the cache
	// evicts the one read farthest ahead (future.go). It costs 8 bytes per sample per
	// stream.
	Samples int
	// IdleAfter is how long a stream may go without an access before it is dropped, with
	// its epoch orders and its future (default 2 minutes): a long job that moves from
	// shard to shard or split to split leaves no state and no metric series behind. A
	// stream accessed again starts anew.
	IdleAfter time.Duration
}

func (o *Options) defaults(cacheBytes int64) {
	if o.InitialWindow <= 0 {
		// Two batches of a typical loader: enough to keep a start-up at 150 ms round trips
		// from crawling (64 / 0.15 s ≈ 400 images/s) without a burst.
		o.InitialWindow = 64
	}
	if o.MaxWindow <= 0 {
		o.MaxWindow = 8192
	}
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = 1024
	}
	if o.KeepFree <= 0 {
		o.KeepFree = cacheBytes / 8
	}
	if o.NextEpochAhead <= 0 {
		o.NextEpochAhead = 32
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.IdleAfter <= 0 {
		o.IdleAfter = 2 * time.Minute
	}
}

// Stream is a sequence of epochs whose orders are known in advance: a split as readers walk
// it. Order returns the canonical sample index of each position of an epoch; it is called
// with no lock of this package held and may take its time (it computes a permutation).
// Streams are told apart by name: every Stream named alike must have the same orders.
type Stream interface {
	Name() string
	Order(epoch uint64) []uint32
}

// Continuing is a Stream that takes over from another: its readers are the other's, or
// read alike (a record view's next shard, package view). A new such stream starts with the
// readers' rate as the other measured it, so its window is the size the readers need from
// its first access, where a stream of its own would start small and ramp up while its
// readers wait, a round trip at a time on a long link.
type Continuing interface {
	Stream
	// Continues names the stream taken over from.
	Continues() string
}

// Prefetcher walks streams ahead of their readers into a Cache. It is safe for concurrent
// use; its locks are described in the package doc.
type Prefetcher struct {
	cache   *Cache
	opts    Options
	closed  atomic.Bool
	blocked atomic.Int32 // streams the cache turned away for lack of room
	latency linkDelay    // the link's latency: smallest prefetch latency since the last probe

	dmu       sync.Mutex
	delivered rateMeter // guarded by dmu; prefetches that came back, per second

	mu      sync.Mutex
	streams map[string]*stream        // guarded by mu; by name
	all     atomic.Pointer[[]*stream] // every stream, for Next without mu (copied on change)
	swept   atomic.Int64              // when idle streams were last looked for (Unix nanoseconds)
}

type stream struct {
	src  Stream
	last atomic.Int64 // when it was last accessed (Options.Now, Unix nanoseconds)

	mu       sync.Mutex
	epoch    uint64    // guarded by mu; the newest epoch accessed
	cur      []uint32  // guarded by mu; order of epoch
	next     []uint32  // guarded by mu; order of epoch+1, computed as readers enter epoch (nil until then)
	accessed int       // guarded by mu; accesses in epoch
	head     int       // guarded by mu; readers' progress: position accessed-1 of epoch's order
	consumed int64     // guarded by mu; accesses so far
	rate     rateMeter // guarded by mu; readers' consumption
	limit    int       // guarded by mu; prefetches in flight allowed, set by the controller at every access
	window   int       // guarded by mu; aheadFactor × limit, within MaxWindow
	// The next position to issue is epoch+nextEpoch, position nextPos; guarded by mu.
	nextEpoch int // 0 or 1: the prefetcher runs at most one epoch ahead
	nextPos   int
	issued    int64 // guarded by mu
	// orderingNext: a pump is computing the next epoch's order; guarded by mu.
	orderingNext bool
	blocked      bool // guarded by mu; the cache refused the last prefetch (counted in Prefetcher.blocked)
	dropped      bool // guarded by mu; idle, dropped from Prefetcher.streams: issues nothing more

	fut     atomic.Pointer[streamFuture] // with Options.Samples: the known future (future.go)
	headPos atomic.Int64                 // head, for Next without mu
}

// NewPrefetcher returns a prefetcher filling cache. It takes over the cache's arrival
// notifications; use one prefetcher per cache.
func NewPrefetcher(cache *Cache, opts Options) *Prefetcher {
	opts.defaults(cache.MaxBytes())
	p := &Prefetcher{cache: cache, opts: opts, streams: map[string]*stream{}}
	cache.mu.Lock()
	cache.onArrive = p.arrived
	cache.onRoom = p.wakeBlocked
	cache.mu.Unlock()
	if opts.Samples > 0 {
		cache.useFuture(p)
	}
	return p
}

// stream returns src's state, made at epoch if it is new.
func (p *Prefetcher) stream(src Stream, epoch uint64) *stream {
	name := src.Name()
	p.mu.Lock()
	s := p.streams[name]
	p.mu.Unlock()
	if s != nil {
		return s
	}
	cur := src.Order(epoch) // outside every lock
	var inv []uint32
	if p.opts.Samples > 0 {
		inv = invert(cur, p.opts.Samples)
	}
	now := p.opts.Now()
	var dropped []*stream
	p.mu.Lock()
	var prev *stream
	if s = p.streams[name]; s == nil {
		s = &stream{src: src, epoch: epoch, cur: cur, limit: p.opts.InitialWindow, window: min(p.opts.MaxWindow, p.opts.InitialWindow)}
		s.headPos.Store(-1)
		s.last.Store(now.UnixNano())
		if inv != nil {
			s.publish(inv, nil)
		}
		if c, ok := src.(Continuing); ok {
			prev = p.streams[c.Continues()]
		}
		p.streams[name] = s
		dropped = p.sweepLocked(now, true)
	}
	p.mu.Unlock()
	p.retire(dropped)
	if prev != nil {
		prev.mu.Lock()
		rate := prev.rate
		prev.mu.Unlock()
		s.mu.Lock()
		s.rate = rate
		s.mu.Unlock()
	}
	return s
}

// sweepLocked drops the streams idle for Options.IdleAfter from the set, at most once a
// second unless changed (a stream was added), and publishes the set when it changes. It
// returns the streams dropped, for retire once p.mu is released. p.mu is held.
func (p *Prefetcher) sweepLocked(now time.Time, changed bool) (dropped []*stream) {
	if !changed && now.UnixNano()-p.swept.Load() < int64(time.Second) {
		return nil
	}
	p.swept.Store(now.UnixNano())
	for name, s := range p.streams {
		if now.Sub(time.Unix(0, s.last.Load())) >= p.opts.IdleAfter {
			delete(p.streams, name)
			dropped = append(dropped, s)
		}
	}
	if changed || len(dropped) > 0 {
		all := make([]*stream, 0, len(p.streams))
		for _, x := range p.streams {
			all = append(all, x)
		}
		p.all.Store(&all)
	}
	return dropped
}

// retire stops streams dropped from the set: prefetches of theirs still in flight arrive
// into the cache as any, and issue nothing more; what they prefetched and nobody read yet
// is released (no reader of theirs is coming for it), so it neither holds room back from
// the streams read now nor outlives them unread.
func (p *Prefetcher) retire(dropped []*stream) {
	for _, s := range dropped {
		s.mu.Lock()
		s.dropped = true
		if s.blocked {
			s.blocked = false
			p.blocked.Add(-1)
		}
		// Everything it issued (the epoch up to where it got, and what of the next): what
		// was read is used already, and release leaves it as it is.
		var ahead []uint32
		if s.nextEpoch == 0 {
			ahead = append(ahead, s.cur[:min(s.nextPos, len(s.cur))]...)
		} else {
			ahead = append(ahead, s.cur...)
			if s.next != nil {
				ahead = append(ahead, s.next[:min(s.nextPos, len(s.next))]...)
			}
		}
		s.mu.Unlock()
		p.cache.release(ahead)
	}
}

// sweep drops idle streams, at most once a second (asked at every access).
func (p *Prefetcher) sweep(now time.Time) {
	if now.UnixNano()-p.swept.Load() < int64(time.Second) {
		return
	}
	p.mu.Lock()
	dropped := p.sweepLocked(now, false)
	p.mu.Unlock()
	p.retire(dropped)
}

// Access reports that a reader looked up a sample of epoch of src, and issues what the
// window now allows.
func (p *Prefetcher) Access(src Stream, epoch uint64) { p.AccessN(src, epoch, 1) }

// AccessN reports n accesses at once: readers that read n samples of epoch of src while
// only one of their lookups reached the filesystem (the others were looked up ahead for
// them, package fs). n may be 0: readers began to read src's epoch and have consumed
// nothing more; a stream not known yet starts, issuing from the readers' position.
func (p *Prefetcher) AccessN(src Stream, epoch uint64, n int) {
	if p.closed.Load() || n < 0 {
		return
	}
	s := p.stream(src, epoch)
	now := p.opts.Now()
	s.last.Store(now.UnixNano())
	p.sweep(now)
	var order, inv []uint32 // epoch's order (and its inverse), when the stream moves on to it
	s.mu.Lock()
	for epoch > s.epoch {
		if epoch == s.epoch+1 && s.next != nil {
			order = s.next
			if f := s.fut.Load(); f != nil {
				inv = f.next
			}
		}
		if order == nil {
			s.mu.Unlock()
			order = src.Order(epoch) // outside every lock
			if p.opts.Samples > 0 {
				inv = invert(order, p.opts.Samples)
			}
			s.mu.Lock()
			continue // the stream may have moved meanwhile
		}
		// Readers moved on to a later epoch: what was issued for it is kept.
		if epoch == s.epoch+1 && s.nextEpoch == 1 {
			s.nextEpoch = 0
		} else {
			s.nextEpoch, s.nextPos = 0, 0
		}
		s.cur, s.epoch, s.next, s.accessed = order, epoch, nil, 0
		p.cache.forgetAhead()
		if p.opts.Samples > 0 {
			if inv == nil {
				inv = invert(order, p.opts.Samples)
			}
			s.publish(inv, nil)
		}
	}
	if epoch < s.epoch {
		s.mu.Unlock()
		return // a straggler in an older epoch: the stream has moved on
	}
	s.accessed += n
	s.head = min(s.accessed, len(s.cur)) - 1
	s.headPos.Store(int64(s.head))
	s.consumed += int64(n)
	now = p.opts.Now()
	lat, probe := p.latency.control(now, p.cache.prefetchesInFlight)
	s.rate.addN(now, lat, n)
	p.sizeLocked(s, now, lat, probe)
	// The next epoch's order is computed as soon as readers enter an epoch, not when the
	// window reaches its end: the future the caches evict and admit by (future.go) then
	// covers the next epoch all through this one. It costs one order per epoch either way.
	needNext := p.pumpLocked(s) || s.next == nil
	s.mu.Unlock()
	p.pump(s, needNext)
}

// Rewind has every stream issue again from its readers' position on. The cache passes
// over the samples its CacheOptions.Local reports (the page cache holds them, package
// fs); once some of those are found gone, the positions the streams passed need looking
// at again, or their readers would wait for fetches of them one by one. What is cached
// or in flight is passed again at the cost of a lookup each.
func (p *Prefetcher) Rewind() {
	all := p.all.Load()
	if all == nil || p.closed.Load() {
		return
	}
	for _, s := range *all {
		s.mu.Lock()
		if s.dropped {
			s.mu.Unlock()
			continue
		}
		s.nextEpoch, s.nextPos = 0, max(s.head, 0)
		needNext := p.pumpLocked(s)
		s.mu.Unlock()
		p.pump(s, needNext)
	}
}

// sizeLocked sets s's in-flight limit and window from the rate it is served at — the
// readers' rate, or the rate prefetches come back at if that is lower — and the link's
// latency lat; probe, if positive, caps the limit while the queue drains (linkDelay). The
// window keeps its size during a probe: only issuing slows down, nothing fetched is let go.
func (p *Prefetcher) sizeLocked(s *stream, now time.Time, lat time.Duration, probe int) {
	p.dmu.Lock()
	delivered := p.delivered.get(now)
	p.dmu.Unlock()
	full := limitFor(min(s.rate.get(now), delivered), lat, p.opts.InitialWindow, p.opts.MaxInFlight)
	s.window = min(p.opts.MaxWindow, aheadFactor*full)
	s.limit = full
	if probe > 0 {
		s.limit = min(full, probe)
	}
}

// pump goes on issuing after the next epoch's order was asked for (by pumpLocked or as
// readers enter an epoch); it fetches the order from the stream with no lock held. One
// caller at a time does: readers entering an epoch together all ask, and the others leave
// the issuing to it.
func (p *Prefetcher) pump(s *stream, needNext bool) {
	for needNext {
		s.mu.Lock()
		if s.orderingNext {
			s.mu.Unlock()
			return
		}
		s.orderingNext = true
		e := s.epoch + 1
		s.mu.Unlock()
		order := s.src.Order(e)
		var inv []uint32
		if p.opts.Samples > 0 {
			inv = invert(order, p.opts.Samples)
		}
		s.mu.Lock()
		s.orderingNext = false
		if s.epoch+1 == e && s.next == nil {
			s.next = order
			if f := s.fut.Load(); f != nil && inv != nil {
				s.publish(f.cur, inv)
			}
		}
		needNext = p.pumpLocked(s)
		s.mu.Unlock()
	}
}

// pumpLocked issues positions up to the window; it stops early when the cache refuses more.
// It reports true when it needs the next epoch's order to go on (see pump). What it issued
// into a block not full yet is sent as the cache's rule for blocks says (Cache.flush).
func (p *Prefetcher) pumpLocked(s *stream) (needNext bool) {
	needNext = p.issueLocked(s)
	p.cache.flush()
	return needNext
}

// issueLocked is pumpLocked's issuing.
func (p *Prefetcher) issueLocked(s *stream) (needNext bool) {
	for !p.closed.Load() && !s.dropped {
		n := len(s.cur)
		if s.nextEpoch == 0 && s.nextPos >= n {
			// The current epoch is all issued (also when the readers arrive in an epoch
			// the prefetcher had issued to the end): go on with the next.
			s.nextEpoch, s.nextPos = 1, 0
		}
		ahead := s.nextEpoch*n + s.nextPos // positions from the start of s.epoch
		if ahead > s.head+s.window {
			return false
		}
		if s.nextPos < s.head && s.nextEpoch == 0 {
			s.nextPos = s.head // behind the readers: nothing there is worth fetching any more
			continue
		}
		order := s.cur
		if s.nextEpoch == 1 {
			if s.next == nil {
				return true
			}
			if s.nextPos >= min(len(s.next), p.opts.NextEpochAhead) {
				return false // a little of the next epoch, until readers enter it
			}
			order = s.next
		}
		i := order[s.nextPos]
		if !p.cache.Prefetch(i, PrefetchOptions{Size: p.opts.Size(i), MaxInFlight: s.limit, KeepFree: p.opts.KeepFree, Owner: s}) {
			if !s.blocked {
				s.blocked = true
				p.blocked.Add(1)
			}
			return false // resumed by the next arrival or access
		}
		if s.blocked {
			s.blocked = false
			p.blocked.Add(-1)
		}
		s.issued++
		s.nextPos++
	}
	return false
}

// arrived is the cache's callback when a prefetch ends, after took (ok: with its blob): the
// latency is measured, the stream that issued it may issue more, and so may the streams the
// cache turned away before.
func (p *Prefetcher) arrived(owner any, i uint32, took time.Duration, ok bool) {
	if p.closed.Load() {
		return
	}
	now := p.opts.Now()
	if ok {
		p.latency.add(now, took)
	}
	lat, probe := p.latency.control(now, p.cache.prefetchesInFlight)
	if ok {
		p.dmu.Lock()
		p.delivered.add(now, lat)
		p.dmu.Unlock()
	}
	if s, ok := owner.(*stream); ok {
		s.mu.Lock()
		if s.dropped { // retired while this was in flight: nobody of its is coming for it
			s.mu.Unlock()
			p.cache.release([]uint32{i})
		} else {
			// Sized again here too: a probe begins and ends between accesses, and readers
			// waiting on a sample make none.
			p.sizeLocked(s, now, lat, probe)
			needNext := p.pumpLocked(s)
			s.mu.Unlock()
			p.pump(s, needNext)
		}
	}
	p.wakeBlocked()
}

// wakeBlocked has the streams the cache turned away issue again: a prefetch ended, here or
// (with a shared bound) of another cache of the session.
func (p *Prefetcher) wakeBlocked() {
	if p.closed.Load() || p.blocked.Load() == 0 {
		return
	}
	p.mu.Lock()
	all := make([]*stream, 0, len(p.streams))
	for _, s := range p.streams {
		all = append(all, s)
	}
	p.mu.Unlock()
	for _, s := range all {
		s.mu.Lock()
		needNext := false
		if s.blocked {
			needNext = p.pumpLocked(s)
		}
		s.mu.Unlock()
		p.pump(s, needNext)
	}
}

// StreamStats describes one stream.
type StreamStats struct {
	Name     string
	Epoch    uint64
	Head     int     // readers' progress in Epoch (samples accessed, less one)
	Window   int     // samples ahead of Head that may be in flight or cached
	Limit    int     // prefetches in flight the stream may have (all streams' count toward it)
	Rate     float64 // readers' consumption, samples/s, as the controller measures it
	Issued   int64   // prefetches issued
	Consumed int64   // accesses reported
}

// Stats returns every stream's state. Streams idle for Options.IdleAfter are dropped first.
func (p *Prefetcher) Stats() []StreamStats {
	p.mu.Lock()
	dropped := p.sweepLocked(p.opts.Now(), false)
	all := make([]*stream, 0, len(p.streams))
	for _, s := range p.streams {
		all = append(all, s)
	}
	p.mu.Unlock()
	p.retire(dropped)
	var out []StreamStats
	for _, s := range all {
		s.mu.Lock()
		out = append(out, StreamStats{Name: s.src.Name(), Epoch: s.epoch, Head: s.head, Window: s.window, Limit: s.limit,
			Rate: s.rate.get(p.opts.Now()), Issued: s.issued, Consumed: s.consumed})
		s.mu.Unlock()
	}
	return out
}

// Streams is how many streams the prefetcher holds now (each with its future: 8 bytes per
// sample of the dataset with Options.Samples).
func (p *Prefetcher) Streams() int {
	if all := p.all.Load(); all != nil {
		return len(*all)
	}
	return 0
}

// Latency is the link's latency as the controller sees it: the smallest prefetch latency
// since the last probe drained the queue (0 before the first prefetch arrives).
func (p *Prefetcher) Latency() time.Duration { return p.latency.get() }

// Close stops issuing prefetches; fetches in flight end with the cache's Close.
func (p *Prefetcher) Close() { p.closed.Store(true) }
