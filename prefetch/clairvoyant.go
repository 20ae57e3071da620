package prefetch

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
// (the disk tier's admission: see DiskTier).
type ReuseFuture interface {
	Future
	// Reuse returns the first position after the sample's next read at which it is read
	// again, or Never.
	Reuse(sample uint32, now uint64) uint64
}

// EpochFuture is the Future of a stream that reads epochs in order, each a permutation of
// the same n samples: what cassfs knows of a split, since every epoch's order is a pure
// function of the seed. It holds each known epoch's inverse permutation (4 bytes per
// sample per epoch); positions of epochs it does not hold are Never.
type EpochFuture struct {
	n   uint64
	inv map[uint64][]uint32 // epoch → sample → position in the epoch
}

// NewEpochFuture returns the Future of epochs of n samples; add the orders it knows with Add.
func NewEpochFuture(n int) *EpochFuture {
	return &EpochFuture{n: uint64(n), inv: map[uint64][]uint32{}}
}

// Add makes epoch's order (a permutation of the n samples) known.
func (f *EpochFuture) Add(epoch uint64, order []uint32) {
	inv := make([]uint32, len(order))
	for k, s := range order {
		inv[s] = uint32(k)
	}
	f.inv[epoch] = inv
}

// Forget drops epoch's order (one the readers have left).
func (f *EpochFuture) Forget(epoch uint64) { delete(f.inv, epoch) }

// Next implements Future: the sample's position in the current epoch if it is still ahead,
// else in the next one.
func (f *EpochFuture) Next(sample uint32, now uint64) uint64 {
	e, k := now/f.n, now%f.n
	if inv, ok := f.inv[e]; ok && uint64(inv[sample]) >= k {
		return e*f.n + uint64(inv[sample])
	}
	if inv, ok := f.inv[e+1]; ok {
		return (e+1)*f.n + uint64(inv[sample])
	}
	return Never
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

// Admit reports whether sample, wanted at now, should take the place of the current victim
// when there is no room: only if it is needed sooner.
func (c *Clairvoyant) Admit(sample uint32, now uint64) bool {
	_, vnext, ok := c.Victim(now)
	return !ok || c.future.Next(sample, now) < vnext
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
