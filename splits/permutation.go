// Package splits decides which samples a split holds and in which order each epoch visits
// them: split creation from metadata, stored splits (loading, export, import), epoch
// permutations, shards and resumed views, over a dataset's index (package index).
// It programs against the store.Store interface and must not know FUSE or CQL.
//
// # Creating splits
//
// Create makes named splits of a dataset from its metadata, after Versaci and Busonera,
// "Scaling deep learning data management with Cassandra DB" (2021, §4.1):
//
//  1. Samples are grouped by entity (Item.Group, e.g. the patient): a group never spans
//     two splits, so no patient is both trained and validated on.
//  2. Targets: every split s and class c gets asked[s][c] = total · ratio[s] · share[c],
//     where share is the requested class balance (the original proportions, uniform, or
//     given weights) and total the requested size, capped at what the balance allows
//     (uniform balance cannot use more of a class than it has).
//  3. Groups, in an order shuffled by the seed, then stably sorted so that those holding
//     the largest share of some class come first, are dealt round-robin to the splits:
//     each split in turn takes the next group that does not make it overflow its capacity
//     (its ratio's share of every class's samples). Groups that fit nowhere go to a split
//     they overflow least, chosen at random (weighted by how many of their samples each
//     still has room for), and a split that got nothing takes the smallest group left.
//  4. Samples are drawn from each split's groups round-robin (one from each group in turn,
//     for diversity) until the targets are met. If a split's groups hold too few samples of
//     some class, all its classes are scaled down together, so that its balance holds and
//     its size falls short instead; Report says so. With the original balance and no cap,
//     every sample of every group is used.
//
// The result depends only on the items and the Spec (seed included): the same everywhere.
//
// # Stored splits
//
// Splits are stored in the dataset itself (store.Store.PutSplits), so every machine and
// every rank of a job sees the same ones. LoadStored turns them into Splits of an index for a
// mount; Export and Import move them between copies of a dataset as JSON (ExportFile);
// LoadItems reads what Create needs from the dataset's metadata.
//
// # Shards and resumed views
//
// Ranks of a distributed job mount the same split with the same seed and each a different
// Shard. Every rank computes the same epoch permutation and keeps its own part of it, the
// way PyTorch's DistributedSampler does: rank r of n takes positions r, r+n, r+2n, ... of
// the epoch's order. The shards are disjoint, their union is the epoch, and their sizes
// differ by at most one. With Pad, the order is first extended by repeating its beginning
// until its length divides by n, so that every rank gets exactly ceil(len/n) samples (some
// samples then appear twice in the epoch, on different ranks), as frameworks that need
// equal batch counts on every rank expect. No rank talks to another: the seed is the only
// thing they share.
//
// A View adds a start position: the epoch from position Start of the rank's order on,
// which is what a job restarted in the middle of an epoch must still read.
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
