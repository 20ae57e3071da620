package prefetch

import (
	"sync"
)

// # Prefetcher
//
// Each split a reader walks is a stream through its epochs, whose order is known in advance.
// The filesystem reports every access (a lookup of a sample of epoch N); the readers'
// progress is the number of samples accessed in the epoch, and the prefetcher keeps the
// samples from that position of the epoch's order up to a window ahead in flight or cached,
// continuing into epoch N+1 before N ends. Blobs enter the cache as they arrive, in any
// order, so one slow fetch never holds up the others.
//
// Progress is counted, not taken from the positions looked up: readers in file_list order
// advance it exactly as their positions do, and readers that shuffle on their own
// (torchvision's DataLoader) advance it as fast as they consume. Under arrival binding
// their names are then bound to the samples fetched ahead; under strict order they profit
// only where their random picks fall into the window.
//
// The window starts small and grows by one for every GrowEvery samples consumed (the 2025
// paper's "one extra batch for every four consumed": at most 25% above the steady rate), so
// a new reader does not burst hundreds of requests onto the link at once. It stops growing
// at MaxWindow, and issuing pauses while prefetched-but-unread blobs fill the cache up to
// KeepFree bytes short of its bound: the window shrinks to what memory holds, and resumes as
// readers consume. Prefetches in flight are capped at MaxInFlight, below the store's own
// bound, so demand reads of samples not yet fetched always find room and jump the queue.

// Options configure a Prefetcher.
type Options struct {
	Size          func(i uint32) int64 // sample i's blob size (required)
	InitialWindow int                  // samples ahead at the start of a stream (default 64)
	MaxWindow     int                  // largest window (default 1024)
	GrowEvery     int                  // consumed samples per extra window slot (default 4)
	MaxInFlight   int                  // prefetches in flight at once (default 128)
	KeepFree      int64                // cache bytes kept free of unread prefetched blobs (default 1/8 of the bound)
}

func (o *Options) defaults(cacheBytes int64) {
	if o.InitialWindow <= 0 {
		// Two batches of a typical loader: enough to keep a start-up at 150 ms round trips
		// from crawling (64 / 0.15 s ≈ 400 images/s) without a burst.
		o.InitialWindow = 64
	}
	if o.MaxWindow <= 0 {
		o.MaxWindow = 1024
	}
	o.InitialWindow = min(o.InitialWindow, o.MaxWindow)
	if o.GrowEvery <= 0 {
		o.GrowEvery = 4
	}
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = 128
	}
	if o.KeepFree <= 0 {
		o.KeepFree = cacheBytes / 8
	}
}

// Order returns the canonical sample index of each position of an epoch of a stream.
type Order func(epoch uint64) []uint32

// Prefetcher walks streams ahead of their readers into a Cache. It is safe for concurrent
// use. Lock order: Prefetcher.mu before Cache.mu.
type Prefetcher struct {
	cache *Cache
	opts  Options

	mu      sync.Mutex
	streams map[string]*stream // guarded by mu
	closed  bool               // guarded by mu
}

type stream struct {
	order    Order
	epoch    uint64   // the newest epoch accessed
	cur      []uint32 // order of epoch
	next     []uint32 // order of epoch+1, once the window reaches it
	accessed int      // accesses in epoch
	head     int      // readers' progress: position accessed-1 of epoch's order
	consumed int64    // accesses so far
	window   int
	// next is the next position to issue: epoch+nextEpoch, position nextPos.
	nextEpoch int // 0 or 1: the prefetcher runs at most one epoch ahead
	nextPos   int
	issued    int64
}

// NewPrefetcher returns a prefetcher filling cache. It takes over the cache's arrival
// notifications; use one prefetcher per cache.
func NewPrefetcher(cache *Cache, opts Options) *Prefetcher {
	opts.defaults(cache.MaxBytes())
	p := &Prefetcher{cache: cache, opts: opts, streams: map[string]*stream{}}
	cache.mu.Lock()
	cache.onArrive = p.arrived
	cache.mu.Unlock()
	return p
}

// Access reports that a reader looked up a sample of epoch of the stream name, whose epochs
// are ordered by order, and issues what the window now allows.
func (p *Prefetcher) Access(name string, order Order, epoch uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	s := p.streams[name]
	if s == nil {
		s = &stream{order: order, epoch: epoch, cur: order(epoch), window: p.opts.InitialWindow}
		p.streams[name] = s
	}
	switch {
	case epoch < s.epoch:
		return // a straggler in an older epoch: the stream has moved on
	case epoch > s.epoch:
		// Readers moved on to a later epoch: what was issued for it is kept.
		if epoch == s.epoch+1 && s.nextEpoch == 1 {
			s.nextEpoch = 0
		} else {
			s.nextEpoch, s.nextPos = 0, 0
		}
		if epoch == s.epoch+1 && s.next != nil {
			s.cur = s.next
		} else {
			s.cur = order(epoch)
		}
		s.epoch, s.next, s.accessed = epoch, nil, 0
	}
	s.accessed++
	s.head = min(s.accessed, len(s.cur)) - 1
	s.consumed++
	if s.consumed%int64(p.opts.GrowEvery) == 0 && s.window < p.opts.MaxWindow {
		s.window++
	}
	p.pumpLocked(s)
}

// pumpLocked issues positions up to the window; it stops early when the cache refuses more.
func (p *Prefetcher) pumpLocked(s *stream) {
	for {
		n := len(s.cur)
		if s.nextEpoch == 0 && s.nextPos >= n {
			// The current epoch is all issued (also when the readers arrive in an epoch
			// the prefetcher had issued to the end): go on with the next.
			s.nextEpoch, s.nextPos = 1, 0
		}
		if s.nextEpoch == 1 {
			if s.next == nil {
				s.next = s.order(s.epoch + 1)
			}
			if s.nextPos >= len(s.next) {
				return // at most one epoch ahead
			}
		}
		ahead := s.nextEpoch*n + s.nextPos // positions from the start of s.epoch
		if ahead > s.head+s.window {
			return
		}
		if s.nextPos < s.head && s.nextEpoch == 0 {
			s.nextPos = s.head // behind the readers: nothing there is worth fetching any more
			continue
		}
		i := s.cur
		if s.nextEpoch == 1 {
			i = s.next
		}
		if !p.cache.Prefetch(i[s.nextPos], p.opts.Size(i[s.nextPos]), p.opts.MaxInFlight, p.opts.KeepFree) {
			return // resumed by the next arrival or access
		}
		s.issued++
		s.nextPos++
	}
}

func (p *Prefetcher) arrived(i uint32, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	for _, s := range p.streams {
		p.pumpLocked(s)
	}
}

// StreamStats describes one stream.
type StreamStats struct {
	Name     string
	Epoch    uint64
	Head     int   // readers' progress in Epoch (samples accessed, less one)
	Window   int   // samples ahead of Head that may be in flight or cached
	Issued   int64 // prefetches issued
	Consumed int64 // accesses reported
}

// Stats returns every stream's state.
func (p *Prefetcher) Stats() []StreamStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []StreamStats
	for name, s := range p.streams {
		out = append(out, StreamStats{Name: name, Epoch: s.epoch, Head: s.head, Window: s.window, Issued: s.issued, Consumed: s.consumed})
	}
	return out
}

// Close stops issuing prefetches; fetches in flight end with the cache's Close.
func (p *Prefetcher) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
}
