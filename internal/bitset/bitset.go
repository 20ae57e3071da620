// Package bitset is the one set of small integers (sample indices, positions) that cassfs
// keeps a bit per member of: the memory cache's and the disk tier's presence, the
// filesystem's known inodes, a view's positions looked up and samples bound, the index's
// samples with a CRC32C. Every bit is read and written atomically, so a set may be read
// without the lock its writers take (and written by several goroutines at once); a set
// that is only ever read under a lock, or never written after it is built, pays nothing
// for that on amd64, where an atomic load is a plain load.
package bitset

import "sync/atomic"

// Set holds the integers 0 .. n-1 given to New.
type Set []atomic.Uint64

// New returns an empty set of room n.
func New(n int) Set { return make(Set, (n+63)/64) }

// Has reports whether i is in the set; false for i beyond its room.
func (s Set) Has(i uint32) bool {
	return int(i/64) < len(s) && s[i/64].Load()&(1<<(i%64)) != 0
}

// Put adds i to the set (or removes it, on false); i beyond the room is ignored.
func (s Set) Put(i uint32, on bool) {
	if int(i/64) >= len(s) {
		return
	}
	if on {
		s[i/64].Or(1 << (i % 64))
	} else {
		s[i/64].And(^uint64(1 << (i % 64)))
	}
}

// Add adds i and reports whether it was absent before, in one step: of several goroutines
// adding i at once, exactly one is told so. i beyond the room is never added (false).
func (s Set) Add(i uint32) bool {
	if int(i/64) >= len(s) {
		return false
	}
	bit := uint64(1) << (i % 64)
	return s[i/64].Or(bit)&bit == 0
}

// Clear removes every member. Each word is cleared atomically; a Put racing with Clear may
// or may not survive it.
func (s Set) Clear() {
	for w := range s {
		s[w].Store(0)
	}
}
