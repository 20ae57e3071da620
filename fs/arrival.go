package fs

import (
	"sync"
)

// # Arrival binding
//
// With Config.Arrival, a name in an epoch's class directory is not fixed to the sample at
// its position. On its first LOOKUP it is bound to a sample of the same label, not yet bound
// in this epoch, that has already arrived in the cache — the filesystem form of the 2025
// paper's out-of-order assembly, so no reader waits behind a straggler. If none has arrived,
// it is bound to the earliest unbound sample of that label in the epoch's order: the one the
// prefetcher asked for first, so the one most likely to arrive next.
//
// Invariants: each position binds exactly one sample and keeps it (the kernel learns the
// size at LOOKUP; content never changes under a name); a sample is bound at most once per
// epoch; a class directory of k names binds exactly its label's k samples. So every sample
// appears exactly once per epoch with its label. Listing binds nothing: READDIRPLUS, which
// would look every entry up, is disabled on arrival mounts.
//
// Bindings live with the epoch's order in the view cache (Config.EpochViews epochs). A
// reader that returns to an epoch evicted since then may see names bound anew; names it
// already looked up keep their inodes in the kernel.

// arrivalScan bounds how far a LOOKUP looks for an arrived sample beyond the first unbound
// one of its label, so that a lookup costs O(window), not O(epoch).
const arrivalScan = 4096

type binding struct {
	mu     sync.Mutex
	bound  []uint32 // guarded by mu; index in the view's order → bound sample + 1, 0 while unbound
	taken  []uint64 // guarded by mu; bitset over canonical samples bound in this epoch
	cursor []int    // guarded by mu; per label, index into ByClass before which all are taken
}

func (v *epochView) binding(n, labels int) *binding {
	v.bindOnce.Do(func() {
		v.bind = &binding{
			bound:  make([]uint32, len(v.Order)),
			taken:  make([]uint64, (n+63)/64),
			cursor: make([]int, labels),
		}
	})
	return v.bind
}

// bindArrival returns the sample bound to index pos of the view's order (of label label),
// binding it now if this is the first lookup.
func (f *FS) bindArrival(v *epochView, pos uint32, label int) uint32 {
	b := v.binding(f.ix.Len(), len(f.classNames))
	b.mu.Lock()
	defer b.mu.Unlock()
	if s := b.bound[pos]; s != 0 {
		return s - 1
	}
	taken := func(i uint32) bool { return b.taken[i/64]&(1<<(i%64)) != 0 }
	list := v.ByClass[label]
	for b.cursor[label] < len(list) && taken(v.Order[list[b.cursor[label]]]) {
		b.cursor[label]++
	}
	choice := -1
	for k := b.cursor[label]; k < len(list) && k < b.cursor[label]+arrivalScan; k++ {
		i := v.Order[list[k]]
		if taken(i) {
			continue
		}
		if choice < 0 {
			choice = k
		}
		if f.cfg.Cached(i) {
			choice = k
			break
		}
	}
	// choice >= 0 always: this label has as many names as samples and this name is unbound.
	i := v.Order[list[choice]]
	b.taken[i/64] |= 1 << (i % 64)
	b.bound[pos] = i + 1
	return i
}
