package prefetch

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestIdleStreamsAreDropped: a long job that moves from stream to stream (shard to shard,
// split to split) leaves no state behind: streams not accessed for IdleAfter are dropped,
// so the streams held (and the metric series made of Stats) stay bounded, and a stream
// accessed again starts anew.
func TestIdleStreamsAreDropped(t *testing.T) {
	f := newCountingFetch(100)
	c := NewCache(fetchFunc(f.fetch), CacheOptions{MaxBytes: 1 << 30, Samples: 1000})
	defer c.Close()
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	p := NewPrefetcher(c, Options{Size: sizeOf, Samples: 1000, IdleAfter: time.Minute, Now: clock})
	defer p.Close()
	most := 0
	for k := range 100 {
		st := &testStream{fmt.Sprintf("train/shard-%d-of-100", k), rotated(1000).order}
		for range 10 {
			p.Access(st, 0)
		}
		advance(25 * time.Second)
		most = max(most, len(p.Stats()))
	}
	settle(t, c)
	if most > 4 {
		t.Errorf("up to %d streams held at once, visiting one every 25 s with streams dropped after a minute idle: want at most 4", most)
	}
	// An access sweeps too (no Stats, no scrape), and what the dropped streams prefetched
	// and nobody read is released: nothing unread is left of them.
	advance(time.Minute)
	p.Access(&testStream{"val", rotated(1000).order}, 0)
	if all := p.all.Load(); all == nil || len(*all) != 1 {
		t.Errorf("after an access, the future consults %d streams, want the one just accessed", len(*all))
	}
	advance(time.Minute)
	if n := len(p.Stats()); n != 0 {
		t.Errorf("%d streams held after every one was idle for a minute", n)
	}
	settle(t, c)
	if fresh := c.Stats().FreshBytes; fresh != 0 {
		t.Errorf("%d bytes prefetched by dropped streams are still waiting for readers that are gone", fresh)
	}
	if all := p.all.Load(); all != nil && len(*all) != 0 {
		t.Errorf("the future still consults %d dropped streams", len(*all))
	}
	// Back again: a stream of its own, from the readers' position.
	p.Access(&testStream{"train/shard-0-of-100", rotated(1000).order}, 3)
	if s := p.Stats(); len(s) != 1 || s[0].Epoch != 3 || s[0].Consumed != 1 {
		t.Errorf("a stream accessed again after it was dropped: %+v, want one stream in epoch 3 with one access", s)
	}
}
