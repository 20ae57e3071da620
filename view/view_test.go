package view

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cassfs/cassfs/index"
	"github.com/cassfs/cassfs/prefetch"
	"github.com/cassfs/cassfs/splits"
	"github.com/cassfs/cassfs/store"
)

// testIndex is n samples over the given classes, sample k of class k%len(classes).
func testIndex(t testing.TB, n int, classes []string) *index.Index {
	t.Helper()
	b := index.NewBuilder(classes)
	for k := range n {
		c := k % len(classes)
		name := fmt.Sprintf("%s/img %04d.jpg", classes[c], k)
		if err := b.Add(store.Sample{ID: store.SampleID("t", name), Label: c, Name: name, Size: int64(100 + k)}); err != nil {
			t.Fatal(err)
		}
	}
	ix, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return ix
}

// recorder is a Progress that records every access.
type recorder struct {
	mu       sync.Mutex
	accesses []string // "<stream> <epoch>"
	streams  map[prefetch.Stream]bool
	starts   int // AccessN of 0: readers began, nothing consumed
}

func (r *recorder) Access(s prefetch.Stream, epoch uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.accesses = append(r.accesses, fmt.Sprintf("%s %d", s.Name(), epoch))
	if r.streams == nil {
		r.streams = map[prefetch.Stream]bool{}
	}
	r.streams[s] = true
}

func (r *recorder) AccessN(s prefetch.Stream, epoch uint64, n int) {
	if n == 0 {
		r.mu.Lock()
		r.starts++
		r.mu.Unlock()
	}
	for range n {
		r.Access(s, epoch)
	}
}

func TestModeFlag(t *testing.T) {
	var m Mode
	if m != Strict || m.String() != "strict" {
		t.Errorf("zero Mode = %v, want strict", m)
	}
	for _, s := range []string{"arrival", "strict"} {
		if err := m.Set(s); err != nil || m.String() != s {
			t.Errorf("Set(%q): %v, String() = %q", s, err, m.String())
		}
	}
	if err := m.Set("random"); err == nil || !strings.Contains(err.Error(), "strict or arrival") {
		t.Errorf("Set(random) = %v, want an error naming the choices", err)
	}
}

func TestEpochKeys(t *testing.T) {
	ix := testIndex(t, 10, []string{"a", "b"})
	all := splits.All(ix)
	for _, sh := range []splits.Shard{{}, {Rank: 1, Count: 3}} {
		set := New(Config{Index: ix, Splits: []*splits.Split{all}, Shard: sh})
		n := uint32(sh.Len(10))
		for _, tc := range []struct {
			name string
			want Key
			ok   bool
		}{
			{"epoch-0", Key{Split: "all", Shard: sh, Epoch: 0, Start: 0}, true},
			{"epoch-7", Key{Split: "all", Shard: sh, Epoch: 7, Start: 0}, true},
			{fmt.Sprintf("epoch-2@%d", n), Key{Split: "all", Shard: sh, Epoch: 2, Start: n}, true}, // at the end: an empty view
			{fmt.Sprintf("epoch-2@%d", n+1), Key{}, false},
			{"epoch-2@0", Key{Split: "all", Shard: sh, Epoch: 2, Start: 0}, true},
			{"epoch-02", Key{}, false},
			{"epoch-", Key{}, false},
			{"train", Key{}, false},
		} {
			got, ok := set.EpochKey("all", tc.name)
			if ok != tc.ok || got != tc.want {
				t.Errorf("shard %v: EpochKey(%q) = %v, %v; want %v, %v", sh, tc.name, got, ok, tc.want, tc.ok)
			}
		}
		if _, ok := set.EpochKey("nope", "epoch-0"); ok {
			t.Errorf("EpochKey of a split not shown resolved")
		}
	}
}

func TestEpochViewsAreKeptUnderOneKey(t *testing.T) {
	ix := testIndex(t, 50, []string{"a", "b", "c"})
	set := New(Config{Index: ix, Splits: []*splits.Split{splits.All(ix)}, Seed: 3, EpochViews: 2})
	k := Key{Split: "all", Epoch: 1, Start: 0}
	e := set.Epoch(k)
	if set.Epoch(k) != e {
		t.Errorf("a second Epoch(%v) made a new view", k)
	}
	if e.Key != k || e.N != 1 || !slices.Equal(e.Order, splits.Permutation(50, "all", 3, 1)) {
		t.Errorf("view %v holds epoch %d in order %v, want the documented permutation", e.Key, e.N, e.Order)
	}
	// Beyond EpochViews views, the oldest is dropped and recomputed, the same as before.
	set.Epoch(Key{Split: "all", Epoch: 2, Start: 0})
	set.Epoch(Key{Split: "all", Epoch: 3, Start: 0})
	again := set.Epoch(k)
	if again == e || !slices.Equal(again.Order, e.Order) {
		t.Errorf("an evicted view came back as the same object (%v) or with another order", again == e)
	}
	// Concurrent first uses of one key share one computation.
	var wg sync.WaitGroup
	got := make([]*Epoch, 8)
	for g := range got {
		wg.Add(1)
		go func() { defer wg.Done(); got[g] = set.Epoch(Key{Split: "all", Epoch: 9, Start: 0}) }()
	}
	wg.Wait()
	for _, e := range got {
		if e != got[0] {
			t.Fatalf("concurrent Epoch calls made different views")
		}
	}
}

// TestStrictLookup: every listed name looks up to the sample at its position, names of
// other classes, positions or samples do not resolve, and each lookup is reported to the
// prefetcher under one stream per split (and per resumed start).
func TestStrictLookup(t *testing.T) {
	ix := testIndex(t, 120, []string{"cat", "dog", "emu"})
	rec := &recorder{}
	set := New(Config{Index: ix, Splits: []*splits.Split{splits.All(ix)}, Seed: 1, Progress: rec})
	e := set.Epoch(Key{Split: "all", Epoch: 4, Start: 0})
	for label, members := range e.ByClass {
		for _, k := range members {
			name := e.EntryName(k)
			i, ok := set.Lookup(e, label, name)
			if !ok || i != e.Order[k] {
				t.Fatalf("Lookup(%q) = %d, %v; want sample %d", name, i, ok, e.Order[k])
			}
			if _, ok := set.Lookup(e, (label+1)%3, name); ok {
				t.Fatalf("%q resolved in another class's directory", name)
			}
		}
	}
	if len(rec.accesses) != 120 || rec.accesses[0] != "all 4" || len(rec.streams) != 1 {
		t.Errorf("accesses %d (first %q) over %d streams; want 120 of \"all 4\" on one stream", len(rec.accesses), rec.accesses[0], len(rec.streams))
	}
	k := e.ByClass[0][0]
	name := e.EntryName(k)
	wrongName := name[:e.width+1] + "x" + name[e.width+1:]
	for _, bad := range []string{wrongName, "9" + name, name[e.width:], "", "abc_" + ix.Name(e.Order[k])} {
		if i, ok := set.Lookup(e, 0, bad); ok {
			t.Errorf("Lookup(%q) resolved to %d", bad, i)
		}
	}
	if len(rec.accesses) != 120 {
		t.Errorf("names that do not resolve were reported to the prefetcher")
	}

	// A resumed view shows the whole view's names from its start, and is a stream of its
	// own whose first epoch is the rest of the epoch.
	r := set.Epoch(Key{Split: "all", Epoch: 4, Start: 100})
	if r.Start != 100 || len(r.Order) != 20 {
		t.Fatalf("epoch-4@100 starts at %d with %d samples, want 100 and 20", r.Start, len(r.Order))
	}
	for k := range uint32(20) {
		if r.EntryName(k) != e.EntryName(100+k) {
			t.Errorf("epoch-4@100 position %d is %q, epoch-4 has %q", 100+k, r.EntryName(k), e.EntryName(100+k))
		}
	}
	if i, ok := set.Lookup(r, ix.Label(r.Order[0]), r.EntryName(0)); !ok || i != r.Order[0] {
		t.Errorf("resumed lookup = %d, %v", i, ok)
	}
	if _, ok := set.Lookup(r, ix.Label(e.Order[0]), e.EntryName(0)); ok {
		t.Errorf("a name before the resumed view's start resolved in it")
	}
	if len(rec.streams) != 2 || rec.accesses[len(rec.accesses)-1] != "all@100 4" {
		t.Errorf("resumed view: %d streams, last access %q; want a second stream all@100", len(rec.streams), rec.accesses[len(rec.accesses)-1])
	}
	for s := range rec.streams {
		if s.Name() != "all@100" {
			continue
		}
		if got := s.Order(4); !slices.Equal(got, r.Order) {
			t.Errorf("resumed stream's epoch 4 is not the rest of the epoch")
		}
		if got := s.Order(5); !slices.Equal(got, set.Epoch(Key{Split: "all", Epoch: 5, Start: 0}).Order) {
			t.Errorf("resumed stream's epoch 5 is not the whole epoch")
		}
	}
}

// TestArrivalBinding: every name binds a sample of its label that is not bound yet,
// preferring arrived ones; asked again — with the arrived set changed — it answers the same
// sample; an epoch binds every sample exactly once.
func TestArrivalBinding(t *testing.T) {
	ix := testIndex(t, 300, []string{"a", "b", "c", "d"})
	var mu sync.Mutex
	arrived := map[uint32]bool{}
	set := New(Config{Index: ix, Splits: []*splits.Split{splits.All(ix)}, Seed: 2, Mode: Arrival,
		Arrived: func(i uint32) bool { mu.Lock(); defer mu.Unlock(); return arrived[i] }})
	e := set.Epoch(Key{Split: "all", Epoch: 0, Start: 0})
	// The last sample of each class in epoch order has arrived, nothing else.
	for _, members := range e.ByClass {
		arrived[e.Order[members[len(members)-1]]] = true
	}
	bound := map[uint32]uint32{} // position → sample
	seen := map[uint32]bool{}
	for k := range uint32(len(e.Order)) {
		label := ix.Label(e.Order[k])
		i, ok := set.Lookup(e, label, e.EntryName(k))
		if !ok {
			t.Fatalf("position %d did not resolve", k)
		}
		if ix.Label(i) != label {
			t.Fatalf("position %d of label %d bound sample %d of label %d", k, label, i, ix.Label(i))
		}
		if seen[i] {
			t.Fatalf("sample %d bound twice in one epoch", i)
		}
		if k == e.ByClass[label][0] && !arrived[i] {
			t.Errorf("the first name of label %d bound %d, not its arrived sample", label, i)
		}
		seen[i], bound[k] = true, i
		mu.Lock()
		arrived[e.Order[k]] = true // arrivals change under the bound names
		mu.Unlock()
	}
	if len(seen) != ix.Len() {
		t.Errorf("%d samples bound, want all %d", len(seen), ix.Len())
	}
	// Asked twice, below any kernel cache: every name keeps its sample; by position too.
	for k, want := range bound {
		if i, _ := set.Lookup(e, ix.Label(e.Order[k]), e.EntryName(k)); i != want {
			t.Fatalf("position %d bound %d, asked again it answers %d", k, want, i)
		}
		if i := set.BoundAhead(e, k); i != want {
			t.Fatalf("position %d bound %d, BoundAhead answers %d", k, want, i)
		}
	}
}

// TestArrivalExactlyOnceConcurrently: readers looking names up at once still bind every
// sample exactly once.
func TestArrivalExactlyOnceConcurrently(t *testing.T) {
	ix := testIndex(t, 2000, []string{"a", "b", "c"})
	set := New(Config{Index: ix, Splits: []*splits.Split{splits.All(ix)}, Mode: Arrival,
		Arrived: func(i uint32) bool { return i%3 == 0 }})
	e := set.Epoch(Key{Split: "all", Epoch: 1, Start: 0})
	got := make([]uint32, len(e.Order))
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := uint32(g); k < uint32(len(e.Order)); k += 4 {
				got[k], _ = set.Lookup(e, ix.Label(e.Order[k]), e.EntryName(k))
			}
		}()
	}
	wg.Wait()
	slices.Sort(got)
	for i, s := range got {
		if s != uint32(i) {
			t.Fatalf("bound samples are not each sample once: position %d of the sorted bindings is %d", i, s)
		}
	}
}

// TestFileList: file_list.txt lists every position's entry with its class and label in
// epoch order, its size is exact, and reads at any offset and length are pieces of it.
func TestFileList(t *testing.T) {
	ix := testIndex(t, 257, []string{"normal", "tumor"})
	set := New(Config{Index: ix, Splits: []*splits.Split{splits.All(ix)}, Seed: 9})
	for _, start := range []uint32{0, 200} {
		e := set.Epoch(Key{Split: "all", Epoch: 3, Start: start})
		var want bytes.Buffer
		for k := range uint32(len(e.Order)) {
			label := ix.Label(e.Order[k])
			fmt.Fprintf(&want, "%s/%s %d\n", set.ClassNames()[label], e.EntryName(k), label)
		}
		if e.FileListSize(false) != int64(want.Len()) {
			t.Errorf("start %d: size %d, want %d", start, e.FileListSize(false), want.Len())
		}
		if got := e.ReadFileList(0, want.Len()+100, false); !bytes.Equal(got, want.Bytes()) {
			t.Errorf("start %d: file list differs:\n%s", start, got)
		}
		for _, piece := range []int{1, 7, 100, 4096} {
			var got []byte
			for off := int64(0); ; off += int64(piece) {
				b := e.ReadFileList(off, piece, false)
				if len(b) == 0 {
					break
				}
				if len(b) > piece {
					t.Fatalf("a read of %d returned %d bytes", piece, len(b))
				}
				got = append(got, b...)
			}
			if !bytes.Equal(got, want.Bytes()) {
				t.Errorf("start %d: reads of %d bytes assemble a different file", start, piece)
			}
		}
	}
}

func TestUUIDNames(t *testing.T) {
	ix := testIndex(t, 20, []string{"a"})
	set := New(Config{Index: ix, Splits: []*splits.Split{splits.All(ix)}})
	for i := range uint32(20) {
		name := set.UUIDName(i)
		if !strings.HasSuffix(name, ".jpg") || !strings.HasPrefix(name, ix.ID(i).String()) {
			t.Errorf("UUIDName(%d) = %q", i, name)
		}
		if got, ok := set.FindUUIDName(name); !ok || got != i {
			t.Errorf("FindUUIDName(%q) = %d, %v", name, got, ok)
		}
		if _, ok := set.FindUUIDName(strings.TrimSuffix(name, ".jpg") + ".png"); ok {
			t.Errorf("a wrong extension resolved")
		}
	}
}

func TestClassDirectories(t *testing.T) {
	ix := testIndex(t, 6, []string{"b", "a", "c"}) // not in bytewise order: names get label prefixes
	set := New(Config{Index: ix, Splits: []*splits.Split{splits.All(ix)}})
	for label, name := range set.ClassNames() {
		if got, ok := set.Class(name); !ok || got != label {
			t.Errorf("Class(%q) = %d, %v; want %d", name, got, ok, label)
		}
	}
	if _, ok := set.Class("b"); ok {
		t.Errorf("a label's raw name resolved although its directory is %q", set.ClassNames()[0])
	}
	if sp, ok := set.Split("all"); !ok || sp.Name != "all" || len(set.Splits()) != 1 {
		t.Errorf("Split(all) = %v, %v", sp, ok)
	}
	if _, ok := set.Split("train"); ok {
		t.Errorf("a split not shown resolved")
	}
}

// TestShardStreams: each shard directory's views are a prefetch stream of their own, named
// uniquely (the name is the streams' metric label); the mount's own shard keeps the split's
// name.
func TestShardStreams(t *testing.T) {
	ix := testIndex(t, 40, []string{"a", "b"})
	mine := splits.Shard{Rank: 1, Count: 2}
	set := New(Config{Index: ix, Splits: []*splits.Split{splits.All(ix)}, Shard: mine})
	names := map[string]*Stream{}
	for _, k := range []Key{
		{Split: "all", Shard: mine, Epoch: 0},
		{Split: "all", Shard: splits.Shard{Rank: 0, Count: 4}, Epoch: 0},
		{Split: "all", Shard: splits.Shard{Rank: 1, Count: 4}, Epoch: 0},
		{Split: "all", Shard: splits.Shard{Rank: 1, Count: 4}, Epoch: 1, Start: 3},
	} {
		st := set.Epoch(k).stream
		if other, dup := names[st.Name()]; dup && other != st {
			t.Errorf("two streams named %q", st.Name())
		}
		names[st.Name()] = st
		if got, want := len(st.Order(k.Epoch)), k.Shard.Len(40)-int(k.Start); got != want {
			t.Errorf("stream %s: %d positions in epoch %d, want %d", st.Name(), got, k.Epoch, want)
		}
	}
	for _, want := range []string{"all", "all/shard-0-of-4", "all/shard-1-of-4", "all/shard-1-of-4@3"} {
		if names[want] == nil {
			t.Errorf("no stream %q among %v", want, slices.Collect(maps.Keys(names)))
		}
	}
}

// TestStreamsStayBounded: a job that visits ever more shards and resumed views leaves at
// most maxStreams streams in the set.
func TestStreamsStayBounded(t *testing.T) {
	ix := testIndex(t, 40, []string{"a", "b"})
	set := New(Config{Index: ix, Splits: []*splits.Split{splits.All(ix)}, EpochViews: 2})
	for w := 1; w <= 60; w++ {
		for r := range w {
			set.Epoch(Key{Split: "all", Shard: splits.Shard{Rank: r, Count: w}, Epoch: uint64(w)})
		}
	}
	set.mu.Lock()
	n := set.streams.Len()
	set.mu.Unlock()
	if n > maxStreams {
		t.Errorf("%d streams kept after 1,830 shards were visited, want at most %d", n, maxStreams)
	}
}

// TestShardViewsOfANodeStayBound: the 8 ranks of a node reading their shard directories
// at once, under arrival binding, each bind every sample of their part exactly once: the
// views of all of them are kept (they weigh one whole view together), so none is evicted
// and bound anew while its rank reads it.
func TestShardViewsOfANodeStayBound(t *testing.T) {
	ix := testIndex(t, 400, []string{"a", "b", "c"})
	set := New(Config{Index: ix, Splits: []*splits.Split{splits.All(ix)}, Mode: Arrival, Arrived: func(uint32) bool { return true }})
	const ranks = 8
	seen := map[uint32]int{}
	views := make([]*Epoch, ranks)
	for k := 0; k < 50; k++ { // the ranks' readers take turns, file by file
		for r := range ranks {
			e := set.Epoch(Key{Split: "all", Shard: splits.Shard{Rank: r, Count: ranks}, Epoch: 3})
			if views[r] != nil && views[r] != e {
				t.Fatalf("rank %d's view was evicted and made anew while it was read", r)
			}
			views[r] = e
			i, ok := set.Lookup(e, ix.Label(e.Order[k]), e.NameAt(uint32(k), false))
			if !ok {
				t.Fatalf("rank %d: position %d not found", r, k)
			}
			seen[i]++
		}
	}
	if len(seen) != 400 {
		t.Errorf("%d distinct samples bound over the 8 ranks' 400 names, want 400", len(seen))
	}
}

// TestViewWeightFollowsEvictions: many small views (a one-sample split) evicted for their
// count or their weight leave the weight of the views held, so whole views still fit.
func TestViewWeightFollowsEvictions(t *testing.T) {
	ix := testIndex(t, 1000, []string{"a", "b"})
	tiny := &splits.Split{Name: "tiny", Members: []uint32{7}}
	set := New(Config{Index: ix, Splits: []*splits.Split{splits.All(ix), tiny}, EpochViews: 2})
	for e := range uint64(70_000) {
		set.Epoch(Key{Split: "tiny", Epoch: e})
	}
	a := set.Epoch(Key{Split: "all", Epoch: 1})
	set.Epoch(Key{Split: "all", Epoch: 2})
	if set.Epoch(Key{Split: "all", Epoch: 1}) != a {
		t.Error("two whole views do not fit in --epoch-views 2 after many small views came and went")
	}
	set.mu.Lock()
	held := 0
	for _, k := range set.views.Keys() {
		sl, _ := set.views.Peek(k)
		held += sl.weight
	}
	w := set.weight
	set.mu.Unlock()
	if w != held {
		t.Errorf("weight %d, the views held weigh %d", w, held)
	}
}
