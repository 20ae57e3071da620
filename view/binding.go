package view

import (
	"sync"

	"github.com/cassfs/cassfs/internal/bitset"
)

// binding decides which sample a name of an epoch view shows (see the package doc): bind
// returns the sample shown at index k of e's order, the same on every call for k.
type binding interface {
	bind(e *Epoch, k uint32) uint32
}

// strictBinding shows the sample at the name's position.
type strictBinding struct{}

func (strictBinding) bind(e *Epoch, k uint32) uint32 { return e.Order[k] }

// arrivalScan bounds how far a lookup looks for an arrived sample beyond the first unbound
// one of its label, so that a lookup costs O(window), not O(epoch).
const arrivalScan = 4096

// arrivalBinding binds a name on first lookup to an arrived sample of its label.
type arrivalBinding struct {
	arrived func(i uint32) bool
}

// arrivalState is one epoch view's bindings.
type arrivalState struct {
	mu     sync.Mutex
	bound  []uint32   // guarded by mu; index in the view's order → bound sample + 1, 0 while unbound
	taken  bitset.Set // guarded by mu; canonical samples bound in this epoch
	cursor []int      // guarded by mu; per label, index into ByClass before which all are taken
}

func (e *Epoch) arrivalState() *arrivalState {
	e.bindOnce.Do(func() {
		e.bound = &arrivalState{
			bound:  make([]uint32, len(e.Order)),
			taken:  bitset.New(e.set.ix.Len()),
			cursor: make([]int, len(e.set.classNames)),
		}
	})
	return e.bound
}

func (a *arrivalBinding) bind(e *Epoch, k uint32) uint32 {
	b := e.arrivalState()
	b.mu.Lock()
	defer b.mu.Unlock()
	if s := b.bound[k]; s != 0 {
		return s - 1
	}
	label := e.set.ix.Label(e.Order[k])
	taken := b.taken.Has
	list := e.ByClass[label]
	for b.cursor[label] < len(list) && taken(e.Order[list[b.cursor[label]]]) {
		b.cursor[label]++
	}
	choice := -1
	for j := b.cursor[label]; j < len(list) && j < b.cursor[label]+arrivalScan; j++ {
		i := e.Order[list[j]]
		if taken(i) {
			continue
		}
		if choice < 0 {
			choice = j
		}
		if a.arrived(i) {
			choice = j
			break
		}
	}
	// choice >= 0 always: this label has as many names as samples and this name is unbound.
	i := e.Order[list[choice]]
	b.taken.Put(i, true)
	b.bound[k] = i + 1
	return i
}
