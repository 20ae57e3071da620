package prefetch

// The cache's side of pushing blobs to where their readers read them (CacheOptions.Push;
// see the package doc).

// pushHeld pushes a blob the cache holds (see Prefetch); a failed push leaves it fresh
// until its READ.
func (c *Cache) pushHeld(i uint32, data []byte) {
	defer c.wg.Done()
	if !c.push(i, data) {
		c.mu.Lock()
		delete(c.pushed, i)
		c.mu.Unlock()
	}
}

// Looked tells the cache that sample i's reader looked it up: a blob pushed to where the
// reader reads it (CacheOptions.Push) counts as read from now on. Other blobs wait for
// their READ.
func (c *Cache) Looked(i uint32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.pushed[i]; ok {
		c.consumeLocked(i)
	}
}

// PushHeld pushes sample i's blob now if the cache holds it (CacheOptions.Push), unless it
// was pushed already, and reports whether the blob is there for its reader; it counts as
// read from then on. Package fs calls it once a name of the sample was looked up ahead of
// its reader: the reader's open and read will not reach the cache.
func (c *Cache) PushHeld(i uint32) bool {
	if c.push == nil {
		return false
	}
	c.mu.Lock()
	_, done := c.pushed[i]
	data, fresh := c.consumeLocked(i)
	switch {
	case fresh && done:
		c.mu.Unlock()
		return true // pushed as it arrived, or when Prefetch wanted it again
	case !fresh:
		var held bool
		if data, held = c.used.peek(i); !held {
			c.mu.Unlock()
			return false
		}
		if len(c.ahead) > 1<<16 {
			clear(c.ahead) // readers that stopped: forget wholesale (a sample pushed twice at worst)
		}
		c.ahead[i] = struct{}{} // ahead of Prefetch, which would push it again
	}
	c.mu.Unlock()
	return c.push(i, data)
}

// forgetAhead forgets which samples were pushed when their names were looked up ahead
// (PushHeld): a stream moved on to another epoch, and a mark left from the last one (a
// sample pushed after the prefetcher had passed it there) would make Prefetch pass the
// sample over in this one, where nothing pushed it. The marks of other streams go too:
// their samples are then fetched although pushed (a fetch too many), never passed over.
func (c *Cache) forgetAhead() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.ahead)
}

// Peek returns sample i's blob if it is in memory, and changes nothing: neither reads nor
// eviction hear of it. Package fs asks it for the neighbours of a blob it pushes into a
// record file (a page two samples share is pushed once both are there).
func (c *Cache) Peek(i uint32) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d, ok := c.fresh.Peek(i); ok {
		return d, true
	}
	return c.used.peek(i)
}
