package prefetch

import (
	"bytes"
	"context"
	"runtime"
	"sync"
	"testing"
	"weak"
)

// frameFetcher answers a block as the store does: every blob a slice of one buffer (the
// response frame). It keeps only weak pointers to the buffers, so a test can tell whether
// anything still holds one.
type frameFetcher struct {
	size   int
	mu     sync.Mutex
	frames []weak.Pointer[byte]
}

func (f *frameFetcher) Fetch(ctx context.Context, i uint32) ([]byte, error) {
	return blobOf(i, f.size), nil
}

func (f *frameFetcher) FetchBlock(ctx context.Context, samples []uint32, got func(k int, data []byte, err error)) {
	frame := make([]byte, len(samples)*f.size)
	for k, i := range samples {
		copy(frame[k*f.size:], blobOf(i, f.size))
	}
	f.mu.Lock()
	f.frames = append(f.frames, weak.Make(&frame[0]))
	f.mu.Unlock()
	for k := range samples {
		got(k, frame[k*f.size:(k+1)*f.size:(k+1)*f.size], nil)
	}
}

// alive reports whether block n's buffer is still alive after a collection.
func (f *frameFetcher) alive(n int) bool {
	runtime.GC()
	runtime.GC()
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.frames[n].Value() != nil
}

// TestBlockBlobsKeptInTheirBuffer: a block's blobs are cached as the fetcher handed them
// over, slices of one buffer, not copied; a blob of them dropped stays counted while the
// others hold the buffer; once one is evicted, the others are copied out and the buffer
// goes, so that the cache's count is what it holds.
func TestBlockBlobsKeptInTheirBuffer(t *testing.T) {
	const size = 100
	f := &frameFetcher{size: size}
	c := NewCache(f, CacheOptions{MaxBytes: 8 * size, Samples: 100, Block: BlockOptions{Samples: 4}})
	defer c.Close()
	prefetch := func(from, to uint32) {
		t.Helper()
		for i := from; i < to; i++ {
			if !c.Prefetch(i, PrefetchOptions{Size: size, MaxInFlight: 100}) {
				t.Fatalf("Prefetch(%d) refused", i)
			}
		}
		c.flush()
		waitFor(t, "the block cached", func() bool { return c.Stats().Prefetches == 0 })
	}
	check := func(when string, bytesWant int64, copied int64) {
		t.Helper()
		if err := c.checkInvariants(); err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		if s := c.Stats(); s.Bytes != bytesWant || s.Copied != copied {
			t.Fatalf("%s: %d bytes counted, %d blobs copied; want %d and %d", when, s.Bytes, s.Copied, bytesWant, copied)
		}
	}
	prefetch(0, 4)
	check("a block of 4 cached", 4*size, 0)
	c.Drop(0) // its reader reads it elsewhere: the buffer still holds its bytes
	check("one of them dropped", 4*size, 0)
	if _, err := c.Get(context.Background(), 1); err != nil { // read: first in line for eviction
		t.Fatal(err)
	}
	prefetch(4, 8)
	check("a second block", 7*size+size, 0)
	if !f.alive(0) {
		t.Fatal("the first block's buffer is gone while its blobs are cached")
	}
	// A demand read of 8 needs room: 1, read, goes; 2 and 3 are copied out of the buffer.
	if _, err := c.Get(context.Background(), 8); err != nil {
		t.Fatal(err)
	}
	check("sample 1 evicted", 2*size+4*size+size, 2)
	for _, i := range []uint32{2, 3} {
		if d, ok := c.Peek(i); !ok || !bytes.Equal(d, blobOf(i, size)) {
			t.Errorf("sample %d after its block's buffer went: cached %v, intact %v", i, ok, bytes.Equal(d, blobOf(i, size)))
		}
	}
	if f.alive(0) {
		t.Error("the first block's buffer is still held after its blobs were copied out")
	}
	if !f.alive(1) {
		t.Error("the second block's buffer is gone while its blobs are cached")
	}
}
