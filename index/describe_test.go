package index_test

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/cassfs/cassfs/index"
	"github.com/cassfs/cassfs/internal/testkit"
	"github.com/cassfs/cassfs/store"
	"github.com/cassfs/cassfs/store/memstore"
	"github.com/cassfs/cassfs/store/storetest"
)

// TestDescribe: the catalogue is what was read; a dataset made and never filled is zeros.
func TestDescribe(t *testing.T) {
	ctx := context.Background()
	st := memstore.New("ds", memstore.Options{})
	if c := testkit.Must(index.Describe(ctx, st))(t); c.Samples != 0 || c.Bytes != 0 || c.Classes != 0 || len(c.Splits) != 0 {
		t.Errorf("an empty dataset: %+v, want zeros", c)
	}
	testkit.Check(t, st.SetLabels(ctx, []string{"a", "b", "c"}))
	var bytes int64
	var ids []store.NewSplit
	for i := range 12 {
		s, data := storetest.MakeSample("ds", i, i%3, 10+i)
		testkit.Check(t, st.Put(ctx, s, data, nil))
		bytes += int64(len(data))
		if i < 4 {
			if len(ids) == 0 {
				ids = append(ids, store.NewSplit{Name: "val"})
			}
			ids[0].Members = append(ids[0].Members, s.ID)
		}
	}
	testkit.Check(t, st.PutSplits(ctx, ids, "{}", "{}", false))
	c := testkit.Must(index.Describe(ctx, st))(t)
	if c.Samples != 12 || c.Classes != 3 || c.Bytes != bytes || !slices.Equal(c.Splits, []string{"val"}) {
		t.Errorf("catalogue %+v, want 12 samples, 3 classes, %d bytes, split val", c, bytes)
	}
}

// dataset show prints the same from a current snapshot as from a scan.
func TestShowFromTheSnapshot(t *testing.T) {
	ctx := context.Background()
	st := richStore(t)
	testkit.Check(t, st.AddColumns(ctx, []string{"unfilled"}))
	ix := testkit.Must(index.Load(ctx, st))(t)
	scanned := testkit.Must(store.Summarize(ctx, st))(t)
	if got := ix.Summary(testkit.Must(st.Columns(ctx))(t)); !reflect.DeepEqual(got, scanned) {
		t.Errorf("Summary from the index:\n%+v\nfrom a scan:\n%+v", got, scanned)
	}
	var fromScan, fromSnapshot strings.Builder
	testkit.Check(t, index.Show(ctx, st, &fromScan))
	testkit.Check(t, st.MarkChanged(ctx))
	if _, _, err := index.StoreSnapshot(ctx, st); err != nil {
		t.Fatal(err)
	}
	scans := 0
	testkit.Check(t, index.Show(ctx, &scanCounter{Store: st, scans: &scans}, &fromSnapshot))
	if scans != 0 || fromSnapshot.String() != fromScan.String() {
		t.Errorf("dataset show from the snapshot (%d scans):\n%s\nfrom a scan:\n%s", scans, fromSnapshot.String(), fromScan.String())
	}
}
