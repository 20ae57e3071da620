package splits

import (
	"slices"
	"strconv"
	"testing"

	"github.com/cassfs/cassfs/internal/testkit"
)

func TestParseShard(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Shard
		ok   bool
	}{
		{"0/4", Shard{0, 4, false}, true},
		{"3/4", Shard{3, 4, false}, true},
		{"0/1", Shard{0, 1, false}, true},
		{"4/4", Shard{}, false},
		{"-1/4", Shard{}, false},
		{"1/0", Shard{}, false},
		{"1", Shard{}, false},
		{"1/4/2", Shard{}, false},
		{"01/4", Shard{}, false},
		{"+1/4", Shard{}, false},
		{"a/b", Shard{}, false},
		{"", Shard{}, false},
	} {
		got, err := ParseShard(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseShard(%q) = %+v, %v; want %+v, ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

// checkPartition checks that the shards of order over count ranks partition it: disjoint,
// union the whole order, sizes differing by at most one; padded, every rank has the same
// size and the whole order is still covered.
func checkPartition(t *testing.T, order []uint32, count int, pad bool) {
	t.Helper()
	seen := make([]int, len(order))
	minLen, maxLen := len(order)+1, -1
	for r := range count {
		sh := Shard{Rank: r, Count: count, Pad: pad}
		part := sh.Take(order)
		if len(part) != sh.Len(len(order)) {
			t.Fatalf("rank %d/%d: Take gave %d samples, Len says %d", r, count, len(part), sh.Len(len(order)))
		}
		minLen, maxLen = min(minLen, len(part)), max(maxLen, len(part))
		for _, v := range part {
			seen[v]++
		}
	}
	for v, c := range seen {
		if c == 0 {
			t.Fatalf("n=%d ranks=%d pad=%v: sample %d is in no shard", len(order), count, pad, v)
		}
		if !pad && c != 1 {
			t.Fatalf("n=%d ranks=%d: sample %d is in %d shards", len(order), count, v, c)
		}
	}
	if maxLen-minLen > 1 {
		t.Fatalf("n=%d ranks=%d pad=%v: shard sizes range from %d to %d", len(order), count, pad, minLen, maxLen)
	}
	if pad && len(order) > 0 && (minLen != maxLen || minLen*count-len(order) >= count) {
		t.Fatalf("n=%d ranks=%d padded: sizes %d..%d, want all ceil(n/ranks)", len(order), count, minLen, maxLen)
	}
}

func FuzzShardsPartitionEpoch(f *testing.F) {
	f.Add(uint16(0), uint8(1), false, uint64(0))
	f.Add(uint16(10), uint8(4), false, uint64(1))
	f.Add(uint16(10), uint8(4), true, uint64(2))
	f.Add(uint16(3), uint8(7), true, uint64(3))
	f.Add(uint16(1000), uint8(255), false, uint64(4))
	f.Fuzz(func(t *testing.T, n uint16, ranks uint8, pad bool, epoch uint64) {
		if ranks == 0 {
			return
		}
		checkPartition(t, Permutation(int(n), "train", 5, epoch), int(ranks), pad)
	})
}

func FuzzResumeContinues(f *testing.F) {
	f.Add(uint16(100), uint8(1), uint8(0), uint16(0))
	f.Add(uint16(100), uint8(4), uint8(2), uint16(13))
	f.Add(uint16(7), uint8(3), uint8(2), uint16(2))
	f.Fuzz(func(t *testing.T, n uint16, ranks, rank uint8, start uint16) {
		if ranks == 0 {
			return
		}
		ix := testkit.Index(t, max(int(n), 1), 3)
		s := All(ix)
		sh := Shard{Rank: int(rank) % int(ranks), Count: int(ranks)}
		full := NewEpoch(ix, s, 11, 4, View{Shard: sh})
		k := uint32(start) % (full.Len + 1)
		e := NewEpoch(ix, s, 11, 4, View{Shard: sh, Start: k})
		if e.Start != k || e.Len != full.Len || !slices.Equal(e.Order, full.Order[k:]) {
			t.Fatalf("resume at %d of %d: got start %d len %d order %v, want the full view's order from %d", k, full.Len, e.Start, e.Len, e.Order, k)
		}
		total := 0
		for c, idx := range e.ByClass {
			for _, j := range idx {
				if ix.Label(e.Order[j]) != c {
					t.Fatalf("resumed view lists index %d under class %d, holds label %d", j, c, ix.Label(e.Order[j]))
				}
			}
			total += len(idx)
		}
		if total != len(e.Order) {
			t.Fatalf("resumed view's classes list %d samples, its order %d", total, len(e.Order))
		}
	})
}

// FuzzParseShard: an accepted shard spec names a valid rank and prints back to itself.
func FuzzParseShard(f *testing.F) {
	for _, s := range []string{"0/4", "3/4", "0/1", "4/4", "-1/2", "1/0", "01/4", " 1/4", "1/4\n", "1/", "/", "9223372036854775807/9223372036854775807"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sh, err := ParseShard(s)
		if err != nil {
			return
		}
		if sh.Rank < 0 || sh.Rank >= sh.Count || sh.Pad {
			t.Fatalf("ParseShard(%q) = %+v", s, sh)
		}
		if back := strconv.Itoa(sh.Rank) + "/" + strconv.Itoa(sh.Count); back != s {
			t.Fatalf("ParseShard(%q) = %+v, prints back as %q", s, sh, back)
		}
	})
}
