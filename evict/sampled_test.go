package evict

import (
	"math/rand/v2"
	"testing"

	"github.com/cassfs/cassfs/internal/testkit"
)

// The held set stays what was added and not removed, in any order of operations.
func TestSampledMINHeldSet(t *testing.T) {
	const n = 200
	s := NewSampledMIN(n, 1)
	want := map[uint32]bool{}
	r := rand.New(rand.NewPCG(3, 4))
	for range 5000 {
		i := uint32(r.IntN(n))
		if r.IntN(2) == 0 {
			s.Add(i)
			want[i] = true
		} else {
			s.Remove(i)
			delete(want, i)
		}
	}
	if s.Len() != len(want) {
		t.Fatalf("Len %d, want %d", s.Len(), len(want))
	}
	for i := range uint32(n) {
		if s.Holds(i) != want[i] {
			t.Fatalf("Holds(%d) = %v, want %v", i, s.Holds(i), want[i])
		}
	}
	// Victim draws only held samples that are eligible, and the farthest of them.
	f := testkit.Future{}
	for i := range want {
		f[i] = [2]uint64{uint64(i), Never}
	}
	v, next, ok := s.Victim(f, 0, func(i uint32) bool { return i%2 == 0 })
	if !ok || !want[v] || v%2 != 0 || next != uint64(v) {
		t.Errorf("Victim = %d (next %d, ok %v): want an even held sample", v, next, ok)
	}
	if _, _, ok := NewSampledMIN(n, 1).Victim(f, 0, nil); ok {
		t.Errorf("Victim of an empty set reported one")
	}
}

// The disk tier's rule: on the reads of whole epochs it hits as often as MIN and evicts
// nothing (where MIN, sampled, rewrites thousands of entries for the same hits); when the
// reads move on (a rank's part of each epoch) it hits as often as the heap-based
// Clairvoyant with the same knowledge, and far more than keeping what came first.
func TestSampledMINNearMIN(t *testing.T) {
	const n = 4000
	f, trace := epochTrace(n, 4, 9)
	for _, capacity := range []int{n / 10, n / 2, n * 9 / 10} {
		got, ev := sampledHits(trace, capacity, f, true)
		min := simulate(trace, capacity, f)
		_, minEv := sampledHits(trace, capacity, f, false)
		if float64(got) < 0.99*float64(min) || ev != 0 || minEv == 0 {
			t.Errorf("epochs, capacity %d: %d hits and %d evictions, MIN has %d hits (sampled: %d evictions)", capacity, got, ev, min, minEv)
		}
	}
	sh := shardTrace(n, 4, 8)
	for _, capacity := range []int{n / 16, n / 4} {
		got, _ := sampledHits(sh.trace, capacity, sh.horizon(2), true)
		cl, keep := simulate(sh.trace, capacity, sh.horizon(2)), keepHits(sh.trace, capacity)
		if float64(got) < 0.97*float64(cl) || float64(got) < 1.3*float64(keep) {
			t.Errorf("shard 0/4, capacity %d: %d hits, Clairvoyant %d, fill-and-keep %d", capacity, got, cl, keep)
		}
	}
}
