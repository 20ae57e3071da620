package prefetch

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cassfs/cassfs/store"
)

// BlockOptions bound the blocks prefetches are read in (CacheOptions.Block).
type BlockOptions struct {
	Samples int   // most samples in a block; 0 or 1: no blocks
	Bytes   int64 // most bytes in a block, by the sizes prefetches reserve (default 4 MiB)
	// HedgeAfter is how long a reader waits for its sample in a block sent before it asks
	// for the sample by itself as well (0: 1 s; negative: never).
	HedgeAfter time.Duration
	// Alone, if set, reports samples fetched by themselves all the same: those the disk
	// tier holds, whose fetch is a local read with no request to save, and whose push a
	// block would hold back until the block's slowest sample came. It must not block: it
	// is asked under the cache's lock.
	Alone func(i uint32) bool
}

// errNoAnswer is the error of a sample a block's fetch never answered.
var errNoAnswer = errors.New("the block's fetch gave no answer for it")

// BlockFetcher is a Fetcher that also reads many samples in one request: a block (see
// Blocks in the package doc).
type BlockFetcher interface {
	Fetcher
	// FetchBlock reads samples and calls got once for each, with its index in samples,
	// as Fetch would answer it (a blob verified, or an error of that sample alone); it
	// returns once all were answered. got may be called from several goroutines at once.
	// The blobs may be slices of one buffer: the cache counts them as a share (share.go).
	FetchBlock(ctx context.Context, samples []uint32, got func(k int, data []byte, err error))
}

// FetchBlock reads samples through f as BlockFetcher.FetchBlock does: in a block if f is a
// BlockFetcher, else one Fetch per sample, all at once. The links of the read chain that
// wrap another (the disk tier, metrics) read blocks through it.
func FetchBlock(ctx context.Context, f Fetcher, samples []uint32, got func(k int, data []byte, err error)) {
	if bf, ok := f.(BlockFetcher); ok {
		bf.FetchBlock(ctx, samples, got)
		return
	}
	var wg sync.WaitGroup
	for k, i := range samples {
		wg.Add(1)
		go func() {
			defer wg.Done()
			data, err := f.Fetch(ctx, i)
			got(k, data, err)
		}()
	}
	wg.Wait()
}

// queueLocked queues a prefetch of sample i for a block (reserved and owner as
// startLocked's); a block that is full is sent at once.
func (c *Cache) queueLocked(i uint32, reserved int64, owner any) {
	c.skipped.Put(i, false)
	cl := &call{done: make(chan struct{}), owner: owner, queued: true}
	c.inflight[i] = cl
	c.prefetches++
	c.pend = append(c.pend, pending{i, cl, reserved})
	c.pendBytes += reserved
	if len(c.pend) >= c.blockOpts.Samples || c.pendBytes >= c.blockOpts.Bytes {
		c.sendLocked()
	}
}

// unqueueLocked takes sample i's queued prefetch out of the next block and fetches it by
// itself at once: a reader waits for it.
func (c *Cache) unqueueLocked(i uint32, cl *call) {
	for k, p := range c.pend {
		if p.cl != cl {
			continue
		}
		c.pend = append(c.pend[:k], c.pend[k+1:]...)
		c.pendBytes -= p.reserved
		cl.queued = false
		c.wg.Add(1)
		go c.run(i, cl, p.reserved)
		return
	}
}

// flush sends the block being filled if no block is in flight or being answered (Nagle's
// rule: a part-filled block waits for the blocks in flight, whose arrivals let the
// prefetcher issue more, so that blocks go out full while the database is busy and at
// once when it is idle). The prefetcher calls it after each round of issuing.
func (c *Cache) flush() {
	if c.blocks == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.flushLocked()
}

func (c *Cache) flushLocked() {
	if len(c.pend) > 0 && c.sent == 0 && c.holding == 0 {
		c.sendLocked()
	}
}

// sendLocked sends the queued prefetches as one block.
func (c *Cache) sendLocked() {
	batch := c.pend
	c.pend, c.pendBytes = nil, 0
	for _, p := range batch {
		p.cl.queued, p.cl.inBlock = false, true
	}
	c.sent += len(batch)
	c.stats.blocks.Add(1)
	c.stats.blockSamples.Add(int64(len(batch)))
	c.wg.Add(1)
	go c.runBlock(batch)
}

// runBlock fetches a block and hands out its answers together once it has them all, so
// that the prefetches their arrivals issue make up the next block (flush). A block the
// store split between nodes (store.WithParts) has its answers delivered (cached, their
// waiters woken) and pushed as they come instead, lest a slow node's part hold back the
// others' readers and pushes; the prefetcher is still told of all together. Its pushes
// run on a goroutine of the block's own: a push may wait for pages a READ holds locked,
// and a record file's READ may span a later row the block must go on to deliver. A block
// in one part comes in one frame: pushed row by row it read slower (bench/history/
// journal.md, "a block's answers delivered as they come").
func (c *Cache) runBlock(batch []pending) {
	defer c.wg.Done()
	samples := make([]uint32, len(batch))
	for k, p := range batch {
		samples[k] = p.i
	}
	type answer struct {
		data     []byte
		err      error
		ok       bool
		early    bool // delivered and pushed as it came (a split block's)
		onArrive func(any, uint32, time.Duration, bool)
	}
	answers := make([]answer, len(batch))
	sh := &share{members: samples} // the store hands a block's blobs over uncopied
	var split atomic.Bool
	toPush, pushed := make(chan int, len(batch)), make(chan struct{})
	ctx := store.WithParts(c.ctx, func(n int) {
		if n > 1 && split.CompareAndSwap(false, true) {
			go func() {
				defer close(pushed)
				for k := range toPush {
					c.pushOne(batch[k].i, answers[k].data)
				}
			}()
		}
	})
	start := time.Now()
	c.blocks.FetchBlock(ctx, samples, func(k int, data []byte, err error) {
		a := &answers[k] // each k once: no two writers of one element
		a.data, a.err, a.ok = data, err, true
		if split.Load() {
			a.early = true
			p := batch[k]
			var push bool
			if push, a.onArrive = c.deliver(p.i, p.cl, p.reserved, false, data, err, sh); push {
				toPush <- k
			}
		}
	})
	close(toPush)
	if split.Load() {
		<-pushed
	}
	for k := range answers {
		if !answers[k].ok {
			answers[k].err = errNoAnswer // a fetcher's fault: never an empty blob served
		}
	}
	took := time.Since(start)
	c.mu.Lock()
	c.sent -= len(batch)
	c.holding++
	c.mu.Unlock()
	push := make([]bool, len(batch))
	var early []pending
	for k, p := range batch {
		if a := &answers[k]; a.early {
			early = append(early, p)
		} else {
			push[k], a.onArrive = c.deliver(p.i, p.cl, p.reserved, true, a.data, a.err, sh)
		}
	}
	c.released(early)
	for k, p := range batch {
		a := &answers[k]
		c.handOn(p.i, p.cl, p.reserved, a.data, a.err, took, push[k], a.onArrive)
	}
	c.mu.Lock()
	c.holding--
	c.flushLocked()
	c.mu.Unlock()
}

// waitBlock waits for sample i's blob from the block cl was sent in; past
// BlockOptions.HedgeAfter it also fetches the sample by itself, and the first answer wins
// (a block waits for its slowest part; a node that answers one read may be stuck on
// another). The blob fetched alone is not cached: the block's brings it there.
func (c *Cache) waitBlock(ctx context.Context, i uint32, cl *call) ([]byte, error) {
	t := time.NewTimer(c.blockOpts.HedgeAfter)
	defer t.Stop()
	select {
	case <-cl.done:
		return cl.result()
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-t.C:
	}
	c.stats.blockHedges.Add(1)
	type result struct {
		data []byte
		err  error
	}
	alone := make(chan result, 1)
	go func() {
		data, err := c.fetch.Fetch(ctx, i)
		alone <- result{data, err}
	}()
	for waiting := 2; ; waiting-- { // the first blob wins; an error only once both failed
		select {
		case <-cl.done:
			if data, err := cl.result(); err == nil || waiting == 1 {
				return data, err
			}
			cl = &call{done: make(chan struct{})} // failed: wait for the fetch alone
		case r := <-alone:
			if r.err == nil {
				return r.data, nil
			}
			if waiting == 1 {
				return nil, r.err
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// result is a call's answer once done is closed.
func (cl *call) result() ([]byte, error) {
	if cl.err != nil {
		return nil, cl.err
	}
	return cl.data, nil
}
