package evict

import "math/rand/v2"

// SampledMIN approximates Belady's MIN for a large set held outside memory: the disk tier,
// millions of files. Clairvoyant keeps every held sample's next use in two heaps (about 80
// bytes per sample, updated on every read); SampledMIN keeps only the held samples in an
// array (4 bytes each, and 4 per sample of the dataset for its place there) and, when room
// is needed, draws victimDraws of them at random, asks the Future for each one's next use
// and picks the farthest. Nothing is cached between evictions, so no next use goes stale.
// Under a permutation per epoch next uses are spread evenly over the epochs ahead, so the
// farthest of 64 draws lies on average beyond 98% of the held samples' next uses: MIN's
// choice up to a few hundredths of an epoch (BenchmarkEvictionPolicies puts the hit rates
// side by side). Redis approximates LRU by sampling in the same way. Admission is MIN's: a
// sample comes in only in place of one used after it.
//
// It is not safe for concurrent use.
type SampledMIN struct {
	ids []uint32 // held samples, in no order
	at  []int32  // sample → its index in ids, or -1
	rng *rand.Rand
}

// victimDraws is how many held samples Victim compares.
const victimDraws = 64

// NewSampledMIN returns an empty policy for samples 0 .. samples-1; seed seeds its draws.
func NewSampledMIN(samples int, seed uint64) *SampledMIN {
	at := make([]int32, samples)
	for k := range at {
		at[k] = -1
	}
	return &SampledMIN{at: at, rng: rand.New(rand.NewPCG(seed, 0x5eed))}
}

// Len is the number of samples held.
func (s *SampledMIN) Len() int { return len(s.ids) }

// Holds reports whether sample i is held.
func (s *SampledMIN) Holds(i uint32) bool { return s.at[i] >= 0 }

// Add holds sample i.
func (s *SampledMIN) Add(i uint32) {
	if s.at[i] >= 0 {
		return
	}
	s.at[i] = int32(len(s.ids))
	s.ids = append(s.ids, i)
}

// Remove stops holding sample i.
func (s *SampledMIN) Remove(i uint32) {
	k := s.at[i]
	if k < 0 {
		return
	}
	last := s.ids[len(s.ids)-1]
	s.ids[k], s.at[last] = last, k
	s.ids = s.ids[:len(s.ids)-1]
	s.at[i] = -1
}

// Victim draws held samples that eligible accepts (nil: all) and returns the one f says is
// used farthest after now, with that use (Never: not known to be used again); ok is false
// when no draw was eligible.
func (s *SampledMIN) Victim(f Future, now uint64, eligible func(uint32) bool) (victim uint32, next uint64, ok bool) {
	if len(s.ids) == 0 {
		return 0, 0, false
	}
	for range victimDraws {
		i := s.ids[s.rng.IntN(len(s.ids))]
		if eligible != nil && !eligible(i) {
			continue
		}
		u := f.Next(i, now)
		if !ok || u > next {
			victim, next, ok = i, u, true
		}
		if next == Never {
			break // nothing is farther
		}
	}
	return victim, next, ok
}
