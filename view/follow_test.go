package view

import (
	"slices"
	"testing"

	"github.com/cassfs/cassfs/splits"
)

// followFixture is epoch 0 of a split of n samples over three classes and a Follower with
// Distance 40 and Every 8; next runs Next and returns the indices looked up and the labels
// listed.
type followFixture struct {
	e *Epoch
	f *Follower
}

func newFollowFixture(t *testing.T, n int) *followFixture {
	t.Helper()
	ix := testIndex(t, n, []string{"a", "b", "c"})
	set := New(Config{Index: ix, Splits: []*splits.Split{splits.All(ix)}, Seed: 5})
	key, ok := set.EpochKey("all", "epoch-0")
	if !ok {
		t.Fatal("no epoch-0")
	}
	return &followFixture{e: set.Epoch(key), f: NewFollower(FollowOptions{Distance: 40, Every: 8})}
}

func (x *followFixture) next(held func(uint32) bool) (looked []int, listed []int, waiting bool) {
	waiting = x.f.Next(held, func(e *Epoch, dir string, k uint32) {
		if e != x.e || dir != "all/epoch-0" {
			panic("lookup of another view")
		}
		looked = append(looked, int(k))
	}, func(e *Epoch, dir string, label int) { listed = append(listed, label) }, nil)
	return looked, listed, waiting
}

// readers looks up indices from..to-1 as the readers would (probes included).
func (x *followFixture) readers(from, to int) (covered int) {
	for k := from; k < to; k++ {
		covered += x.f.ReaderAt(x.e, "all/epoch-0", uint32(k))
	}
	return covered
}

// TestFollowerLooksAheadOfReadersInOrder: nothing before the readers looked up 2·Every
// names themselves; then every name up to Distance ahead but the probes (one position in
// Every), each once; the names read since are reported with the readers' next lookup.
func TestFollowerLooksAheadOfReadersInOrder(t *testing.T) {
	x := newFollowFixture(t, 300)
	none := func(uint32) bool { return false }
	x.readers(0, 15)
	if looked, listed, _ := x.next(nil); len(looked)+len(listed) != 0 {
		t.Fatalf("after 15 of the readers' own lookups: looked up %v, listed %v; want nothing before 16", looked, listed)
	}
	x.readers(15, 16)
	// Classes cannot be listed (nothing held for the listing's check) but names are looked
	// up: held nil means every sample is at hand.
	looked, _, _ := x.next(nil)
	var want []int
	for k := 16; k < 16+40; k++ {
		if k%8 != 0 {
			want = append(want, k)
		}
	}
	if !slices.Equal(looked, want) {
		t.Errorf("looked up %v, want %v (up to 40 ahead of 15, no probes)", looked, want)
	}
	if again, _, _ := x.next(nil); len(again) != 0 {
		t.Errorf("asked again: %v looked up twice", again)
	}
	x2 := newFollowFixture(t, 300)
	x2.readers(0, 16)
	x2.next(nil)
	if covered := x2.f.ReaderAt(x2.e, "", 24); covered != 8-1 {
		t.Errorf("readers at the probe 24 after 15: %d names reported as read, want 7 (16..23 less the probe 16)", covered)
	}
	if looked, _, waiting := x2.next(none); len(looked) != 0 || !waiting {
		t.Errorf("no sample held: looked up %v, waiting %v; want nothing, waiting", looked, waiting)
	}
}

// TestFollowerStopsForReadersThatShuffle: a reader's lookup more than Distance behind the
// furthest stops looking ahead in the view for good.
func TestFollowerStopsForReadersThatShuffle(t *testing.T) {
	x := newFollowFixture(t, 300)
	x.readers(100, 116)
	if looked, _, _ := x.next(nil); len(looked) == 0 {
		t.Fatal("readers in order: nothing looked up ahead")
	}
	ahead := 0
	x.f.Ahead(func(*Epoch, string, uint32) { ahead++ })
	if ahead == 0 {
		t.Fatal("readers in order: Ahead yields no name looked up ahead")
	}
	x.f.ReaderAt(x.e, "", 10)
	x.f.ReaderAt(x.e, "", 200)
	if looked, listed, waiting := x.next(nil); len(looked)+len(listed) != 0 || waiting {
		t.Errorf("after a lookup 105 behind the furthest: looked up %v, listed %v, waiting %v; want nothing", looked, listed, waiting)
	}
	x.f.Ahead(func(*Epoch, string, uint32) { t.Error("Ahead yields a name in a view whose readers shuffle") })
}

// TestFollowerListsClassesWhereAllHeld: a class whose samples are all held is listed once,
// and names more than Every ahead wait for its listing; a listing's entries are looked up
// by it but for probes, names within Every of the readers and names sent by themselves;
// a class declined for a sample not held is listed once it is, further on.
func TestFollowerListsClassesWhereAllHeld(t *testing.T) {
	x := newFollowFixture(t, 300)
	withheld := x.e.Order[x.e.ByClass[2][len(x.e.ByClass[2])-1]] // class c's last sample
	held := func(i uint32) bool { return i != withheld }
	x.readers(0, 16)
	looked, listed, waiting := x.next(held)
	slices.Sort(listed)
	if !slices.Equal(listed, []int{0, 1}) || !waiting {
		t.Fatalf("listed %v (waiting %v), want classes a and b listed, c declined, and names waiting for the listings", listed, waiting)
	}
	for _, k := range looked {
		if k > 15+8 {
			t.Errorf("index %d looked up by name while its class's listing is pending (readers at 15)", k)
		}
	}
	if !x.f.Listing(x.e, 0) || x.f.Listing(x.e, 2) {
		t.Errorf("listing pending: a %v, c %v; want a only", x.f.Listing(x.e, 0), x.f.Listing(x.e, 2))
	}
	far := uint32(15 + 8 + 1)
	for x.f.IsProbe(x.e, far) || slices.Contains(looked, int(far)) {
		far++
	}
	if x.f.ListEntry(x.e, 24) || x.f.ListEntry(x.e, 15) || x.f.ListEntry(x.e, 18) || !x.f.ListEntry(x.e, far) || x.f.ListEntry(x.e, far) {
		t.Errorf("ListEntry: want false for a probe (24), the readers' own name (15) and one sent by itself (18), true once for %d", far)
	}
	x.f.Listed(x.e.Key, 0)
	x.f.Listed(x.e.Key, 1)
	if x.f.Listing(x.e, 0) {
		t.Error("a listing answered: still pending")
	}
	// Class c's sample comes: its listing is tried again 20 names on (Distance/2).
	withheld = ^uint32(0)
	var listedC bool
	for k := 16; k < 300 && !listedC; k += 8 {
		x.readers(k, k+8)
		_, listed, _ := x.next(held)
		listedC = slices.Contains(listed, 2)
	}
	if !listedC {
		t.Error("class c, declined for a sample not held, never listed once it was")
	}
}

// TestFollowerNearing: each name looked up ahead is yielded once, as it comes within
// Distance of the readers, in order, and never a probe or a name not looked up ahead; names
// within Every of the head not looked up ahead when Nearing passes them are not waited for.
func TestFollowerNearing(t *testing.T) {
	x := newFollowFixture(t, 300)
	near := func() (ks []int) {
		x.f.Nearing(func(e *Epoch, dir string, k uint32) {
			if e != x.e || dir != "all/epoch-0" {
				t.Fatalf("Nearing yields index %d of another view", k)
			}
			ks = append(ks, int(k))
		})
		return ks
	}
	x.readers(0, 16)
	if ks := near(); len(ks) != 0 {
		t.Fatalf("before anything was looked up ahead: Nearing yields %v", ks)
	}
	// Held up to index 30: names 16..29 are looked up ahead (but the probes), then the
	// Follower waits for 30.
	held := func(i uint32) bool {
		for k := range 30 {
			if x.e.Order[k] == i {
				return true
			}
		}
		return false
	}
	// Names within Every of the head (15) were passed by the first call, none of them
	// looked up ahead then: too near for what Nearing is for.
	looked, _, _ := x.next(held)
	var want []int
	for _, k := range looked {
		if k > 15+8 {
			want = append(want, k)
		}
	}
	if ks := near(); !slices.Equal(ks, want) || len(ks) == 0 {
		t.Fatalf("Nearing yields %v, want the names looked up ahead beyond 23 %v", ks, want)
	}
	if ks := near(); len(ks) != 0 {
		t.Errorf("asked again: %v yielded twice", ks)
	}
	// Everything held: the rest up to Distance ahead of 15 is looked up, and yielded.
	looked, _, _ = x.next(nil)
	if ks := near(); !slices.Equal(ks, looked) || len(ks) == 0 {
		t.Errorf("after more was looked up: Nearing yields %v, want %v", ks, looked)
	}
	// The readers move on: names further on come within Distance and are yielded as they
	// are looked up, never beyond Distance of the head.
	x.readers(16, 41)
	looked, _, _ = x.next(nil)
	ks := near()
	if !slices.Equal(ks, looked) || len(ks) == 0 || ks[len(ks)-1] > 40+40 {
		t.Errorf("readers at 40: Nearing yields %v, want %v, none beyond 80", ks, looked)
	}
}

// TestFollowerStreamsClassesNotHeld: with Stream, a class not wholly held is read a chunk
// at a time as its names come within Distance, one chunk of a class asked for at a time,
// its names never looked up by themselves; a chunk's entries count as looked up ahead but
// for probes and names within Every of the readers; a chunk starts where the last ended,
// or past the readers where they got ahead of the stream; a class read to its end is not
// asked for again.
func TestFollowerStreamsClassesNotHeld(t *testing.T) {
	x := newFollowFixture(t, 300)
	x.f = NewFollower(FollowOptions{Distance: 40, Every: 8, Stream: func() bool { return true }})
	none := func(uint32) bool { return false }
	from := map[int]int{}
	next := func(held func(uint32) bool) (looked, streamed []int) {
		x.f.Next(held, func(e *Epoch, dir string, k uint32) { looked = append(looked, int(k)) },
			func(e *Epoch, dir string, label int) { t.Errorf("class %d listed whole, none held", label) },
			func(e *Epoch, dir string, label, at int) {
				if e != x.e || dir != "all/epoch-0" {
					t.Fatalf("stream of another view")
				}
				streamed = append(streamed, label)
				from[label] = at
			})
		return looked, streamed
	}
	x.readers(0, 16)
	looked, streamed := next(none)
	slices.Sort(streamed)
	if len(looked) != 0 || !slices.Equal(streamed, []int{0, 1, 2}) {
		t.Fatalf("nothing held: looked up %v, streamed %v; want each class streamed once, nothing looked up", looked, streamed)
	}
	if looked, streamed := next(nil); len(looked)+len(streamed) != 0 {
		t.Errorf("asked again, everything held now: looked up %v, streamed %v; want nothing (the streams bring them)", looked, streamed)
	}
	// Class 0's chunk brings its first members; the entries are looked up ahead but for
	// probes and names within Every of the head (15).
	members := x.e.ByClass[0]
	var got, want []int
	late := 0
	for _, k := range members[:12] {
		if x.f.ListEntry(x.e, k) {
			got = append(got, int(k))
		}
		if k%8 != 0 && k > 15+8 {
			want = append(want, int(k))
		} else if k%8 != 0 {
			late++
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("entries of class 0's chunk taken as looked up ahead: %v, want %v", got, want)
	}
	ahead := 0
	x.f.Ahead(func(*Epoch, string, uint32) { ahead++ })
	if ahead != len(want) {
		t.Errorf("Ahead yields %d names, want the chunk's %d looked up ahead", ahead, len(want))
	}
	// The first chunks start past the names within Every of the readers (at 15).
	past := func(label, k int) int {
		j, _ := slices.BinarySearch(x.e.ByClass[label], uint32(k+8+1))
		return j
	}
	for label := range 3 {
		if from[label] != past(label, 15) {
			t.Errorf("class %d's first chunk from entry %d, want %d: the first past the readers", label, from[label], past(label, 15))
		}
	}
	if got := x.f.Late(); got != int64(late) {
		t.Errorf("Late: %d, want the %d names of the chunk within Every of the readers but probes", got, late)
	}
	// Class 0's chunk ended a few entries past where readers at 39 will be.
	end := past(0, 39) + 3
	x.f.Streamed(x.e.Key, 0, end)
	x.f.Streamed(x.e.Key, 1, 0)
	// Readers move on: class 0 has names within Distance beyond its chunk, so it is read
	// further, from where its chunk ended; class 1 ended; class 2's chunk is still pending.
	x.readers(16, 40)
	if _, streamed := next(none); !slices.Equal(streamed, []int{0}) || from[0] != end {
		t.Errorf("after class 0's chunk and class 1's end: streamed %v, class 0 from %d; want [0] from %d", streamed, from[0], end)
	}
	// Readers get ahead of class 0's stream: its next chunk starts past them, and the
	// names it passes over but probes count as late.
	stood := end + 3
	x.f.Streamed(x.e.Key, 0, stood)
	x.readers(40, 200)
	before := x.f.Late()
	if _, streamed := next(none); !slices.Equal(streamed, []int{0}) || from[0] != past(0, 199) {
		t.Errorf("readers at 199, class 0's stream at entry %d: streamed %v, class 0 from %d; want [0] from %d", stood, streamed, from[0], past(0, 199))
	}
	passed := 0
	for _, k := range members[stood:past(0, 199)] {
		if k%8 != 0 {
			passed++
		}
	}
	if got := x.f.Late() - before; got != int64(passed) || passed == 0 {
		t.Errorf("Late grew by %d as class 0's stream caught up, want the %d names it passed over but probes", got, passed)
	}
}

// TestFollowerNearingWaitsForListings: a name a pending listing looked up ahead is not
// yielded until the listing is answered (the kernel may not have it yet, and a look at it
// would send a LOOKUP), then it is.
func TestFollowerNearingWaitsForListings(t *testing.T) {
	x := newFollowFixture(t, 300)
	x.readers(0, 16)
	_, listed, _ := x.next(func(uint32) bool { return true })
	if len(listed) == 0 {
		t.Fatal("everything held: no class listed")
	}
	label := listed[0]
	var entry uint32
	for _, k := range x.e.ByClass[label] {
		if int(k) > 15+8 && int(k) < 15+40 && !x.f.IsProbe(x.e, k) && x.f.ListEntry(x.e, k) {
			entry = k
			break
		}
	}
	if entry == 0 {
		t.Fatal("no entry of the listing within Distance")
	}
	near := func() (ks []uint32) {
		x.f.Nearing(func(_ *Epoch, _ string, k uint32) { ks = append(ks, k) })
		return ks
	}
	if ks := near(); slices.Contains(ks, entry) {
		t.Errorf("index %d of a listing not answered yet yielded: %v", entry, ks)
	}
	for _, l := range listed {
		x.f.Listed(x.e.Key, l)
	}
	if ks := near(); !slices.Contains(ks, entry) {
		t.Errorf("listing answered: index %d not yielded (%v)", entry, ks)
	}
}

// TestFollowerFollowsTheNextEpochAhead: a view is reported ended once, when its readers
// come within Every of its end; the next epoch followed ahead of its readers has its class
// directories wholly held listed once, and nothing looked up by name, until readers come.
func TestFollowerFollowsTheNextEpochAhead(t *testing.T) {
	x := newFollowFixture(t, 300)
	ended := func() (got []string) {
		x.f.Ended(func(e *Epoch, dir string) { got = append(got, dir) })
		return got
	}
	x.readers(0, 280)
	x.next(nil)
	if got := ended(); len(got) != 0 {
		t.Fatalf("readers at 279 of 300: ended %v", got)
	}
	x.readers(280, 292)
	if got := ended(); !slices.Equal(got, []string{"all/epoch-0"}) {
		t.Fatalf("readers at 291 of 300: ended %v, want all/epoch-0", got)
	}
	if got := ended(); len(got) != 0 {
		t.Fatalf("asked again: ended %v", got)
	}
	ne, dir, ok := x.e.set.NextEpoch(x.e, "all/epoch-0")
	if !ok || dir != "all/epoch-1" || ne.Key.Epoch != 1 || ne.Key.Split != "all" {
		t.Fatalf("NextEpoch: %v %q %v, want epoch 1 of all in all/epoch-1", ne.Key, dir, ok)
	}
	if _, _, ok := x.e.set.NextEpoch(x.e, "all/epoch-0.targets"); ok {
		t.Error("NextEpoch of a targets directory: want none")
	}
	withheld := ne.Order[ne.ByClass[2][0]] // class c's first sample
	held := func(i uint32) bool { return i != withheld }
	x.f.FollowAhead(ne, dir)
	next := func() (looked []int, listed []int) {
		x.f.Next(held, func(e *Epoch, _ string, k uint32) {
			if e == ne {
				looked = append(looked, int(k))
			}
		}, func(e *Epoch, d string, label int) {
			if e == ne && d == dir {
				listed = append(listed, label)
			}
		}, nil)
		return looked, listed
	}
	looked, listed := next()
	slices.Sort(listed)
	if len(looked) != 0 || !slices.Equal(listed, []int{0, 1}) {
		t.Fatalf("next epoch followed ahead: looked up %v, listed %v; want classes a and b listed (c not wholly held), nothing looked up", looked, listed)
	}
	// No reader in it yet: its listing binds the first names too, but the probes.
	if x.f.ListEntry(ne, 0) || !x.f.ListEntry(ne, 1) {
		t.Errorf("ListEntry of the view followed ahead: want false for the probe at 0, true for 1 (no reader near it)")
	}
	// Its probes are one name in AheadEvery·Every: the listing binds the others.
	if !x.f.IsProbe(ne, 4*8) || x.f.IsProbe(ne, 8) || !x.f.ListEntry(ne, 8) {
		t.Errorf("the view followed ahead: probes at 0, 8, 32: %v, %v, %v; want one in 32 (a listing binds 8)", x.f.IsProbe(ne, 0), x.f.IsProbe(ne, 8), x.f.IsProbe(ne, 32))
	}
	withheld = ^uint32(0)
	if looked, listed := next(); len(looked)+len(listed) != 0 {
		t.Fatalf("asked again before a reader came: looked up %v, listed %v; want nothing", looked, listed)
	}
	if got := ended(); len(got) != 0 {
		t.Errorf("a view followed ahead reported ended: %v", got)
	}
	// A reader comes: followed from its first lookup on, as it would be after 2·Every.
	x.f.ReaderAt(ne, "", 0)
	x.f.Listed(ne.Key, 0)
	x.f.Listed(ne.Key, 1)
	looked, listed = next()
	if !slices.Equal(listed, []int{2}) || len(looked) == 0 {
		t.Errorf("a reader in the next epoch: looked up %d names, listed %v; want names looked up ahead and class c listed", len(looked), listed)
	}
	// Its readers look up its probes alone, to the last: it ended there.
	for k := 32; k < len(ne.Order); k += 32 {
		x.f.ReaderAt(ne, "", uint32(k))
	}
	var ends []string
	x.f.Ended(func(e *Epoch, d string) {
		if e == ne {
			ends = append(ends, d)
		}
	})
	if !slices.Equal(ends, []string{dir}) {
		t.Errorf("readers at the last probe of the next epoch (%d of %d): ended %v, want %s", len(ne.Order)/32*32, len(ne.Order), ends, dir)
	}
}

// TestFollowerLooksUpForgottenNamesAgain: the names of an epoch bound ahead of its readers
// (its classes listed while the mount was quiet) whose inodes the kernel forgot since
// (FollowOptions.Bound false: its inode cache dropped) are looked up again as the readers
// near them, and the names it still knows are not.
func TestFollowerLooksUpForgottenNamesAgain(t *testing.T) {
	x := newFollowFixture(t, 300)
	forgotten := map[uint32]bool{}
	x.f = NewFollower(FollowOptions{Distance: 40, Every: 8, Bound: func(i uint32) bool { return !forgotten[i] }})
	x.readers(0, 300)
	x.next(nil)
	ne, dir, ok := x.e.set.NextEpoch(x.e, "all/epoch-0")
	if !ok {
		t.Fatal("no next epoch")
	}
	x.f.FollowAhead(ne, dir)
	var listed []int
	x.f.Next(func(uint32) bool { return true }, func(*Epoch, string, uint32) {}, func(e *Epoch, _ string, label int) {
		if e == ne {
			listed = append(listed, label)
		}
	}, nil)
	if len(listed) != 3 {
		t.Fatalf("listed %v ahead of the readers, want the three classes", listed)
	}
	for k := range ne.Order {
		x.f.ListEntry(ne, uint32(k))
	}
	for _, l := range listed {
		x.f.Listed(ne.Key, l)
	}
	// The kernel forgets every third name's inode; then a reader comes.
	for k := 0; k < len(ne.Order); k += 3 {
		forgotten[ne.Order[k]] = true
	}
	x.f.ReaderAt(ne, dir, 0)
	var looked []int
	x.f.Next(func(uint32) bool { return true }, func(e *Epoch, _ string, k uint32) {
		if e == ne {
			looked = append(looked, int(k))
		}
	}, func(*Epoch, string, int) {}, nil)
	var want []int
	for k := 1; k < 1+40; k++ {
		if k%3 == 0 && !x.f.IsProbe(ne, uint32(k)) {
			want = append(want, k)
		}
	}
	if !slices.Equal(looked, want) {
		t.Errorf("a reader at 0 of an epoch listed ahead, every third inode forgotten: looked up %v, want %v (the forgotten ones within 40, no probe)", looked, want)
	}
}
