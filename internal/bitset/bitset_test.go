package bitset

import (
	"sync"
	"sync/atomic"
	"testing"
)

func TestSet(t *testing.T) {
	s := New(130)
	for _, i := range []uint32{0, 63, 64, 129} {
		if s.Has(i) {
			t.Errorf("new set has %d", i)
		}
		s.Put(i, true)
		if !s.Has(i) {
			t.Errorf("%d put, not had", i)
		}
	}
	s.Put(64, false)
	if s.Has(64) || !s.Has(63) || !s.Has(129) {
		t.Error("removing 64 changed its neighbours or kept it")
	}
	s.Put(500, true) // beyond the room: ignored
	if s.Has(500) || s.Add(500) {
		t.Error("a member beyond the room")
	}
	s.Clear()
	for i := range uint32(130) {
		if s.Has(i) {
			t.Errorf("%d kept by Clear", i)
		}
	}
}

// Of many goroutines adding the same members, exactly one is told each was new.
func TestAddOnce(t *testing.T) {
	s := New(256)
	var firsts atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range uint32(256) {
				if s.Add(i) {
					firsts.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if firsts.Load() != 256 {
		t.Errorf("%d adds reported new for 256 members", firsts.Load())
	}
}
