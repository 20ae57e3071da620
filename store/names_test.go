package store

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

func TestNames(t *testing.T) {
	for _, tc := range []struct {
		name    string
		dataset bool // valid as a dataset name
		column  bool // valid as a column name
	}{
		{"tiles", true, true},
		{"imagenet_2012", true, true},
		{"patient_id", true, true},
		{"a", true, true},
		{"label", true, false},
		{"system", false, true},
		{"select", false, false},
		{"Tiles", false, false},
		{"1tiles", false, false},
		{"ti-les", false, false},
		{"x; DROP KEYSPACE y", false, false},
		{"", false, false},
		{"a23456789012345678901234567890123456789012345678", true, true},
		{"a234567890123456789012345678901234567890123456789", false, false},
	} {
		if got := ValidDatasetName(tc.name) == nil; got != tc.dataset {
			t.Errorf("ValidDatasetName(%q) valid = %v, want %v", tc.name, got, tc.dataset)
		}
		if got := ValidColumnName(tc.name) == nil; got != tc.column {
			t.Errorf("ValidColumnName(%q) valid = %v, want %v", tc.name, got, tc.column)
		}
	}
}

func TestSampleIDIsStable(t *testing.T) {
	a, b := SampleID("ds", "cat/1.jpg"), SampleID("ds", "cat/1.jpg")
	if a != b || a == SampleID("ds2", "cat/1.jpg") || a == SampleID("ds", "cat/2.jpg") {
		t.Errorf("SampleID must be a function of (dataset, path) alone")
	}
	if a.Version() != 5 {
		t.Errorf("SampleID version %d, want 5", a.Version())
	}
}
