package prefetch

import "time"

// What happens when a fetch ends: the blob is cached and its waiters woken (settle), then
// pushed and the prefetcher told (handOn).

// finish ends the fetch of sample i (its call cl; reserved as startLocked's), which took
// took: the blob is cached (or the error told), waiters are woken, the blob is pushed and
// the prefetcher told.
func (c *Cache) finish(i uint32, cl *call, reserved int64, data []byte, err error, took time.Duration) {
	push, onArrive := c.settle(i, cl, reserved, data, err)
	c.handOn(i, cl, reserved, data, err, took, push, onArrive)
}

// settle is finish's first half: the blob is cached (or the error told) and waiters are
// woken. It reports whether the blob is to be pushed, and whom to tell of its arrival.
func (c *Cache) settle(i uint32, cl *call, reserved int64, data []byte, err error) (push bool, onArrive func(any, uint32, time.Duration, bool)) {
	return c.deliver(i, cl, reserved, true, data, err, nil)
}

// deliver is settle, the prefetch's place in flight (its count, its reserved bytes, its
// slot of the shared bound) given back only if release is set: a block's go back together
// (released). sh is the share data is carved from (a block's answer), or nil.
func (c *Cache) deliver(i uint32, cl *call, reserved int64, release bool, data []byte, err error, sh *share) (push bool, onArrive func(any, uint32, time.Duration, bool)) {
	prefetch := reserved >= 0 && release
	c.mu.Lock()
	delete(c.inflight, i)
	if prefetch {
		c.prefetches--
		c.reserved -= reserved
	}
	if err != nil {
		cl.err = &FetchError{Sample: i, Err: err}
		c.stats.fetchErrors.Add(1)
		// Only a failure a reader saw is remembered: that reader's kernel retries at once.
		// A prefetch nobody waited for leaves no trace; the reader that comes for the
		// sample later gets a fetch of its own.
		if c.failFor > 0 && cl.demanded {
			if len(c.failed) > 4096 {
				clear(c.failed) // a database down for everything: forget wholesale
			}
			c.failed[i] = failure{cl.err, time.Now().Add(c.failFor)}
		}
	} else {
		cl.data = data
		// A blob someone waits for is consumed now; a prefetched one waits for its reader.
		c.insertLocked(i, data, !cl.demanded, sh)
	}
	push = err == nil && !cl.demanded && c.push != nil && c.fresh.Contains(i)
	if push {
		c.pushed[i] = struct{}{}
	}
	onArrive = c.onArrive
	c.mu.Unlock()
	if prefetch && c.shared != nil {
		c.shared.Release() // before onArrive: the stream that issued it may issue again
	}
	close(cl.done)
	return push, onArrive
}

// released gives back the places in flight of a block's prefetches, delivered without.
func (c *Cache) released(batch []pending) {
	n := 0
	c.mu.Lock()
	for _, p := range batch {
		if p.reserved >= 0 {
			n++
			c.prefetches--
			c.reserved -= p.reserved
		}
	}
	c.mu.Unlock()
	if c.shared != nil {
		for range n {
			c.shared.Release()
		}
	}
}

// handOn is finish's second half: the blob is pushed and the prefetcher told. A push may
// wait for pages a READ holds locked (a record file's READ spans several samples), so a
// block settles all its samples before any is pushed (runBlock; a block split between
// nodes pushes on a goroutine of its own instead).
func (c *Cache) handOn(i uint32, cl *call, reserved int64, data []byte, err error, took time.Duration, push bool, onArrive func(any, uint32, time.Duration, bool)) {
	if push {
		c.pushOne(i, data)
	}
	if reserved >= 0 && onArrive != nil {
		onArrive(cl.owner, i, took, err == nil)
	}
}

// pushOne hands sample i's settled blob to push.
func (c *Cache) pushOne(i uint32, data []byte) {
	if !c.push(i, data) {
		c.mu.Lock()
		delete(c.pushed, i) // its reader's READ will come: it stays fresh until then
		c.mu.Unlock()
	}
}
