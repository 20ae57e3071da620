// Package evict holds the eviction policies cassfs keeps blobs by, Belady's MIN over the
// known future of reads: Clairvoyant, exact, for the memory cache (thousands of blobs), and
// SampledMIN, sampled, for the disk tier (millions of files). The future itself (Future,
// ReuseFuture) comes from the prefetcher, which knows every stream's epoch orders, since
// they are a pure function of the seed. It knows no blob, file or store.
//
// BenchmarkEvictionPolicies compares them with LRU and with keeping what is held, over
// traces of epochs of permutations, whole and sharded.
package evict

import (
	"container/heap"
	"math"
)

// Never is the next use of a sample that is not known to be used again.
const Never = math.MaxUint64

// Future tells when samples will be read: positions in the known order of reads (for a
// stream of epochs, epoch × size + position in the epoch's order).
type Future interface {
	// Next returns the first position at or after now at which sample is read, or Never.
	Next(sample uint32, now uint64) uint64
}

// ReuseFuture is a Future that also tells when a sample is read again after its next read
// (the disk tier's admission: see package disktier).
type ReuseFuture interface {
	Future
	// Reuse returns the first position after the sample's next read at which it is read
	// again, or Never.
	Reuse(sample uint32, now uint64) uint64
}

// Clairvoyant is Belady's MIN over a known future: of the samples it holds, the one to
// evict is the one whose next use is farthest ahead, and a sample whose next use is farther
// than all of those is not worth admitting. With samples of equal size nothing does better
// on the same reads (Belady 1966); cassfs knows the future because epoch orders are a pure
// function of the seed, which LRU and its kin cannot use: under a new permutation every
// epoch, LRU keeps roughly the wrong samples.
//
// It keeps each held sample's next use in a max-heap (the victim on top) and a min-heap:
// a sample whose next use has passed without it being read (readers that skip, or bind
// other samples to names) is found there and looked up again, so a stale "soon" never pins
// it. It is not safe for concurrent use.
type Clairvoyant struct {
	future Future
	far    useHeap // max-heap on next use: the victim on top
	near   useHeap // min-heap on next use: passed uses on top
	held   map[uint32]*use
}

type use struct {
	sample        uint32
	next          uint64
	farAt, nearAt int
}

// NewClairvoyant returns an empty policy over future.
func NewClairvoyant(future Future) *Clairvoyant {
	c := &Clairvoyant{future: future, held: map[uint32]*use{}}
	c.far.max, c.far.at = true, func(u *use) *int { return &u.farAt }
	c.near.at = func(u *use) *int { return &u.nearAt }
	return c
}

// Len is the number of samples held.
func (c *Clairvoyant) Len() int { return len(c.held) }

// Holds reports whether sample is held.
func (c *Clairvoyant) Holds(sample uint32) bool { _, ok := c.held[sample]; return ok }

// Add holds sample, read or fetched at position now (its next use is looked up after now).
func (c *Clairvoyant) Add(sample uint32, now uint64) {
	if _, ok := c.held[sample]; ok {
		c.Used(sample, now)
		return
	}
	u := &use{sample: sample, next: c.future.Next(sample, now)}
	c.held[sample] = u
	heap.Push(&c.far, u)
	heap.Push(&c.near, u)
}

// Used records that sample was read at position now: its next use moves past it.
func (c *Clairvoyant) Used(sample uint32, now uint64) {
	u, ok := c.held[sample]
	if !ok {
		return
	}
	c.set(u, c.future.Next(sample, now+1))
}

// Remove stops holding sample.
func (c *Clairvoyant) Remove(sample uint32) {
	u, ok := c.held[sample]
	if !ok {
		return
	}
	delete(c.held, sample)
	heap.Remove(&c.far, u.farAt)
	heap.Remove(&c.near, u.nearAt)
}

// Victim returns the held sample used farthest after now and that use (Never: not known to
// be used again); ok is false when nothing is held.
func (c *Clairvoyant) Victim(now uint64) (sample uint32, next uint64, ok bool) {
	c.refresh(now)
	if len(c.far.u) == 0 {
		return 0, 0, false
	}
	u := c.far.u[0]
	return u.sample, u.next, true
}

// refresh looks up again the next use of held samples whose next use has passed.
func (c *Clairvoyant) refresh(now uint64) {
	for len(c.near.u) > 0 && c.near.u[0].next < now {
		u := c.near.u[0]
		c.set(u, c.future.Next(u.sample, now))
	}
}

func (c *Clairvoyant) set(u *use, next uint64) {
	u.next = next
	heap.Fix(&c.far, u.farAt)
	heap.Fix(&c.near, u.nearAt)
}

// useHeap is a heap of uses on next, keeping each use's index in it up to date.
type useHeap struct {
	u   []*use
	max bool
	at  func(*use) *int
}

func (h *useHeap) Len() int { return len(h.u) }
func (h *useHeap) Less(i, j int) bool {
	if h.max {
		return h.u[i].next > h.u[j].next
	}
	return h.u[i].next < h.u[j].next
}
func (h *useHeap) Swap(i, j int) {
	h.u[i], h.u[j] = h.u[j], h.u[i]
	*h.at(h.u[i]) = i
	*h.at(h.u[j]) = j
}
func (h *useHeap) Push(x any) {
	u := x.(*use)
	*h.at(u) = len(h.u)
	h.u = append(h.u, u)
}
func (h *useHeap) Pop() any {
	u := h.u[len(h.u)-1]
	h.u = h.u[:len(h.u)-1]
	return u
}
