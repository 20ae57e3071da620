package evict

import (
	"container/list"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/cassfs/cassfs/splits"
)

func TestEpochFutureNext(t *testing.T) {
	f := NewEpochFuture(4)
	f.Add(0, []uint32{2, 0, 3, 1})
	f.Add(1, []uint32{1, 3, 0, 2})
	for _, tc := range []struct {
		sample uint32
		now    uint64
		want   uint64
	}{
		{2, 0, 0}, // read now
		{0, 0, 1},
		{1, 2, 3},
		{2, 1, 4 + 3}, // passed in epoch 0: epoch 1, position 3
		{1, 4, 4},
		{0, 7, Never}, // epoch 2 is not known
	} {
		if got := f.Next(tc.sample, tc.now); got != tc.want {
			t.Errorf("Next(%d, %d) = %d, want %d", tc.sample, tc.now, got, tc.want)
		}
	}
	f.Forget(1)
	if got := f.Next(2, 1); got != Never {
		t.Errorf("Next after Forget(1) = %d, want Never", got)
	}
}

// epochTrace is the reads of epochs whole epochs of split "train" of n samples, and their
// Future.
func epochTrace(n, epochs int, seed uint64) (*EpochFuture, []uint32) {
	f := NewEpochFuture(n)
	var trace []uint32
	for e := range uint64(epochs) {
		p := splits.Permutation(n, "train", seed, e)
		f.Add(e, p)
		trace = append(trace, p...)
	}
	return f, trace
}

// traceFuture is the Future of an arbitrary trace, by scanning it (the reference).
type traceFuture []uint32

func (tr traceFuture) Next(sample uint32, now uint64) uint64 {
	for k := now; k < uint64(len(tr)); k++ {
		if tr[k] == sample {
			return k
		}
	}
	return Never
}

// simulate reads trace through a cache of capacity samples kept by policy, which admits
// a missed sample only if it is needed sooner than the victim (MIN with bypass), and
// returns the hits. before, if not nil, runs before each read.
func simulate(trace []uint32, capacity int, future Future, before ...func(k int)) int {
	c := NewClairvoyant(future)
	hits := 0
	for k, s := range trace {
		for _, fn := range before {
			fn(k)
		}
		now := uint64(k)
		if c.Holds(s) {
			hits++
			c.Used(s, now)
			continue
		}
		if c.Len() >= capacity {
			if _, vnext, ok := c.Victim(now + 1); ok && future.Next(s, now+1) >= vnext { // admitted only if needed sooner than the victim
				continue
			}
			v, _, _ := c.Victim(now + 1)
			c.Remove(v)
		}
		c.Add(s, now+1)
	}
	return hits
}

// bruteMIN is Belady's MIN by brute force: on a miss with a full cache, evict the held
// sample whose next use is farthest (the missed sample itself if it is the farthest).
func bruteMIN(trace []uint32, capacity int) int {
	held := map[uint32]bool{}
	hits := 0
	next := func(s uint32, after int) int {
		for k := after + 1; k < len(trace); k++ {
			if trace[k] == s {
				return k
			}
		}
		return len(trace) + int(s) // never again: farther than any use; ties broken by id
	}
	for k, s := range trace {
		if held[s] {
			hits++
			continue
		}
		if len(held) < capacity {
			held[s] = true
			continue
		}
		victim, far := s, next(s, k)
		for h := range held {
			if n := next(h, k); n > far {
				victim, far = h, n
			}
		}
		if victim != s {
			delete(held, victim)
			held[s] = true
		}
	}
	return hits
}

// The policy's choices are MIN's: on random traces and on epoch traces, it hits exactly
// as often as brute-force MIN.
func TestClairvoyantIsMIN(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 40 {
		n := 5 + r.IntN(20)
		trace := make([]uint32, 200)
		for k := range trace {
			trace[k] = uint32(r.IntN(n))
		}
		capacity := 1 + r.IntN(n)
		if got, want := simulate(trace, capacity, traceFuture(trace)), bruteMIN(trace, capacity); got != want {
			t.Fatalf("round %d (%d samples, capacity %d): %d hits, MIN has %d", round, n, capacity, got, want)
		}
	}
	f, trace := epochTrace(50, 4, 7)
	for _, capacity := range []int{5, 25, 45} {
		if got, want := simulate(trace, capacity, f), bruteMIN(trace, capacity); got != want {
			t.Errorf("epochs, capacity %d: %d hits, MIN has %d", capacity, got, want)
		}
	}
}

// A held sample whose next use passed without a read is looked up again, so it does not
// stay "needed soon" for ever.
func TestClairvoyantForgetsPassedUses(t *testing.T) {
	f := NewEpochFuture(4)
	f.Add(0, []uint32{0, 1, 2, 3})
	f.Add(1, []uint32{3, 2, 1, 0})
	c := NewClairvoyant(f)
	c.Add(0, 0) // next use 0
	c.Add(3, 0) // next use 3
	// Sample 0 was skipped at position 0; at position 2 its next use is epoch 1's last
	// position (7), sample 3's is 3.
	if v, next, _ := c.Victim(2); v != 0 || next != 7 {
		t.Errorf("Victim(2) = %d (next use %d), want 0 (next use 7)", v, next)
	}
	c.Remove(0)
	if v, _, ok := c.Victim(2); !ok || v != 3 || c.Len() != 1 || c.Holds(0) {
		t.Errorf("after Remove(0): victim %d, %v, %d held", v, ok, c.Len())
	}
}

// lruHits reads trace through an LRU cache of capacity samples.
func lruHits(trace []uint32, capacity int) int {
	l := list.New()
	at := map[uint32]*list.Element{}
	hits := 0
	for _, s := range trace {
		if e, ok := at[s]; ok {
			hits++
			l.MoveToFront(e)
			continue
		}
		if l.Len() >= capacity {
			old := l.Remove(l.Back()).(uint32)
			delete(at, old)
		}
		at[s] = l.PushFront(s)
	}
	return hits
}

// keepHits reads trace through a cache that admits samples until it holds capacity and
// then keeps what it has (the disk tier's policy).
func keepHits(trace []uint32, capacity int) int {
	held := map[uint32]bool{}
	hits := 0
	for _, s := range trace {
		switch {
		case held[s]:
			hits++
		case len(held) < capacity:
			held[s] = true
		}
	}
	return hits
}

// BenchmarkEvictionPolicies: the hit rate of the clairvoyant policy against LRU and the
// bound (MIN knowing the whole trace) and fill-and-keep (the disk tier's) on the reads of 5 epochs of a 100,000-sample split
// in the epochs' real orders, for caches of 10%–90% of the split. The policy knows what a
// mount knows: the current epoch's order and the next one's. The first epoch is always
// missed; rates are of all reads.
func BenchmarkEvictionPolicies(b *testing.B) {
	const n, epochs = 100_000, 5
	var trace []uint32
	policy := NewEpochFuture(n)
	for e := range uint64(epochs) {
		p := splits.Permutation(n, "train", 42, e)
		policy.Add(e, p)
		trace = append(trace, p...)
	}
	// The bound knows every epoch of the trace; the policy the same here, since within
	// a stream of permutations the next epoch already holds every sample's next use. The
	// bound is still computed apart, on its own Future, to check that.
	bound := NewEpochFuture(n)
	for e := range uint64(epochs) {
		bound.Add(e, trace[e*n:(e+1)*n])
	}
	for range b.N {
		for pct := 10; pct <= 90; pct += 10 {
			capacity := n * pct / 100
			total := float64(len(trace))
			cl := float64(simulateHorizon(trace, capacity, policy, n)) / total
			bd := float64(simulate(trace, capacity, bound)) / total
			lru := float64(lruHits(trace, capacity)) / total
			keep := float64(keepHits(trace, capacity)) / total
			b.ReportMetric(keep*100, fmt.Sprintf("fill-and-keep-%d%%-hit%%", pct))
			for _, tier := range []bool{false, true} {
				name := map[bool]string{false: "sampled-min", true: "disk-tier"}[tier]
				hits, ev := sampledHits(trace, capacity, policy, tier)
				b.ReportMetric(100*float64(hits)/total, fmt.Sprintf("%s-%d%%-hit%%", name, pct))
				b.ReportMetric(float64(ev), fmt.Sprintf("%s-%d%%-evictions", name, pct))
			}
			b.ReportMetric(cl*100, fmt.Sprintf("clairvoyant-%d%%-hit%%", pct))
			b.ReportMetric(lru*100, fmt.Sprintf("lru-%d%%-hit%%", pct))
			b.ReportMetric(bd*100, fmt.Sprintf("bound-%d%%-hit%%", pct))
		}
		// One rank of four (--shard 0/4), 8 epochs: every epoch a different quarter.
		const ranks, shardEpochs = 4, 8
		sh := shardTrace(n, ranks, shardEpochs)
		total := float64(len(sh.trace))
		for _, pct := range []int{25, 50, 100, 200} {
			capacity := n / ranks * pct / 100
			b.ReportMetric(100*float64(keepHits(sh.trace, capacity))/total, fmt.Sprintf("shard-fill-and-keep-%d%%-hit%%", pct))
			for _, tier := range []bool{false, true} {
				name := map[bool]string{false: "sampled-min", true: "disk-tier"}[tier]
				hits, ev := sampledHits(sh.trace, capacity, sh.horizon(2), tier)
				b.ReportMetric(100*float64(hits)/total, fmt.Sprintf("shard-%s-%d%%-hit%%", name, pct))
				b.ReportMetric(float64(ev), fmt.Sprintf("shard-%s-%d%%-evictions", name, pct))
			}
			b.ReportMetric(100*float64(simulate(sh.trace, capacity, sh.horizon(2)))/total, fmt.Sprintf("shard-clairvoyant-%d%%-hit%%", pct))
			b.ReportMetric(100*float64(lruHits(sh.trace, capacity))/total, fmt.Sprintf("shard-lru-%d%%-hit%%", pct))
			b.ReportMetric(100*float64(simulate(sh.trace, capacity, sh.horizon(shardEpochs)))/total, fmt.Sprintf("shard-bound-%d%%-hit%%", pct))
		}
	}
}

// sampledHits reads trace through a cache of capacity samples kept by SampledMIN over
// future and returns its hits and evictions. With tier set it follows the disk tier's
// rule (evict only a sample no known order reads, for one read again); else MIN's
// (evict the farthest for one needed sooner). A missed sample is read at once, so its
// next use after the read is what admission weighs.
func sampledHits(trace []uint32, capacity int, future Future, tier bool) (hits, evictions int) {
	n := 0
	for _, s := range trace {
		n = max(n, int(s)+1)
	}
	c := NewSampledMIN(n, 1)
	for k, s := range trace {
		now := uint64(k)
		if c.Holds(s) {
			hits++
			continue
		}
		if c.Len() >= capacity {
			v, vnext, _ := c.Victim(future, now+1, nil)
			reuse := future.Next(s, now+1)
			if reuse >= vnext || tier && (vnext != Never || reuse == Never) {
				continue
			}
			c.Remove(v)
			evictions++
		}
		c.Add(s)
	}
	return hits, evictions
}

// shard is the reads of one rank over epochs of a split: each epoch the rank's part of
// that epoch's permutation (splits.Shard).
type shard struct {
	trace []uint32
	m     uint64     // reads per epoch
	inv   [][]uint32 // epoch → sample → position in the rank's epoch, or math.MaxUint32
}

func shardTrace(n, ranks, epochs int) *shard {
	sh := &shard{}
	for e := range uint64(epochs) {
		part := splits.Shard{Rank: 0, Count: ranks}.Take(splits.Permutation(n, "train", 42, e))
		sh.m = uint64(len(part))
		sh.trace = append(sh.trace, part...)
		inv := make([]uint32, n)
		for k := range inv {
			inv[k] = math.MaxUint32 // absent from the rank's epoch
		}
		for k, s := range part {
			inv[s] = uint32(k)
		}
		sh.inv = append(sh.inv, inv)
	}
	return sh
}

// horizon is the Future that knows the current epoch and the next epochs-1 (2: what a
// mount knows).
func (sh *shard) horizon(epochs int) Future { return shardFuture{sh, uint64(epochs)} }

type shardFuture struct {
	sh     *shard
	epochs uint64
}

func (f shardFuture) Next(sample uint32, now uint64) uint64 {
	e, k := now/f.sh.m, now%f.sh.m
	for d := range f.epochs {
		if int(e+d) >= len(f.sh.inv) {
			break
		}
		if pos := f.sh.inv[e+d][sample]; pos != math.MaxUint32 && (d > 0 || uint64(pos) >= k) {
			return (e+d)*f.sh.m + uint64(pos)
		}
	}
	return Never
}

// simulateHorizon is simulate with a policy that, like a mount, knows only the current
// epoch's order and the next one's: epochs are added to and forgotten from a Future as the
// reads move on.
func simulateHorizon(trace []uint32, capacity int, full *EpochFuture, n int) int {
	f := NewEpochFuture(n)
	f.inv[0], f.inv[1] = full.inv[0], full.inv[1]
	return simulate(trace, capacity, f, func(k int) {
		if k%n == 0 && k > 0 {
			e := uint64(k / n)
			f.Forget(e - 1)
			if inv, ok := full.inv[e+1]; ok {
				f.inv[e+1] = inv
			}
		}
	})
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
