package prefetch

import (
	"math"

	"github.com/cassfs/cassfs/evict"
)

// The prefetcher knows the future: each stream's current and next epoch orders. Published
// as a evict.Future, it lets the cache evict the blob read farthest ahead (Belady's MIN, see
// evict.Clairvoyant) instead of the least recently used one, which under a new permutation every
// epoch keeps roughly the wrong blobs. With Options.Samples set, each stream keeps the
// inverse of its current and next epoch's order (4 bytes per sample each) and publishes
// them with its readers' position through atomics: the cache asks under its own lock,
// which comes after the streams' locks, so answering must take none.

// readingSpan is how many positions behind the readers a sample still counts as being read.
const readingSpan = 128

// absent marks a sample that is not in an epoch's order (another split or shard).
const absent = math.MaxUint32

// streamFuture is a stream's known future, immutable once published.
type streamFuture struct {
	n    uint64   // positions in the current epoch
	cur  []uint32 // sample → position in the current epoch, or absent
	next []uint32 // the same for the next epoch; nil until its order is known
}

// invert returns sample → position in order for samples samples.
func invert(order []uint32, samples int) []uint32 {
	inv := make([]uint32, samples)
	for k := range inv {
		inv[k] = absent
	}
	for k, s := range order {
		if int(s) < samples {
			inv[s] = uint32(k)
		}
	}
	return inv
}

// publish makes the stream's future known to Next. s.mu is held.
func (s *stream) publish(cur, next []uint32) {
	s.fut.Store(&streamFuture{n: uint64(len(s.cur)), cur: cur, next: next})
}

// Next implements evict.Future for the cache: now plus the fewest reads, in any stream, before
// sample is read again (counted from each stream's readers' position), or evict.Never when no
// known order reads it again.
func (p *Prefetcher) Next(sample uint32, now uint64) uint64 {
	all := p.all.Load()
	if all == nil {
		return evict.Never
	}
	best := uint64(evict.Never)
	for _, s := range *all {
		f := s.fut.Load()
		if f == nil || int(sample) >= len(f.cur) {
			continue
		}
		h := uint64(s.headPos.Load() + 1) // the next position to be read
		pos := f.cur[sample]
		switch {
		case pos != absent && uint64(pos) >= h:
			best = min(best, uint64(pos)-h)
		case pos != absent && h-uint64(pos) <= readingSpan:
			// Just looked up: its file may still be being read (the kernel splits a file
			// into several READs, and readers run side by side), so it counts as needed
			// until the readers are readingSpan positions past it.
			best = min(best, readingSpan-(h-uint64(pos)))
		case f.next != nil && f.next[sample] != absent:
			best = min(best, f.n-min(h, f.n)+uint64(f.next[sample]))
		}
	}
	if best == evict.Never {
		return evict.Never
	}
	return now + best
}

// Reuse implements evict.ReuseFuture: now plus the reads before sample is read again after its
// next read, in any stream, or evict.Never. A sample fetched now is fetched for its next read;
// what keeping a copy is worth is told by the read after that one.
func (p *Prefetcher) Reuse(sample uint32, now uint64) uint64 {
	all := p.all.Load()
	if all == nil {
		return evict.Never
	}
	first, second := uint64(evict.Never), uint64(evict.Never)
	take := func(d uint64) {
		if d < first {
			first, second = d, first
		} else if d < second {
			second = d
		}
	}
	for _, s := range *all {
		f := s.fut.Load()
		if f == nil || int(sample) >= len(f.cur) {
			continue
		}
		h := uint64(s.headPos.Load() + 1)
		if pos := uint64(f.cur[sample]); f.cur[sample] != absent {
			switch {
			case pos >= h:
				take(pos - h)
			case h-pos <= readingSpan:
				take(0) // being read
			}
		}
		if f.next != nil && f.next[sample] != absent {
			take(f.n - min(h, f.n) + uint64(f.next[sample]))
		}
	}
	if second == evict.Never {
		return evict.Never
	}
	return now + second
}
