package index_test

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/cassfs/cassfs/index"
	"github.com/cassfs/cassfs/internal/testkit"
	"github.com/cassfs/cassfs/store"
	"github.com/cassfs/cassfs/store/memstore"
	"github.com/cassfs/cassfs/store/storetest"
)

// TestDatasetListPrintsOnlyWhatItRead: a dataset whose scan fails is named with the reason
// and listed with no figures, the others are listed with theirs, and the command fails; an
// empty dataset, read completely, is listed with 0.
func TestDatasetListPrintsOnlyWhatItRead(t *testing.T) {
	ctx := context.Background()
	fill := func(st *memstore.Store, n int) *memstore.Store {
		testkit.Check(t, st.SetLabels(ctx, []string{"a", "b"}))
		for i := range n {
			s, data := storetest.MakeSample(st.Dataset(), i, i%2, 100)
			testkit.Check(t, st.Put(ctx, s, data, nil))
		}
		return st
	}
	stores := map[string]*memstore.Store{
		"good": fill(memstore.New("good", memstore.Options{}), 5),
		"broken": fill(memstore.New("broken", memstore.Options{FailScan: func(n int) error {
			if n == 3 {
				return errors.New("scan dataset \"broken\", tokens (1, 2]: Operation failed - received 0 responses and 1 failures")
			}
			return nil
		}}), 5),
		"empty": memstore.New("empty", memstore.Options{}),
	}
	open := func(_ context.Context, name string) (store.Store, error) { return stores[name], nil }
	var out, errOut strings.Builder
	err := index.List(ctx, []string{"broken", "empty", "good"}, open, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "1 of 3 datasets could not be read (broken") {
		t.Errorf("list with a dataset that cannot be read: %v, want an error naming it", err)
	}
	if !strings.Contains(errOut.String(), "dataset broken could not be read: ") || !strings.Contains(errOut.String(), "received 0 responses") {
		t.Errorf("standard error %q names neither the dataset nor the cause", errOut.String())
	}
	if strings.Contains(out.String(), "broken") {
		t.Errorf("a dataset that could not be read is listed:\n%s", out.String())
	}
	for _, re := range []string{`(?m)^good\s+5\s+500 B\s+2\s`, `(?m)^empty\s+0\s+0 B\s+0\s`} {
		if !regexp.MustCompile(re).MatchString(out.String()) {
			t.Errorf("list lacks %s:\n%s", re, out.String())
		}
	}
}
