package disktier

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/cassfs/cassfs/prefetch"
)

// WarmReport is what Warm did.
type WarmReport struct {
	Fetched int     // fetched and kept now
	Held    int     // held before
	Skipped int     // did not fit in the bound
	Failed  []error // fetches that failed, each
}

// Warm fetches the samples of members the tier does not hold into it with from, parallel
// at once, in members' order, as many as fit in its bound (cassfs cache warm). plan is told
// how many will be fetched before the first is; progress after each, with the count and
// bytes so far, from several goroutines at once (so counts may arrive out of order). Every fetch is tried, whatever others do: the report lists each failure,
// so a warm run again fetches what failed. It stops early only when ctx ends.
func (d *Tier) Warm(ctx context.Context, from prefetch.Fetcher, members []uint32, parallel int, plan func(n int), progress func(n, bytes int64)) WarmReport {
	var rep WarmReport
	var todo []uint32
	room := d.maxBytes - d.Stats().Bytes
	for _, i := range members {
		switch {
		case d.Holds(i):
			rep.Held++
		case d.ix.BlobSize(i) <= room:
			todo = append(todo, i)
			room -= d.ix.BlobSize(i)
		default:
			rep.Skipped++
		}
	}
	plan(len(todo))
	fetch := d.Over(from)
	var next, done, nbytes atomic.Int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range min(parallel, len(todo)) {
		wg.Go(func() {
			for k := next.Add(1) - 1; k < int64(len(todo)) && ctx.Err() == nil; k = next.Add(1) - 1 {
				data, err := fetch.Fetch(ctx, todo[k])
				if err != nil {
					mu.Lock()
					rep.Failed = append(rep.Failed, err)
					mu.Unlock()
					continue
				}
				progress(done.Add(1), nbytes.Add(int64(len(data))))
			}
		})
	}
	wg.Wait()
	rep.Fetched = int(done.Load())
	return rep
}
