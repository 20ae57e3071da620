// Package prefetch gets blobs to readers before they ask: a byte-bounded cache that fetches
// each sample once however many readers want it. It knows nothing of FUSE or CQL: it is
// driven by a fetch function over canonical sample indices.
//
// # Cache
//
// Cache.Get returns a sample's bytes from memory or fetches them. Concurrent Gets of a
// sample share one fetch (the kernel splits a file into several READs, and several readers
// may open the same file). The fetch runs detached from the first caller's context, so a
// reader that gives up does not fail the others; it is bounded by the fetch function's own
// deadline. Memory is bounded in bytes: least recently used blobs are evicted when a new
// one would exceed the bound; a blob larger than the bound is served but not kept.
//
// Returned slices are shared and must not be modified.
//
// # Errors
//
// A failed fetch is returned to every waiter as a *FetchError naming the sample; failures
// are not cached, so the next Get tries again.
package prefetch

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// Fetch reads sample i. It must honour ctx and have a deadline of its own.
type Fetch func(ctx context.Context, i uint32) ([]byte, error)

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
}

// Cache is a byte-bounded cache of blobs with deduplicated fetches. It is safe for
// concurrent use.
type Cache struct {
	fetch    Fetch
	maxBytes int64
	ctx      context.Context // cancelled by Close; parent of every fetch
	cancel   context.CancelFunc
	wg       sync.WaitGroup

	mu       sync.Mutex
	lru      *simplelru.LRU[uint32, []byte] // guarded by mu
	bytes    int64                          // guarded by mu; sum of cached blob lengths
	inflight map[uint32]*call               // guarded by mu

	stats cacheCounters
}

type call struct {
	done chan struct{} // closed when data or err is set
	data []byte
	err  *FetchError
}

type cacheCounters struct {
	hits, misses, waits, fetchErrors, evictions atomic.Int64
}

// CacheStats is a snapshot of a cache's counters.
type CacheStats struct {
	Hits        int64 // Gets served from memory
	Misses      int64 // Gets that started a fetch
	Waits       int64 // Gets that joined a fetch in flight
	FetchErrors int64
	Evictions   int64
	Bytes       int64 // bytes cached now
	Entries     int
	InFlight    int
}

// NewCache returns a cache over fetch.
func NewCache(fetch Fetch, opts CacheOptions) *Cache {
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = 1 << 30
	}
	// Entries are bounded by bytes, not count; the count bound only has to be unreachable.
	lru, _ := simplelru.NewLRU[uint32, []byte](1<<31-1, nil)
	ctx, cancel := context.WithCancel(context.Background())
	return &Cache{
		fetch: fetch, maxBytes: opts.MaxBytes, ctx: ctx, cancel: cancel,
		lru: lru, inflight: map[uint32]*call{},
	}
}

// Get returns sample i's bytes, fetching them if needed.
func (c *Cache) Get(ctx context.Context, i uint32) ([]byte, error) {
	c.mu.Lock()
	if data, ok := c.lru.Get(i); ok {
		c.mu.Unlock()
		c.stats.hits.Add(1)
		return data, nil
	}
	cl, joined := c.inflight[i]
	if !joined {
		if err := c.ctx.Err(); err != nil {
			c.mu.Unlock()
			return nil, fmt.Errorf("cache closed: %w", err)
		}
		cl = &call{done: make(chan struct{})}
		c.inflight[i] = cl
		c.wg.Add(1)
		go c.run(i, cl)
	}
	c.mu.Unlock()
	if joined {
		c.stats.waits.Add(1)
	} else {
		c.stats.misses.Add(1)
	}
	select {
	case <-cl.done:
		if cl.err != nil {
			return nil, cl.err
		}
		return cl.data, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *Cache) run(i uint32, cl *call) {
	defer c.wg.Done()
	data, err := c.fetch(c.ctx, i)
	c.mu.Lock()
	delete(c.inflight, i)
	if err != nil {
		cl.err = &FetchError{Sample: i, Err: err}
		c.stats.fetchErrors.Add(1)
	} else {
		cl.data = data
		c.insertLocked(i, data)
	}
	c.mu.Unlock()
	close(cl.done)
}

// insertLocked caches data, evicting least recently used blobs to stay within the bound.
func (c *Cache) insertLocked(i uint32, data []byte) {
	n := int64(len(data))
	if n > c.maxBytes {
		return
	}
	if old, ok := c.lru.Peek(i); ok {
		c.bytes -= int64(len(old))
	}
	for c.bytes+n > c.maxBytes {
		_, old, ok := c.lru.RemoveOldest()
		if !ok {
			break
		}
		c.bytes -= int64(len(old))
		c.stats.evictions.Add(1)
	}
	c.lru.Add(i, data)
	c.bytes += n
}

// Stats returns the cache's counters.
func (c *Cache) Stats() CacheStats {
	c.mu.Lock()
	s := CacheStats{Bytes: c.bytes, Entries: c.lru.Len(), InFlight: len(c.inflight)}
	c.mu.Unlock()
	s.Hits, s.Misses, s.Waits = c.stats.hits.Load(), c.stats.misses.Load(), c.stats.waits.Load()
	s.FetchErrors, s.Evictions = c.stats.fetchErrors.Load(), c.stats.evictions.Load()
	return s
}

// Close cancels fetches in flight and waits for them to end. Gets after Close fail.
func (c *Cache) Close() {
	c.cancel()
	c.wg.Wait()
}
