package splits

import (
	"slices"
	"testing"

	"github.com/cassfs/cassfs/internal/testkit"
)

func TestEpochByClass(t *testing.T) {
	ix := testkit.Index(t, 300, 4)
	s := All(ix)
	e := NewEpoch(ix, s, 9, 2, View{})
	if !isPermutation(e.Order) {
		t.Fatal("epoch order of the all split is not a permutation")
	}
	total := 0
	for c, positions := range e.ByClass {
		if !slices.IsSorted(positions) {
			t.Errorf("class %d positions not ascending", c)
		}
		for _, p := range positions {
			if ix.Label(e.Order[p]) != c {
				t.Errorf("position %d listed under class %d holds label %d", p, c, ix.Label(e.Order[p]))
			}
		}
		total += len(positions)
	}
	if total != ix.Len() {
		t.Errorf("classes list %d positions, want %d", total, ix.Len())
	}
	// A subset split permutes its members only.
	sub := &Split{Name: "sub", Members: []uint32{3, 10, 11, 200}}
	se := NewEpoch(ix, sub, 9, 2, View{})
	got := slices.Clone(se.Order)
	slices.Sort(got)
	if !slices.Equal(got, sub.Members) {
		t.Errorf("subset epoch visits %v, want the members %v", got, sub.Members)
	}
}

// TestIndexVerifyChoosesTheChecksum: a sample with a CRC32C is verified by it (a blob whose
// CRC differs fails even if its SHA-256 matched), one without by its SHA-256.
