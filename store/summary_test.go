package store_test

import (
	"context"
	"slices"
	"testing"

	"github.com/cassfs/cassfs/internal/testkit"
	"github.com/cassfs/cassfs/store"
	"github.com/cassfs/cassfs/store/memstore"
	"github.com/cassfs/cassfs/store/storetest"
)

// TestSummarize: one scan counts samples and bytes, by class, targets and their
// extensions, and the samples filling each metadata column.
func TestSummarize(t *testing.T) {
	ctx := context.Background()
	st := memstore.New("ds", memstore.Options{})
	testkit.Check(t, st.SetLabels(ctx, []string{"a", "b", "c"}))
	testkit.Check(t, st.AddColumns(ctx, []string{"patient", "slide"}))
	for i := range 5 {
		s, data := storetest.MakeSample("ds", i, i%2, 100+i)
		s.Meta = map[string]string{"patient": "p", "slide": ""}
		var mask []byte
		if i == 0 {
			_, mask = storetest.MakeSample("ds", 9, 0, 30)
			s.Target = &store.Target{Ext: ".png", Size: int64(len(mask)), Checksum: store.Checksum(mask), CRC32C: store.CRC32C(mask)}
		}
		testkit.Check(t, st.Put(ctx, s, data, mask))
	}
	sum := testkit.Must(store.Summarize(ctx, st))(t)
	if sum.Samples != 5 || sum.Bytes != 510 || !slices.Equal(sum.PerClass, []int64{3, 2, 0}) ||
		sum.Targets != 1 || sum.TargetBytes != 30 || !slices.Equal(sum.TargetExts, []string{".png"}) ||
		sum.Filled["patient"] != 5 || sum.Filled["slide"] != 0 || !slices.Equal(sum.Labels, []string{"a", "b", "c"}) || len(sum.Columns) != 2 {
		t.Errorf("got %+v", sum)
	}
}
