package splits

import (
	"fmt"
	"strconv"
	"strings"
)

// Shard is rank Rank's part of every epoch among Count ranks. The zero Shard is the whole
// epoch.
type Shard struct {
	Rank, Count int
	Pad         bool // repeat the order's beginning so every rank gets the same count
}

// ParseShard reads "i/n": rank i (from 0) of n.
func ParseShard(s string) (Shard, error) {
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	switch {
	case !ok || err1 != nil || err2 != nil || strings.ContainsAny(s, "+ ") || a != strconv.Itoa(i) || b != strconv.Itoa(n):
		return Shard{}, fmt.Errorf("shard %q: want RANK/RANKS, e.g. 0/4 for the first of four ranks", s)
	case n < 1 || n > 1<<20:
		return Shard{}, fmt.Errorf("shard %q: the number of ranks must be between 1 and %d", s, 1<<20)
	case i < 0 || i >= n:
		return Shard{}, fmt.Errorf("shard %q: rank must be between 0 and %d (ranks count from 0)", s, n-1)
	}
	return Shard{Rank: i, Count: n}, nil
}

// String is the "i/n" form, or "" for the whole epoch.
func (sh Shard) String() string {
	if sh.Count <= 1 {
		return ""
	}
	return fmt.Sprintf("%d/%d", sh.Rank, sh.Count)
}

// Len is how many positions the shard holds of an epoch of n samples.
func (sh Shard) Len(n int) int {
	if sh.Count <= 1 {
		return n
	}
	if sh.Pad {
		if n == 0 {
			return 0
		}
		return (n + sh.Count - 1) / sh.Count
	}
	return (n - sh.Rank + sh.Count - 1) / sh.Count
}

// Take returns the shard's part of an epoch's order: order[Rank], order[Rank+Count], ...,
// continuing over the order repeated when padded.
func (sh Shard) Take(order []uint32) []uint32 {
	if sh.Count <= 1 {
		return order
	}
	out := make([]uint32, sh.Len(len(order)))
	for k := range out {
		out[k] = order[(sh.Rank+k*sh.Count)%len(order)]
	}
	return out
}

// View is what an epoch directory shows: a rank's shard of the epoch, from position Start
// of the shard's order on.
type View struct {
	Shard Shard
	Start uint32
}
