package splits

import "github.com/cassfs/cassfs/index"

// Split is a named subset of an index's samples. Members are canonical indices, ascending.
type Split struct {
	Name    string
	Members []uint32
}

// All is the split holding every sample of ix.
func All(ix *index.Index) *Split {
	m := make([]uint32, ix.Len())
	for i := range m {
		m[i] = uint32(i)
	}
	return &Split{Name: "all", Members: m}
}

// Epoch is what one view of one epoch of a split holds, with what directory listings need.
// Positions are counted in the shard's order of the epoch: Order[k] is position Start+k.
type Epoch struct {
	N       uint64
	Start   uint32     // position of Order[0] in the shard's order
	Len     uint32     // length of the shard's order: Start + len(Order)
	Order   []uint32   // canonical sample index of positions Start, Start+1, ...
	ByClass [][]uint32 // label → indices into Order of that label's samples, ascending
}

// NewEpoch computes epoch n of split s over ix with the given seed, as seen by view v.
// v.Start must be between 0 and the shard's length.
func NewEpoch(ix *index.Index, s *Split, seed, n uint64, v View) *Epoch {
	p := Permutation(len(s.Members), s.Name, seed, n)
	for k, m := range p {
		p[k] = s.Members[m] // in place: p[k] is read once, before it is overwritten
	}
	p = v.Shard.Take(p)
	e := &Epoch{N: n, Start: v.Start, Len: uint32(len(p)), Order: p[v.Start:], ByClass: make([][]uint32, len(ix.Labels()))}
	counts := make([]int, len(ix.Labels()))
	for _, i := range e.Order {
		counts[ix.Label(i)]++
	}
	for c, cnt := range counts {
		e.ByClass[c] = make([]uint32, 0, cnt)
	}
	for k, i := range e.Order {
		c := ix.Label(i)
		e.ByClass[c] = append(e.ByClass[c], uint32(k))
	}
	return e
}
