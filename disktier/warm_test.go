package disktier

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/cassfs/cassfs/internal/testkit"
)

// TestWarm: Warm fetches what the tier lacks, in order, as far as the bound allows; what it
// holds is counted, not fetched again; every failure is reported and the rest still fetched.
func TestWarm(t *testing.T) {
	ix, fetch, calls := diskDataset(t, 10, "v1")
	bound := ix.BlobSize(0) + ix.BlobSize(1) + ix.BlobSize(2) + ix.BlobSize(3) + ix.BlobSize(4)
	d := testkit.Must(Open(t.TempDir(), "ds", ix, bound, quiet()))(t)
	defer d.Close()
	testkit.Must(d.Over(fetch).Fetch(context.Background(), 0))(t)
	calls.Store(0)
	var planned int
	var progressed atomic.Int64
	failing := fetchFunc(func(ctx context.Context, i uint32) ([]byte, error) {
		if i == 2 {
			return nil, errors.New("no such luck")
		}
		return fetch(ctx, i)
	})
	rep := d.Warm(context.Background(), failing, []uint32{0, 1, 2, 3, 4, 5, 6}, 3, func(n int) { planned = n }, func(n, _ int64) { progressed.Store(max(progressed.Load(), n)) })
	if rep.Held != 1 || planned != 4 || rep.Fetched != 3 || len(rep.Failed) != 1 || rep.Skipped != 2 || calls.Load() != 3 || progressed.Load() != 3 {
		t.Errorf("warm: %+v, planned %d, progress to %d, %d fetched from the source; want 1 held, 4 planned, 3 fetched, 1 failed, 2 skipped, 3 fetched from the source", rep, planned, progressed.Load(), calls.Load())
	}
	for _, i := range []uint32{0, 1, 3, 4} {
		if !d.Holds(i) {
			t.Errorf("sample %d not held after warm", i)
		}
	}
}
