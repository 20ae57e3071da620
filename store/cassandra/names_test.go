package cassandra

import (
	"math"
	"testing"
)

func TestTokenRangesCoverTheRing(t *testing.T) {
	for _, n := range []int{1, 2, 7, 256} {
		r := tokenRanges(n)
		if len(r) != n {
			t.Fatalf("tokenRanges(%d) has %d ranges", n, len(r))
		}
		if r[0][0] != math.MinInt64 || r[n-1][1] != math.MaxInt64 {
			t.Errorf("tokenRanges(%d) spans (%d, %d], want the whole ring", n, r[0][0], r[n-1][1])
		}
		for i := 1; i < n; i++ {
			if r[i][0] != r[i-1][1] || r[i][0] >= r[i][1] {
				t.Errorf("tokenRanges(%d): range %d (%d, %d] does not continue %d", n, i, r[i][0], r[i][1], r[i-1][1])
			}
		}
	}
}

func TestDatasetNames(t *testing.T) {
	for _, tc := range []struct {
		name  string
		valid bool
	}{
		{"tiles", true},
		{"system", false},
		{"system_auth", false},
		{"select", false},
		{"Tiles", false},
	} {
		if got := ValidDatasetName(tc.name) == nil; got != tc.valid {
			t.Errorf("ValidDatasetName(%q) valid = %v, want %v", tc.name, got, tc.valid)
		}
	}
}
