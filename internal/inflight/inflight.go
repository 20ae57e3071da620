// Package inflight bounds the requests of one kind that every user of a database session
// has in flight together: the prefetches of every mount a process serves over one session
// (the volumes of `cassfs serve`, the datasets of `cassfs mount --dataset a,b`).
//
// A session bounds all its requests (store/cassandra's Config.MaxInFlight); more wait, in
// order. Were each mount's prefetches bounded alone, two mounts could fill that bound
// between them, and a reader's demand read of a sample not fetched yet would wait behind
// hundreds of prefetches of another mount. So the session also holds a Bound a little
// below its own, which every mount's prefetches take from: the rest of the session's
// bound is always free for demand reads, which take nothing from it.
//
// A prefetch that finds the bound full is not made (TryAcquire never blocks): a
// prefetcher that waits would measure the wait as the link's latency. The one turned away
// is told once a slot frees, so it can issue again.
package inflight

import "sync"

// Bound is a count of requests in flight with a maximum, shared by several users. It is
// safe for concurrent use. Bound.mu is a leaf: nothing is called while it is held.
type Bound struct {
	max int

	mu      sync.Mutex
	n       int            // guarded by mu
	waiting map[any]func() // guarded by mu: turned away since the last release, by key
}

// New returns a bound of n requests in flight (at least 1).
func New(n int) *Bound {
	return &Bound{max: max(n, 1), waiting: map[any]func(){}}
}

// Max is the bound.
func (b *Bound) Max() int { return b.max }

// InFlight is how many requests hold a slot now.
func (b *Bound) InFlight() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.n
}

// TryAcquire takes a slot if one is free. If none is, it reports false and onFree is
// called once, with no lock held, after a slot is released (the last onFree given for
// key: a user turned away many times is told once).
func (b *Bound) TryAcquire(key any, onFree func()) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.n < b.max {
		b.n++
		return true
	}
	b.waiting[key] = onFree
	return false
}

// Release frees a slot taken by TryAcquire and tells those turned away since.
func (b *Bound) Release() {
	b.mu.Lock()
	b.n--
	var tell []func()
	if len(b.waiting) > 0 {
		for _, f := range b.waiting {
			tell = append(tell, f)
		}
		clear(b.waiting)
	}
	b.mu.Unlock()
	for _, f := range tell {
		f()
	}
}
