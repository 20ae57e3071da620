package prefetch

import (
	"bytes"
	"fmt"
)

// A block's blobs arrive in one response of the database, and the store hands them over
// as slices of the buffer it read that response into, not copied: a copy per blob cost
// the daemon about a fifth of its CPU in a cold epoch (bench/history/journal.md, "a
// block's blobs kept in the buffer they came in"). Such a buffer lives as long as any of
// its blobs does, so the cache keeps the bound honest with shares:
//
//   - a block's blobs cached form a share; each counts its own bytes while cached;
//   - a blob of a share forgotten with Drop (its reader reads its file in the disk tier)
//     leaves its bytes counted as the share's slack while another blob of the share is
//     cached: the buffer still holds them;
//   - a blob of a share evicted (the cache needs room) has the share's other cached blobs
//     copied into memory of their own (compactLocked), so that the buffer can go, and the
//     room the eviction makes is real.
//
// So a blob is copied at most once, and only when the cache is full: a dataset that fits
// in the cache is never copied at all.

// share is the cached blobs of one block's answer. Guarded by Cache.mu.
type share struct {
	members []uint32 // the block's samples
	cached  int      // members cached now (Cache.shares points here for each)
	slack   int64    // bytes of members forgotten while others stay cached
}

// letGoLocked takes sample i's blob data, just removed from the fresh or used set, off the
// cache's count; evicted says the cache needs the room (see share).
func (c *Cache) letGoLocked(i uint32, data []byte, evicted bool) {
	n := int64(len(data))
	sh := c.shares[i]
	if sh == nil {
		c.bytes -= n
		return
	}
	delete(c.shares, i)
	sh.cached--
	switch {
	case sh.cached > 0 && !evicted:
		sh.slack += n
	case sh.cached > 0:
		c.compactLocked(sh)
		fallthrough
	default:
		c.bytes -= n + sh.slack
		sh.slack = 0
	}
}

// compactLocked copies the cached blobs of sh into memory of their own, in place in the
// fresh or used set, and dissolves sh. Their counted bytes stay as they were.
func (c *Cache) compactLocked(sh *share) {
	for _, m := range sh.members {
		if c.shares[m] != sh {
			continue
		}
		delete(c.shares, m)
		if d, ok := c.fresh.Peek(m); ok {
			c.fresh.Replace(m, bytes.Clone(d))
		} else if d, ok := c.used.peek(m); ok {
			c.used.replace(m, bytes.Clone(d))
		}
		c.stats.copied.Add(1)
	}
	sh.cached = 0
}

// checkSharesLocked is checkInvariants' part for shares: every sample in a share is
// cached, each share's count of cached members is right, and the shares' slack, which it
// returns, is part of the bytes counted.
func (c *Cache) checkSharesLocked() (slack int64, err error) {
	members := map[*share]int{}
	for i, sh := range c.shares {
		_, used := c.used.peek(i)
		if !c.fresh.Contains(i) && !used {
			return 0, fmt.Errorf("sample %d is in a share but not cached", i)
		}
		members[sh]++
	}
	for sh, n := range members {
		if sh.cached != n {
			return 0, fmt.Errorf("a share counts %d cached members, %d are", sh.cached, n)
		}
		slack += sh.slack
	}
	return slack, nil
}
