package store

import (
	"testing"
)

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
		{"system", true, true}, // refused by the Cassandra backend only
		{"system_auth", true, true},
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
