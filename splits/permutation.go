// Package splits decides which samples a split holds and in which order each epoch visits
// them. It knows nothing of FUSE or CQL.
//
// # Epoch permutations
//
// The order of epoch N of a split is a pure function of (split name, seed, N, the split's
// size): the same on every machine, in every mount and every rank of a distributed job, with
// no coordination. That is what lets the prefetcher know the future and lets ranks agree.
//
// The split's samples are first put in canonical order: ascending sample id (the 16 bytes
// of the UUID compared bytewise). Epoch N's order is then that list shuffled by
// Permutation(n, split, seed, N), defined as follows so that any program can reproduce it:
//
//  1. key = SHA-256(`cassfs/epoch/v1` 0x00 split 0x00 decimal(seed) 0x00 decimal(N)); the
//     PRNG state s is the first 8 bytes of key read big-endian, as an unsigned 64-bit integer.
//  2. The PRNG is SplitMix64: s += 0x9E3779B97F4A7C15; z = s; z = (z ^ z>>30) *
//     0xBF58476D1CE4E5B9; z = (z ^ z>>27) * 0x94D049BB133111EB; output z ^ z>>31 (all mod 2^64).
//  3. uniform(b) draws r until r >= (2^64 - b) mod b and returns r mod b (unbiased).
//  4. Start from p = [0, 1, ..., n-1]; for i from n-1 down to 1: j = uniform(i+1), swap p[i]
//     and p[j] (Fisher–Yates). Position k of the epoch visits canonical sample p[k].
//
// A reference implementation in Python is in the repository's docs (docs/epoch-order.md);
// TestPermutationMatchesReference pins both to the same output.
package splits

import (
	"crypto/sha256"
	"encoding/binary"
	"strconv"
)

// splitMix64 is the PRNG of epoch permutations (see the package doc).
type splitMix64 uint64

func (s *splitMix64) next() uint64 {
	*s += 0x9E3779B97F4A7C15
	z := uint64(*s)
	z = (z ^ z>>30) * 0xBF58476D1CE4E5B9
	z = (z ^ z>>27) * 0x94D049BB133111EB
	return z ^ z>>31
}

// uniform returns an unbiased draw from [0, bound).
func (s *splitMix64) uniform(bound uint64) uint64 {
	threshold := -bound % bound // (2^64 - bound) mod bound
	for {
		if r := s.next(); r >= threshold {
			return r % bound
		}
	}
}

// EpochKey is the PRNG's initial state for (split, seed, epoch).
func EpochKey(split string, seed, epoch uint64) uint64 {
	h := sha256.New()
	h.Write([]byte("cassfs/epoch/v1\x00"))
	h.Write([]byte(split))
	h.Write([]byte{0})
	h.Write(strconv.AppendUint(nil, seed, 10))
	h.Write([]byte{0})
	h.Write(strconv.AppendUint(nil, epoch, 10))
	return binary.BigEndian.Uint64(h.Sum(nil)[:8])
}

// Permutation returns epoch's order of a split of n samples: position k visits canonical
// sample p[k]. n must fit in a uint32.
func Permutation(n int, split string, seed, epoch uint64) []uint32 {
	p := make([]uint32, n)
	for i := range p {
		p[i] = uint32(i)
	}
	s := splitMix64(EpochKey(split, seed, epoch))
	for i := n - 1; i > 0; i-- {
		j := s.uniform(uint64(i) + 1)
		p[i], p[j] = p[j], p[i]
	}
	return p
}
