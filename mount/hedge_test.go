package mount

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cassfs/cassfs/store"
	"github.com/cassfs/cassfs/store/hedge"
	"github.com/cassfs/cassfs/store/memstore"
	"github.com/google/uuid"
)

// onNodes is a store on a cluster of n nodes, as store/cassandra tells.
type onNodes struct {
	*memstore.Store
	n int
}

func (s onNodes) Nodes() int { return s.n }

// TestHedgedReads: a mount hedges its blob reads with --speculative-after on a cluster of
// more than one node, and only there; the metric counts the wrapper's hedges.
func TestHedgedReads(t *testing.T) {
	// The first read of each store never answers before its context ends, so a hedged
	// read is always answered by its hedge.
	newStore := func() *memstore.Store {
		var calls atomic.Int64
		return memstore.New("ds", memstore.Options{Latency: func(uuid.UUID) time.Duration {
			if calls.Add(1) == 1 {
				return time.Hour
			}
			return 0
		}})
	}
	for _, tc := range []struct {
		name   string
		st     store.Store
		after  time.Duration
		hedged bool
	}{
		{"three nodes", onNodes{newStore(), 3}, time.Nanosecond, true},
		{"two nodes", onNodes{newStore(), 2}, time.Nanosecond, true},
		{"one node", onNodes{newStore(), 1}, time.Nanosecond, false},
		{"three nodes, --speculative-after 0", onNodes{newStore(), 3}, 0, false},
		{"a store that does not tell its nodes", newStore(), time.Nanosecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, hedges := hedgedReads(tc.st, tc.after)
			if _, ok := r.(*hedge.Reader); ok != tc.hedged {
				t.Fatalf("hedgedReads returned a %T, want hedging %v", r, tc.hedged)
			}
			if !tc.hedged {
				if r != store.BlobReader(tc.st) {
					t.Errorf("an unhedged mount reads through %T, want the store itself", r)
				}
				if hedges() != 0 {
					t.Errorf("hedges() = %d, want 0", hedges())
				}
				return
			}
			if _, err := r.Get(context.Background(), uuid.New(), nil); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("hedged Get of a missing blob: %v, want ErrNotFound", err)
			}
			if hedges() != 1 {
				t.Errorf("hedges() = %d after one hedged read, want 1", hedges())
			}
		})
	}
}
