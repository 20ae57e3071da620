package hedge_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/cassfs/cassfs/store/hedge"
	"github.com/cassfs/cassfs/store/memstore"
	"github.com/cassfs/cassfs/store/storetest"
	"github.com/google/uuid"
)

// TestConformance runs the blob-read suite through a Reader over the in-memory store, in
// which every other read is a straggler: most reads are hedged, some answered by the
// straggler, some by the hedge. What the suite checks holds however the race goes; how
// long it takes is all the timing changes.
func TestConformance(t *testing.T) {
	var n atomic.Int64
	st := memstore.New("hedge", memstore.Options{Latency: func(uuid.UUID) time.Duration {
		if n.Add(1)%2 == 0 {
			return 20 * time.Millisecond // cut short when the other attempt answers first
		}
		return 0
	}})
	storetest.PutKnown(t, st)
	h := hedge.New(st, time.Millisecond)
	storetest.RunBlobReader(t, h)
	if h.Hedges() == 0 {
		t.Error("no read was hedged: the suite did not exercise hedging")
	}
}
