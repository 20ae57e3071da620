package prefetch

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cassfs/cassfs/evict"
	"github.com/cassfs/cassfs/internal/bitset"
	"github.com/cassfs/cassfs/internal/inflight"
)

// Fetcher reads sample i's blob (the sample's canonical index in the mount's index): the
// link below the Cache in the read chain (see the package doc). A Fetch must honour ctx
// and have a deadline of its own; the Cache never modifies the slice it returns.
type Fetcher interface {
	Fetch(ctx context.Context, i uint32) ([]byte, error)
}

// FetchError is a failed fetch of one sample, shared by everyone who waited for it.
type FetchError struct {
	Sample uint32
	Err    error
}

func (e *FetchError) Error() string { return fmt.Sprintf("fetch sample #%d: %v", e.Sample, e.Err) }
func (e *FetchError) Unwrap() error { return e.Err }

// CacheOptions configure a Cache.
type CacheOptions struct {
	// MaxBytes bounds the bytes of cached blobs (default 1 GiB).
	MaxBytes int64
	// FailureMemory is how long a failed fetch answers Gets of its sample with the same
	// error before a new fetch is tried (default 1 s; negative: not at all).
	FailureMemory time.Duration
	// Samples, if set, is the number of samples (indices 0 .. Samples-1): Has then answers
	// from a bitset without taking the cache's lock (1 bit per sample).
	Samples int
	// Local, if set, reports samples readers get without this cache: from a local file
	// (the disk tier, passed through or spliced by package fs), or from the kernel's page
	// cache, which has them whole from an earlier epoch. Prefetch leaves them alone; should
	// that change (pages reclaimed), Prefetcher.Rewind has the streams look again.
	Local func(i uint32) bool
	// Push, if set, is handed each prefetched blob as it arrives (not one a reader waits
	// for: its READ is on its way) and reports whether the blob is now where its reader
	// reads it without asking the cache (the kernel's page cache, package fs). Such a blob
	// counts as read once its reader looks it up (Looked): no Get may come to say so, and
	// a fresh blob never read would hold back prefetching. It stays cached, first in line
	// for eviction, for a READ that still comes (pages the kernel reclaimed).
	Push func(i uint32, data []byte) bool
	// SkipPush, if set with Push, reports whether Push would do nothing for sample i now
	// (its bytes are where its reader reads them already): a held blob wanted again is
	// then not handed to Push. It is called under the cache's lock: it must not block.
	SkipPush func(i uint32) bool
	// Shared, if set, bounds the prefetches in flight of every cache reading through one
	// database session (package inflight): each prefetch takes a slot, so that the
	// session's own bound keeps room for demand reads whichever mount they are of. Demand
	// reads take none.
	Shared *inflight.Bound
	// Block has prefetches read in blocks where the Fetcher is a BlockFetcher and
	// Block.Samples is above 1 (see Blocks in the package doc).
	Block BlockOptions
}

// Cache is a byte-bounded cache of blobs with deduplicated fetches. It is safe for
// concurrent use.
type Cache struct {
	local    func(i uint32) bool // nil: none
	push     func(i uint32, data []byte) bool
	skipPush func(i uint32) bool // nil: never
	shared   *inflight.Bound     // nil: none
	fetch    Fetcher
	maxBytes int64
	ctx      context.Context // cancelled by Close; parent of every fetch
	cancel   context.CancelFunc
	wg       sync.WaitGroup

	mu         sync.Mutex         // see the package doc's lock order
	fresh      *blobLRU           // guarded by mu; prefetched, not yet read
	used       usedSet            // guarded by mu; read at least once
	reads      uint64             // guarded by mu; reads served: the clock of a known future
	bytes      int64              // guarded by mu; cached blobs' lengths, and their shares' slack (share.go)
	freshBytes int64              // guarded by mu
	inflight   map[uint32]*call   // guarded by mu
	failed     map[uint32]failure // guarded by mu; recent failures
	failFor    time.Duration
	prefetches int                                                    // guarded by mu; fetches in flight started by Prefetch
	reserved   int64                                                  // guarded by mu; expected bytes of prefetches in flight
	onArrive   func(owner any, i uint32, took time.Duration, ok bool) // set once before use; called, without mu, after each prefetch of sample i ends
	onRoom     func()                                                 // set once before use; called, without mu, when the shared bound frees a slot after turning this cache away
	present    bitset.Set                                             // sample i is cached; written under mu, read without it (nil: no Samples)
	pushed     map[uint32]struct{}                                    // guarded by mu; fresh blobs handed to push, not looked up since
	ahead      map[uint32]struct{}                                    // guarded by mu; pushed by PushHeld before Prefetch wanted them, until a stream moves on (forgetAhead)
	// skipped: Prefetch passed sample i over as pushed ahead (guarded by mu; nil: no
	// Samples); a reader's fetch of it next means the push was lost (CacheStats).
	skipped bitset.Set

	// Blocks (nil blocks: none). pend is the prefetches queued for the next block, of
	// pendBytes reserved; sent counts the samples of blocks sent and not yet answered;
	// holding, the blocks whose answers are being handed out (a partial block waits for
	// them: the prefetches their arrivals issue join it). All guarded by mu.
	blocks    BlockFetcher
	blockOpts BlockOptions
	pend      []pending
	pendBytes int64
	sent      int
	holding   int

	// shares: the sample → the share its cached blob is carved from (share.go); a
	// sample not in it holds memory of its own. Guarded by mu.
	shares map[uint32]*share

	stats cacheCounters
}

// pending is a prefetch queued for a block.
type pending struct {
	i        uint32
	cl       *call
	reserved int64
}

type failure struct {
	err   *FetchError
	until time.Time
}

type call struct {
	done     chan struct{} // closed when data or err is set
	data     []byte
	err      *FetchError
	demanded bool // guarded by Cache.mu; a reader waits for it, so it arrives consumed
	queued   bool // guarded by Cache.mu; waiting in Cache.pend for a block
	inBlock  bool // guarded by Cache.mu; sent in a block
	owner    any  // who asked for the prefetch (Prefetch's owner), told when it ends
}

type cacheCounters struct {
	hits, misses, waits, fetchErrors, evictions, prefetched, dropped, pushesLost atomic.Int64
	blocks, blockSamples, blockHedges, copied                                    atomic.Int64
}

// CacheStats is a snapshot of a cache's counters.
type CacheStats struct {
	Hits        int64 // Gets served from memory
	Misses      int64 // Gets that started a fetch
	Waits       int64 // Gets that joined a fetch in flight (a demand read or a prefetch)
	Prefetched  int64 // fetches started by Prefetch
	FetchErrors int64
	Evictions   int64
	Dropped     int64 // prefetched blobs not kept for lack of room
	// PushesLost counts samples Prefetch passed over because they were pushed when their
	// names were looked up ahead (PushHeld), whose next fetch was nonetheless a reader's:
	// the pushed pages were gone from the page cache when the reader came.
	PushesLost int64
	// Blocks counts the blocks sent, BlockSamples the samples in them, BlockHedges the
	// samples of blocks readers waited for past BlockOptions.HedgeAfter and read alone.
	Blocks, BlockSamples, BlockHedges int64
	// Copied counts blobs of a block's answer copied into memory of their own when the
	// cache evicted another blob of that answer (share.go).
	Copied     int64
	Bytes      int64 // bytes cached now
	FreshBytes int64 // of which prefetched and not yet read
	Entries    int
	InFlight   int // fetches in flight
	Prefetches int // of which started by Prefetch
}

// NewCache returns a cache over fetch.
func NewCache(fetch Fetcher, opts CacheOptions) *Cache {
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = 1 << 30
	}
	if opts.FailureMemory == 0 {
		opts.FailureMemory = time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Cache{
		fetch: fetch, maxBytes: opts.MaxBytes, ctx: ctx, cancel: cancel,
		fresh: newBlobLRU(), used: newLRUUsed(), inflight: map[uint32]*call{},
		failed: map[uint32]failure{}, failFor: opts.FailureMemory, local: opts.Local,
		push: opts.Push, skipPush: opts.SkipPush, shared: opts.Shared, pushed: map[uint32]struct{}{}, ahead: map[uint32]struct{}{},
		shares: map[uint32]*share{},
	}
	if opts.Samples > 0 {
		c.present = bitset.New(opts.Samples)
		c.skipped = bitset.New(opts.Samples)
	}
	if bf, ok := fetch.(BlockFetcher); ok && opts.Block.Samples > 1 {
		c.blocks, c.blockOpts = bf, opts.Block
		if c.blockOpts.Bytes <= 0 {
			c.blockOpts.Bytes = 4 << 20
		}
		if c.blockOpts.HedgeAfter == 0 {
			c.blockOpts.HedgeAfter = time.Second
		}
	}
	return c
}

// useFuture makes the cache evict, among read blobs, the one f says is read farthest
// ahead (Belady's MIN) instead of the least recently read. Called once, before use.
func (c *Cache) useFuture(f evict.Future) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.used
	c.used = newMinUsed(f, &c.reads)
	for _, i := range old.keys() {
		d, _ := old.peek(i)
		c.used.add(i, d)
	}
}

// MaxBytes is the cache's bound.
func (c *Cache) MaxBytes() int64 { return c.maxBytes }

// Get returns sample i's bytes, fetching them if needed.
func (c *Cache) Get(ctx context.Context, i uint32) ([]byte, error) {
	c.mu.Lock()
	c.reads++
	if data, ok := c.used.get(i); ok {
		c.mu.Unlock()
		c.stats.hits.Add(1)
		return data, nil
	}
	if data, ok := c.consumeLocked(i); ok {
		c.mu.Unlock()
		c.stats.hits.Add(1)
		return data, nil
	}
	if f, ok := c.failed[i]; ok {
		if time.Now().Before(f.until) {
			c.mu.Unlock()
			return nil, f.err
		}
		delete(c.failed, i)
	}
	cl, joined := c.inflight[i]
	if joined {
		cl.demanded = true
		if cl.queued {
			c.unqueueLocked(i, cl) // a reader waits: asked for by itself now, not with a block
		}
	} else {
		if err := c.ctx.Err(); err != nil {
			c.mu.Unlock()
			return nil, fmt.Errorf("cache closed: %w", err)
		}
		if c.skipped.Has(i) {
			c.stats.pushesLost.Add(1)
		}
		cl = c.startLocked(i, -1, nil)
		cl.demanded = true
	}
	inBlock := cl.inBlock
	c.mu.Unlock()
	if joined {
		c.stats.waits.Add(1)
	} else {
		c.stats.misses.Add(1)
	}
	if inBlock && c.blockOpts.HedgeAfter > 0 {
		return c.waitBlock(ctx, i, cl)
	}
	select {
	case <-cl.done:
		return cl.result()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// PrefetchOptions describe one prefetch (Cache.Prefetch).
type PrefetchOptions struct {
	// Size is the sample's size in bytes, reserved in the cache while the fetch is in flight.
	Size int64
	// MaxInFlight: nothing is started while this many prefetches are in flight.
	MaxInFlight int
	// KeepFree: nothing is started while fresh blobs and those in flight would fill the
	// cache to less than this many bytes short of its bound (the prefetcher then waits for
	// readers to catch up).
	KeepFree int64
	// Owner is handed to the arrival callback when the fetch ends.
	Owner any
}

// Prefetch starts fetching sample i in the background unless it is cached, in flight or
// local (CacheOptions.Local). It never blocks. It reports false, starting nothing, when
// o's bounds (or the shared bound, CacheOptions.Shared) leave no room.
func (c *Cache) Prefetch(i uint32, o PrefetchOptions) bool {
	if c.local != nil && c.local(i) {
		return true // its readers read a local file
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fresh.Contains(i) || c.inflight[i] != nil {
		return true
	}
	if _, ok := c.ahead[i]; ok {
		// Its name was looked up ahead of its reader, and it was pushed then (PushHeld): the
		// reader reads it from the page cache, so it is not wanted here again.
		delete(c.ahead, i)
		c.skipped.Put(i, true)
		return true
	}
	if data, ok := c.used.peek(i); ok {
		// Read before (in an earlier epoch) and wanted again soon: make it fresh, or
		// used-first eviction would drop it just before its reader arrives.
		c.used.remove(i)
		c.fresh.Add(i, data)
		c.freshBytes += int64(len(data))
		if c.push != nil && c.ctx.Err() == nil {
			// Its pages may be gone from the kernel's cache since it was read: push it
			// again, off the caller's lock (a push is a system call and a copy), unless
			// they are known to be there (a goroutine per sample of a warm epoch for
			// nothing cost the daemon measurably: bench/history/journal.md).
			c.pushed[i] = struct{}{}
			if c.skipPush == nil || !c.skipPush(i) {
				c.wg.Add(1)
				go c.pushHeld(i, data)
			}
		}
		return true
	}
	if c.prefetches >= o.MaxInFlight || c.freshBytes+c.reserved+o.Size+o.KeepFree > c.maxBytes || c.ctx.Err() != nil {
		return false
	}
	if c.shared != nil && !c.shared.TryAcquire(c, c.roomFreed) {
		return false // the session's prefetches are at their bound: told when one ends
	}
	c.reserved += o.Size
	if c.blocks != nil && (c.blockOpts.Alone == nil || !c.blockOpts.Alone(i)) {
		c.queueLocked(i, o.Size, o.Owner)
	} else {
		c.startLocked(i, o.Size, o.Owner)
	}
	c.stats.prefetched.Add(1)
	return true
}

// prefetchesInFlight is how many prefetches are in flight now.
func (c *Cache) prefetchesInFlight() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.prefetches
}

// startLocked starts a fetch; reserved is the size a prefetch reserved, or -1 for a demand
// read, and owner the prefetch's owner.
func (c *Cache) startLocked(i uint32, reserved int64, owner any) *call {
	c.skipped.Put(i, false)
	cl := &call{done: make(chan struct{}), owner: owner}
	c.inflight[i] = cl
	if reserved >= 0 {
		c.prefetches++
	}
	c.wg.Add(1)
	go c.run(i, cl, reserved)
	return cl
}

func (c *Cache) run(i uint32, cl *call, reserved int64) {
	defer c.wg.Done()
	start := time.Now()
	data, err := c.fetch.Fetch(c.ctx, i)
	c.finish(i, cl, reserved, data, err, time.Since(start))
}

// roomFreed is told by the shared bound that a slot freed after it turned this cache away.
func (c *Cache) roomFreed() {
	c.mu.Lock()
	f := c.onRoom
	c.mu.Unlock()
	if f != nil {
		f()
	}
}

// insertLocked caches data within the bound: it evicts used blobs first; then a fresh
// (unread) blob is dropped, while a consumed one evicts the oldest fresh blobs. sh is the
// share data is carved from, or nil.
func (c *Cache) insertLocked(i uint32, data []byte, fresh bool, sh *share) {
	n := int64(len(data))
	if n > c.maxBytes {
		return
	}
	for c.bytes+n > c.maxBytes {
		j, old, ok := c.used.victim()
		if !ok {
			if fresh {
				c.stats.dropped.Add(1)
				return
			}
			if j, old, ok = c.fresh.RemoveOldest(); !ok {
				break
			}
			c.freshBytes -= int64(len(old))
			delete(c.pushed, j)
		}
		c.letGoLocked(j, old, true)
		c.mark(j, false)
		c.stats.evictions.Add(1)
	}
	c.mark(i, true)
	if fresh {
		c.fresh.Add(i, data)
		c.freshBytes += n
	} else {
		c.used.add(i, data)
	}
	c.bytes += n
	if sh != nil {
		c.shares[i] = sh
		sh.cached++
	}
}

// Drop forgets sample i's blob: its readers read it elsewhere (its file in the disk tier,
// passed through or spliced), so its memory goes to blobs that will be read from here. A
// prefetched blob nobody reads from the cache would otherwise stay fresh, and fresh blobs
// filling the cache stop prefetching.
func (c *Cache) Drop(i uint32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if data, ok := c.fresh.Peek(i); ok {
		c.fresh.Remove(i)
		c.freshBytes -= int64(len(data))
		c.letGoLocked(i, data, false)
		delete(c.pushed, i)
	} else if data, ok := c.used.peek(i); ok {
		c.used.remove(i)
		c.letGoLocked(i, data, false)
	} else {
		return
	}
	c.mark(i, false)
}

// consumeLocked makes sample i's fresh blob used (it counts as read) and returns it; false
// if it is not fresh.
func (c *Cache) consumeLocked(i uint32) ([]byte, bool) {
	data, ok := c.fresh.Peek(i)
	if !ok {
		return nil, false
	}
	c.fresh.Remove(i)
	c.freshBytes -= int64(len(data))
	c.used.add(i, data)
	delete(c.pushed, i)
	return data, true
}

// release makes the fresh blobs of samples used, as if read: a stream that prefetched them
// is gone, and no reader of its is coming for them (Prefetcher.retire).
func (c *Cache) release(samples []uint32) {
	if len(samples) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, i := range samples {
		c.consumeLocked(i)
	}
}

// Has reports whether sample i's blob is in memory (fetched, not evicted). With
// CacheOptions.Samples it takes no lock: arrival binding asks it for many samples per
// lookup.
func (c *Cache) Has(i uint32) bool {
	if c.present != nil {
		return c.present.Has(i)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	_, used := c.used.peek(i)
	return c.fresh.Contains(i) || used
}

// mark records in the presence bitset whether sample i is cached (mu is held).
func (c *Cache) mark(i uint32, on bool) { c.present.Put(i, on) }

// Stats returns the cache's counters.
func (c *Cache) Stats() CacheStats {
	c.mu.Lock()
	s := CacheStats{Bytes: c.bytes, FreshBytes: c.freshBytes, Entries: c.used.len() + c.fresh.Len(),
		InFlight: len(c.inflight), Prefetches: c.prefetches}
	c.mu.Unlock()
	s.Hits, s.Misses, s.Waits = c.stats.hits.Load(), c.stats.misses.Load(), c.stats.waits.Load()
	s.FetchErrors, s.Evictions, s.Prefetched = c.stats.fetchErrors.Load(), c.stats.evictions.Load(), c.stats.prefetched.Load()
	s.Dropped, s.PushesLost = c.stats.dropped.Load(), c.stats.pushesLost.Load()
	s.Blocks, s.BlockSamples, s.BlockHedges = c.stats.blocks.Load(), c.stats.blockSamples.Load(), c.stats.blockHedges.Load()
	s.Copied = c.stats.copied.Load()
	return s
}

// Close cancels fetches in flight and waits for them to end. Gets after Close fail.
func (c *Cache) Close() {
	// Under mu: Get and Prefetch check the context under mu before they add a fetch to
	// wg, so none is added once Wait may have begun (an Add concurrent with Wait panics).
	c.mu.Lock()
	c.cancel()
	if len(c.pend) > 0 {
		c.sendLocked() // ended with the context's error: their waiters are told
	}
	c.mu.Unlock()
	c.wg.Wait()
}

// checkInvariants reports the first way the cache's state contradicts itself, from what it
// actually holds rather than its own counters: the bytes of its entries against bytes,
// freshBytes and the bound, an entry both fresh and used, in flight and cached at once, or
// reservations without prefetches. Tests call it; it takes the lock.
func (c *Cache) checkInvariants() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var fresh, used int64
	for _, i := range c.fresh.Keys() {
		data, _ := c.fresh.Peek(i)
		fresh += int64(len(data))
		if _, ok := c.used.peek(i); ok {
			return fmt.Errorf("sample %d is both fresh and used", i)
		}
		if c.inflight[i] != nil {
			return fmt.Errorf("sample %d is cached and in flight", i)
		}
	}
	for i := range c.pushed {
		if !c.fresh.Contains(i) {
			return fmt.Errorf("sample %d is marked pushed but is not fresh", i)
		}
	}
	for _, i := range c.used.keys() {
		data, _ := c.used.peek(i)
		used += int64(len(data))
	}
	slack, err := c.checkSharesLocked()
	if err != nil {
		return err
	}
	if c.present != nil {
		for i := range uint32(len(c.present) * 64) {
			_, used := c.used.peek(i)
			if on := c.present.Has(i); on != (c.fresh.Contains(i) || used) {
				return fmt.Errorf("sample %d: presence bit %v, cached %v", i, on, !on)
			}
		}
	}
	switch {
	case fresh+used+slack != c.bytes:
		return fmt.Errorf("entries hold %d bytes (%d fresh, %d used) and their shares %d more, the counter says %d", fresh+used, fresh, used, slack, c.bytes)
	case fresh != c.freshBytes:
		return fmt.Errorf("fresh entries hold %d bytes, the counter says %d", fresh, c.freshBytes)
	case fresh+used+slack > c.maxBytes:
		return fmt.Errorf("entries hold %d bytes, over the bound of %d", fresh+used+slack, c.maxBytes)
	case c.prefetches == 0 && c.reserved != 0, c.reserved < 0, c.prefetches < 0:
		return fmt.Errorf("%d bytes reserved by %d prefetches in flight", c.reserved, c.prefetches)
	}
	return nil
}
