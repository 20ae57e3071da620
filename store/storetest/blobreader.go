package storetest

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cassfs/cassfs/store"
	"github.com/google/uuid"
)

// Known is one sample of the known dataset the blob-read suite reads (KnownSamples).
type Known struct {
	Sample store.Sample
	Data   []byte
	Target []byte // the target's blob; nil for a sample without one
}

// KnownSamples returns the known dataset RunBlobReader reads: 40 samples of three labels,
// from 1 byte to 200,000, every fifth with a target. Their ids are the same whichever
// dataset they are stored in.
func KnownSamples() []Known {
	var out []Known
	for i := range 40 {
		size := 1 + i*997%9000
		if i == 7 {
			size = 200_000 // more than one network frame's worth in most drivers
		}
		smp, data := MakeSample("storetest", i, i%3, size)
		k := Known{Sample: smp, Data: data}
		if i%5 == 0 {
			_, mask := MakeSample("storetest", 1000+i, 0, 100+i)
			smp.Target = &store.Target{Ext: ".png", Size: int64(len(mask)), Checksum: store.Checksum(mask), CRC32C: store.CRC32C(mask)}
			k.Sample, k.Target = smp, mask
		}
		out = append(out, k)
	}
	return out
}

// PutKnown stores KnownSamples through st. A read path with no Store of its own (another
// driver's) is tested by filling its database through a backend that writes the same
// tables, and handing RunBlobReader the reader alone.
func PutKnown(t testing.TB, st store.Store) {
	t.Helper()
	for _, k := range KnownSamples() {
		if err := st.Put(context.Background(), k.Sample, k.Data, k.Target); err != nil {
			t.Fatalf("Put(%s): %v", k.Sample.Name, err)
		}
	}
}

// RunBlobReader runs the blob-read part of the conformance suite against r, a reader over
// the known dataset (KnownSamples, stored by PutKnown): a backend's Get, or a wrapper
// around one, tested by itself. It only reads; Run runs it on every Store.
func RunBlobReader(t *testing.T, r store.BlobReader) {
	tests := []struct {
		name string
		fn   func(t *testing.T, r store.BlobReader)
	}{
		{"ReadsEveryBlob", testReadsEveryBlob},
		{"MissingIsNotFound", testMissingIsNotFound},
		{"BufferIsAHint", testBufferIsAHint},
		{"ReturnedBytesAreTheCallers", testReturnedBytesAreTheCallers},
		{"ConcurrentGets", testConcurrentGets},
		{"CancelledContext", testCancelled},
	}
	if br, ok := r.(store.BlockReader); ok {
		for _, tc := range []struct {
			name string
			fn   func(t *testing.T, r store.BlockReader)
		}{
			{"BlockReadsEveryBlobOnce", testBlockReadsEveryBlobOnce},
			{"BlockBytesAreTheCallers", testBlockBytesAreTheCallers},
			{"BlockCancelledContext", testBlockCancelled},
		} {
			t.Run(tc.name, func(t *testing.T) { tc.fn(t, br) })
		}
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, r) })
	}
}

// checkBlob fails the test unless b is k's blob (target: its target's).
func checkBlob(t testing.TB, what string, b store.Blob, k Known, target bool) {
	t.Helper()
	want := k.Data
	if target {
		want = k.Target
	}
	if !bytes.Equal(b.Data, want) || b.Label != k.Sample.Label {
		t.Errorf("%s of %s: %d bytes, label %d; want the %d stored, label %d", what, k.Sample.Name, len(b.Data), b.Label, len(want), k.Sample.Label)
	}
}

// testReadsEveryBlob: every sample's blob and every target's, with the sample's label.
func testReadsEveryBlob(t *testing.T, r store.BlobReader) {
	ctx := context.Background()
	for _, k := range KnownSamples() {
		b, err := r.Get(ctx, k.Sample.ID, nil)
		if err != nil {
			t.Fatalf("Get(%s): %v", k.Sample.Name, err)
		}
		checkBlob(t, "Get", b, k, false)
		if k.Target == nil {
			continue
		}
		b, err = r.Get(ctx, store.TargetID(k.Sample.ID), nil)
		if err != nil {
			t.Fatalf("Get(TargetID) of %s: %v", k.Sample.Name, err)
		}
		checkBlob(t, "Get(TargetID)", b, k, true)
	}
}

// testMissingIsNotFound: an id nothing was stored under, and the target of a sample without
// one, wrap ErrNotFound and name the id.
func testMissingIsNotFound(t *testing.T, r store.BlobReader) {
	known := KnownSamples()
	for _, id := range []uuid.UUID{uuid.New(), store.TargetID(known[1].Sample.ID)} {
		_, err := r.Get(context.Background(), id, nil)
		if !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Get(missing %s) error = %v, want ErrNotFound", id, err)
		} else if !strings.Contains(err.Error(), id.String()) {
			t.Errorf("Get(missing %s) error %q does not name the id", id, err)
		}
	}
}

// testBufferIsAHint: whatever buffer the caller gives (roomy and dirty, exactly the blob's
// size and capped, as the prefetcher gives, too small), the blob comes back right, and
// nothing beyond the buffer's capacity is written.
func testBufferIsAHint(t *testing.T, r store.BlobReader) {
	const guard = 0xA5
	known := KnownSamples()
	for _, k := range []Known{known[0], known[1], known[7]} { // 1 byte, 998, 200,000
		n := len(k.Data)
		for _, tc := range []struct {
			name string
			cap  int
		}{
			{"roomy", n + 4096},
			{"exact", n},
			{"too small", n - 1},
			{"empty", 0},
		} {
			backing := bytes.Repeat([]byte{guard}, tc.cap+64)
			buf := backing[:tc.cap:tc.cap]
			b, err := r.Get(context.Background(), k.Sample.ID, buf)
			if err != nil {
				t.Fatalf("Get(%s) into a %s buffer: %v", k.Sample.Name, tc.name, err)
			}
			checkBlob(t, "Get into a "+tc.name+" buffer", b, k, false)
			if i := slices.IndexFunc(backing[tc.cap:], func(c byte) bool { return c != guard }); i >= 0 {
				t.Errorf("Get(%s) into a %s buffer of capacity %d wrote beyond it, at %d", k.Sample.Name, tc.name, tc.cap, tc.cap+i)
			}
		}
	}
}

// testReturnedBytesAreTheCallers: blobs read one after another stay intact (the reader does
// not reuse their memory), and what a caller does with a blob does not change the next
// read of it (the reader does not keep it).
func testReturnedBytesAreTheCallers(t *testing.T, r store.BlobReader) {
	ctx := context.Background()
	known := KnownSamples()
	got := make([]store.Blob, len(known))
	for i, k := range known {
		b, err := r.Get(ctx, k.Sample.ID, nil)
		if err != nil {
			t.Fatalf("Get(%s): %v", k.Sample.Name, err)
		}
		got[i] = b
	}
	for i, k := range known {
		checkBlob(t, "a blob kept while others were read", got[i], k, false)
	}
	k := known[7]
	for j := range got[7].Data {
		got[7].Data[j] ^= 0xff
	}
	b, err := r.Get(ctx, k.Sample.ID, nil)
	if err != nil {
		t.Fatalf("Get(%s): %v", k.Sample.Name, err)
	}
	checkBlob(t, "Get after the caller changed the bytes of an earlier one", b, k, false)
}

// testConcurrentGets: readers in parallel, each through every sample, get the right bytes
// (with -race: and no data race).
func testConcurrentGets(t *testing.T, r store.BlobReader) {
	known := KnownSamples()
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range known {
				k := known[(j+w)%len(known)]
				b, err := r.Get(context.Background(), k.Sample.ID, nil)
				if err != nil {
					t.Error(err)
					return
				}
				checkBlob(t, "concurrent Get", b, k, false)
			}
		}()
	}
	wg.Wait()
}

// testCancelled: a read with a context already cancelled fails with the context's error.
func testCancelled(t *testing.T, r store.BlobReader) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Get(ctx, KnownSamples()[0].Sample.ID, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("Get with a cancelled context: error = %v, want context.Canceled", err)
	}
}

// blockResult is what GetBlock answered for one id.
type blockResult struct {
	b     store.Blob
	err   error
	calls int
}

// getBlock runs r.GetBlock and returns its answers by index.
func getBlock(ctx context.Context, r store.BlockReader, ids []uuid.UUID) []blockResult {
	out := make([]blockResult, len(ids))
	var mu sync.Mutex
	r.GetBlock(ctx, ids, func(k int, b store.Blob, err error) {
		mu.Lock()
		defer mu.Unlock()
		out[k].b, out[k].err = b, err
		out[k].calls++
	})
	return out
}

// testBlockReadsEveryBlobOnce: a block of every sample's id, the targets' and two ids with
// no blob, in blocks of several sizes, answers each id exactly once: its blob and label,
// or ErrNotFound naming the id for the missing ones, which fail alone.
func testBlockReadsEveryBlobOnce(t *testing.T, r store.BlockReader) {
	known := KnownSamples()
	type want struct {
		k      Known
		target bool
		ok     bool
	}
	var ids []uuid.UUID
	var wants []want
	for _, k := range known {
		ids, wants = append(ids, k.Sample.ID), append(wants, want{k, false, true})
		if k.Target != nil {
			ids, wants = append(ids, store.TargetID(k.Sample.ID)), append(wants, want{k, true, true})
		}
	}
	ids, wants = append(ids, uuid.New()), append(wants, want{ok: false})
	ids, wants = append(ids, store.TargetID(known[1].Sample.ID)), append(wants, want{ok: false})
	for _, size := range []int{1, 3, 16, len(ids)} {
		for from := 0; from < len(ids); from += size {
			to := min(from+size, len(ids))
			got := getBlock(context.Background(), r, ids[from:to])
			for j, g := range got {
				w, id := wants[from+j], ids[from+j]
				if g.calls != 1 {
					t.Fatalf("blocks of %d: id %s answered %d times, want once", size, id, g.calls)
				}
				if !w.ok {
					if !errors.Is(g.err, store.ErrNotFound) || !strings.Contains(g.err.Error(), id.String()) {
						t.Errorf("blocks of %d: missing id %s: error %v, want ErrNotFound naming it", size, id, g.err)
					}
					continue
				}
				if g.err != nil {
					t.Fatalf("blocks of %d: %s: %v", size, w.k.Sample.Name, g.err)
				}
				checkBlob(t, "GetBlock", g.b, w.k, w.target)
			}
		}
	}
}

// testBlockBytesAreTheCallers: the blobs of one block are separate memory: changing one
// changes neither the others nor a later read.
func testBlockBytesAreTheCallers(t *testing.T, r store.BlockReader) {
	known := KnownSamples()[:10]
	ids := make([]uuid.UUID, len(known))
	for i, k := range known {
		ids[i] = k.Sample.ID
	}
	got := getBlock(context.Background(), r, ids)
	for i := range got[7].b.Data {
		got[7].b.Data[i] ^= 0xff
	}
	for i, k := range known {
		if i != 7 {
			checkBlob(t, "a blob of a block another of which the caller changed", got[i].b, k, false)
		}
	}
	again := getBlock(context.Background(), r, ids[7:8])
	checkBlob(t, "GetBlock after the caller changed the bytes of an earlier one", again[0].b, known[7], false)
}

// testBlockCancelled: a block with a context already cancelled fails every id with the
// context's error.
func testBlockCancelled(t *testing.T, r store.BlockReader) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	known := KnownSamples()
	for k, g := range getBlock(ctx, r, []uuid.UUID{known[0].Sample.ID, known[1].Sample.ID}) {
		if g.calls != 1 || !errors.Is(g.err, context.Canceled) {
			t.Errorf("GetBlock with a cancelled context, id %d: %d answers, error %v; want one, context.Canceled", k, g.calls, g.err)
		}
	}
}
