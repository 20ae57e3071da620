package fs_test

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	cfs "github.com/cassfs/cassfs/fs"
	"github.com/cassfs/cassfs/internal/testkit"
	"github.com/cassfs/cassfs/prefetch"
	"github.com/cassfs/cassfs/store/memstore"
	"github.com/cassfs/cassfs/view"
	"github.com/google/uuid"
	"golang.org/x/sys/unix"
)

// dropPages evicts a file's pages from the page cache (POSIX_FADV_DONTNEED), as memory
// pressure would, without touching the rest of the machine's caches.
func dropPages(t *testing.T, path string) {
	t.Helper()
	f := testkit.Must(os.Open(path))(t)
	defer f.Close()
	testkit.Check(t, unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED))
}

// epochPaths are the paths of epoch n's files under mount mnt, in file_list.txt order.
func epochPaths(t *testing.T, mnt, n string) (paths []string) {
	t.Helper()
	root := filepath.Join(mnt, "all", "epoch-"+n)
	for _, line := range strings.Split(strings.TrimSpace(string(testkit.Must(os.ReadFile(filepath.Join(root, "file_list.txt")))(t))), "\n") {
		name, _ := splitLine(line)
		paths = append(paths, filepath.Join(root, name))
	}
	return paths
}

// sampleOf is the sample a path shows (its inode number is firstSampleIno + its index);
// the stat makes the kernel know the inode.
func sampleOf(t *testing.T, p string) uint32 {
	t.Helper()
	var st unix.Stat_t
	testkit.Check(t, unix.Stat(p, &st))
	return uint32(st.Ino - 1<<20)
}

// Push writes a sample into the page cache of its inode, which every epoch's name of the
// sample shares: read under a name of another epoch, its pushed bytes come back with no
// READ reaching the daemon. Without a push, a read sends READs (the control); a file so
// read to its end stays in the page cache and is not pushed again. A sample whose inode the
// kernel does not know is not pushed.
func TestPushServesLaterEpochsFromThePageCache(t *testing.T) {
	f := newFixture(t, 12, []string{"a", "b", "c"}, memstore.Options{})
	var fsys *cfs.FS
	mnt := f.mount(t, mountOpts{fsys: &fsys})
	epoch := func(n string) []string { return epochPaths(t, mnt, n) }
	sample := func(p string) uint32 { return sampleOf(t, p) }
	// No sample was looked up yet: the kernel knows no inode to push into.
	if fsys.Push(0, make([]byte, f.ix.Size(0))) || fsys.PushStats().Unknown != 1 {
		t.Errorf("a push before any lookup: stats %+v, want it refused as unknown", fsys.PushStats())
	}
	e0, e1 := epoch("0"), epoch("1")
	for _, p := range e0 {
		sample(p) // the kernel now knows every sample's inode (a LOOKUP, no READ)
	}
	reads := func() int64 { return fsys.RequestStats()["read"] }

	// The control: no push, so reading under epoch 1's name sends READs.
	control := sample(e0[0])
	before := reads()
	if got := testkit.Must(os.ReadFile(e1[slicesIndexOfSample(t, e1, control, sample)]))(t); !bytes.Equal(got, f.blobs[f.ix.Path(control)]) {
		t.Fatalf("the control sample read %.16q..., want its bytes", got)
	}
	if reads() == before {
		t.Fatalf("a read of a file never pushed sent no READ: the test cannot tell a push from the page cache")
	}

	// Pushed bytes other than the store's, to tell which path served. The control sample
	// is in the page cache from its READs: its push is not sent.
	for _, p := range e0 {
		i := sample(p)
		if i != control {
			dropPages(t, p)
		}
		if !fsys.Push(i, bytes.Repeat([]byte{'P'}, int(f.ix.Size(i)))) {
			t.Fatalf("push of sample %d, looked up: refused (%+v)", i, fsys.PushStats())
		}
	}
	before = reads()
	for _, p := range e1 {
		got, want := testkit.Must(os.ReadFile(p))(t), bytes.Repeat([]byte{'P'}, int(f.ix.Size(sample(p))))
		if sample(p) == control {
			want = f.blobs[f.ix.Path(control)]
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: read %.16q... (%d bytes), want %.16q... (%d bytes)", p, got, len(got), want, len(want))
		}
	}
	if n := reads() - before; n != 0 {
		t.Errorf("reading %d samples pushed or read before under epoch 1's names sent %d READs, want none", len(e1), n)
	}
	// An mmap reader sees the pushed pages too.
	mapped := e1[0]
	if sample(mapped) == control {
		mapped = e1[1]
	}
	fl := testkit.Must(os.Open(mapped))(t)
	defer fl.Close()
	size := int(f.ix.Size(sample(mapped)))
	m := testkit.Must(unix.Mmap(int(fl.Fd()), 0, size, unix.PROT_READ, unix.MAP_PRIVATE))(t)
	if strings.Trim(string(m), "P") != "" || len(m) != size {
		t.Errorf("%s mapped: %.16q... (%d bytes), want the %d pushed bytes", mapped, m, len(m), size)
	}
	testkit.Check(t, unix.Munmap(m))
	if n := reads() - before; n != 0 {
		t.Errorf("an mmap read of a pushed sample sent %d READs, want none", n)
	}
	if s := fsys.PushStats(); s.Pushed != int64(len(e0)-1) || s.Resident != 1 || s.Failed != 0 || s.Unknown != 1 {
		t.Errorf("push stats %+v, want %d pushed, the control resident, none failed, the one before any lookup unknown", s, len(e0)-1)
	}
}

// slicesIndexOfSample is the position in names of the path showing sample i.
func slicesIndexOfSample(t *testing.T, names []string, i uint32, sample func(string) uint32) int {
	t.Helper()
	for k, p := range names {
		if sample(p) == i {
			return k
		}
	}
	t.Fatalf("sample %d is in no name of the epoch", i)
	return -1
}

// pagesGone counts the calls of Config.PagesGone of lookaheadMount's filesystems (tests
// of this package run one at a time).
var pagesGone atomic.Int64

// lookaheadMount mounts f with a prefetcher and pushing, and has names looked up ahead by
// a helper served in this process (64 ahead, one name in every left to the reader); stop
// ends the helper and checks it ended well.
func lookaheadMount(t *testing.T, f *fixture, arrival bool, every int, adjust ...func(*cfs.Config)) (mnt string, fsys *cfs.FS, p *prefetch.Prefetcher, stop func()) {
	t.Helper()
	return lookaheadMountWith(t, f, arrival, cfs.LookaheadOptions{Distance: 64, Every: every}, adjust...)
}

// lookaheadMountWith is lookaheadMount with the lookahead's options given whole.
func lookaheadMountWith(t *testing.T, f *fixture, arrival bool, opts cfs.LookaheadOptions, adjust ...func(*cfs.Config)) (mnt string, fsys *cfs.FS, p *prefetch.Prefetcher, stop func()) {
	t.Helper()
	n := f.ix.Len()
	cache := prefetch.NewCache(prefetch.StoreFetch(f.st, f.ix), prefetch.CacheOptions{MaxBytes: 1 << 30, Samples: n,
		Push: func(i uint32, data []byte) bool { return fsys.Push(i, data) }})
	p = prefetch.NewPrefetcher(cache, prefetch.Options{Size: f.ix.Size, InitialWindow: 16, Samples: n})
	t.Cleanup(p.Close)
	mnt = f.mount(t, mountOpts{cache: cache, prefetcher: p, fsys: &fsys, push: true, arrival: arrival, config: func(c *cfs.Config) {
		c.Looked, c.Held, c.LookedAhead = cache.Looked, cache.Has, func(i uint32) { cache.PushHeld(i) }
		c.PagesGone = func() { pagesGone.Add(1) }
		c.Peek = cache.Peek
		for _, a := range adjust {
			a(c)
		}
	}})
	toHelper, fromDaemon := io.Pipe()
	toDaemon, fromHelper := io.Pipe()
	helped := make(chan error, 1)
	go func() { helped <- cfs.ServeLookahead(mnt, toHelper, fromHelper, 2); fromHelper.Close() }()
	fsys.StartLookahead(fromDaemon, toDaemon, opts)
	return mnt, fsys, p, func() {
		fromDaemon.Close()
		if err := <-helped; err != nil {
			t.Errorf("helper: %v", err)
		}
	}
}

// TestLookahead: a helper looks the names of an epoch up ahead of a reader walking
// file_list.txt, so most of the reader's lookups never reach the daemon (the kernel has
// the names), and the blobs pushed as their names were looked up are what the reader
// reads: few READs. Every file's bytes are right under strict and arrival binding, and the
// prefetcher still follows the reader to the end of the epoch (the probes' reports).
func TestLookahead(t *testing.T) {
	for _, arrival := range []bool{false, true} {
		t.Run(map[bool]string{false: "strict", true: "arrival"}[arrival], func(t *testing.T) {
			const n = 400
			f := newFixture(t, n, classes, memstore.Options{Latency: func(uuid.UUID) time.Duration { return time.Millisecond }})
			mnt, fsys, p, stop := lookaheadMount(t, f, arrival, 8)

			readEpochInOrder(t, f, filepath.Join(mnt, "all", "epoch-0"))
			own, reads, ahead := fsys.Stats().Lookups-fsys.LookaheadStats().Answered, fsys.RequestStats()["read"], fsys.LookaheadStats()
			t.Logf("%d files: %d lookups by the reader, %d READs; %+v ahead; pushes %+v", n, own, reads, ahead, fsys.PushStats())
			if own > n/3 {
				t.Errorf("the reader looked up %d of %d names itself, want about one in 8", own, n)
			}
			if reads > n/3 {
				t.Errorf("%d READs for %d files: the names looked up ahead were not pushed", reads, n)
			}
			// Followed to the end, each file counted once: the helper's lookups are not the
			// reader's progress; the probes report the names read between them.
			if st := p.Stats(); len(st) != 1 || st[0].Consumed < n-8 || st[0].Consumed > n {
				t.Errorf("prefetch stream %+v: want the reader's progress followed to the end (%d), each file once", st, n)
			}
			stop()
		})
	}
}

// A sample pushed whole is not pushed again while its pages stay (a push copies the whole
// file, even over pages already there), and READs of such samples — their pages were
// reclaimed — make the filesystem push every sample again.
func TestResidentSamplesAreNotPushedAgain(t *testing.T) {
	f := newFixture(t, 12, []string{"a", "b", "c"}, memstore.Options{})
	var fsys *cfs.FS
	mnt := f.mount(t, mountOpts{fsys: &fsys})
	epoch := func(n string) []string { return epochPaths(t, mnt, n) }
	sample := func(p string) uint32 { return sampleOf(t, p) }
	reads := func() int64 { return fsys.RequestStats()["read"] }
	// pushAll pushes every sample of names as bytes of fill and reports how many the
	// kernel was sent.
	pushAll := func(names []string, fill byte) int64 {
		before := fsys.PushStats().Pushed
		for _, p := range names {
			i := sample(p)
			if !fsys.Push(i, bytes.Repeat([]byte{fill}, int(f.ix.Size(i)))) {
				t.Fatalf("push of sample %d refused (%+v)", i, fsys.PushStats())
			}
		}
		return fsys.PushStats().Pushed - before
	}
	// readAll reads names and reports how many hold fill only.
	readAll := func(names []string, fill byte) (n int) {
		for _, p := range names {
			if got := testkit.Must(os.ReadFile(p))(t); strings.Trim(string(got), string(fill)) == "" && int64(len(got)) == f.ix.Size(sample(p)) {
				n++
			}
		}
		return n
	}
	e0, e1, e2 := epoch("0"), epoch("1"), epoch("2")
	for _, p := range e0 {
		sample(p) // the kernel knows every inode
	}
	if n := pushAll(e0, 'P'); n != int64(len(e0)) {
		t.Fatalf("first pushes: %d of %d sent", n, len(e0))
	}
	if n := pushAll(e0, 'Q'); n != 0 || fsys.PushStats().Resident != int64(len(e0)) {
		t.Errorf("pushes of samples pushed whole before: %d sent (%+v), want none", n, fsys.PushStats())
	}
	// SkipPush says the same without a push, and counts it alike.
	res := fsys.PushStats().Resident
	for _, p := range e0 {
		if !fsys.SkipPush(sample(p)) {
			t.Errorf("SkipPush of sample %d, pushed whole: false", sample(p))
		}
	}
	if got := fsys.PushStats().Resident - res; got != int64(len(e0)) {
		t.Errorf("SkipPush counted %d resident, want %d", got, len(e0))
	}
	before := reads()
	if n := readAll(e1, 'P'); n != len(e1) || reads() != before {
		t.Errorf("epoch 1: %d of %d files hold the first pushes, %d READs; want all, none", n, len(e1), reads()-before)
	}

	// Strays: READs of resident samples a second and more apart unmark their files only.
	for k := 4; k < 6; k++ {
		dropPages(t, e1[k])
		testkit.Must(os.ReadFile(e1[k]))(t)
		time.Sleep(1100 * time.Millisecond)
	}
	if s := fsys.PushStats(); s.Reclaims != 0 || s.ResidentReads != 2 {
		t.Errorf("two READs of resident samples a second apart: %+v, want no reclaim noticed, 2 resident files read", s)
	}
	// Pages reclaimed: READs of resident samples come at once; the ReclaimAfter-th within a
	// second makes every sample pushed again, but the one it reads back. (A file read back
	// whole is resident again, so the same files serve again.)
	for k := range cfs.ReclaimAfter {
		p := e1[k%len(e1)]
		dropPages(t, p)
		testkit.Must(os.ReadFile(p))(t)
		if s, want := fsys.PushStats(), int64(k/(cfs.ReclaimAfter-1)); s.Reclaims != want {
			t.Errorf("after %d READs of resident samples: %+v, want %d reclaims noticed", k+1, s, want)
		}
	}
	skips := 0
	for _, p := range e0 {
		if fsys.SkipPush(sample(p)) {
			skips++
		}
	}
	if skips != 1 {
		t.Errorf("after a reclaim was noticed SkipPush is true for %d samples, want 1 (the one read back)", skips)
	}
	if n := pushAll(e0, 'Q'); n != int64(len(e0)-1) {
		t.Errorf("pushes after a reclaim was noticed: %d of %d sent, want all but the last read back", n, len(e0))
	}
	before = reads()
	if n := readAll(e2, 'Q'); n != len(e2)-1 || reads() != before {
		t.Errorf("epoch 2: %d of %d files hold the pushes after the reclaim, %d READs; want all but one, none", n, len(e2), reads()-before)
	}
}

// readEpochInOrder reads view root's files in file_list.txt order, as a DALI loader does,
// checking each holds a sample of its class's once; it returns how many it read.
func readEpochInOrder(t *testing.T, f *fixture, root string) int {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(string(testkit.Must(os.ReadFile(filepath.Join(root, "file_list.txt")))(t))), "\n")
	seen := map[string]bool{}
	for _, line := range lines {
		name, _ := splitLine(line)
		got := testkit.Must(os.ReadFile(filepath.Join(root, name)))(t)
		var src string
		for s, b := range f.blobs {
			if bytes.Equal(b, got) {
				src = s
			}
		}
		if src == "" || seen[src] || class(src) != class(name) {
			t.Fatalf("%s: read the bytes of %q (seen before: %v), want a sample of its class once", name, src, seen[src])
		}
		seen[src] = true
		time.Sleep(200 * time.Microsecond) // a reader that does something with what it read
	}
	return len(lines)
}

// Once every sample of a class directory is held, the helper lists the directory instead
// of looking its names up one by one: the kernel learns them in a few READDIRPLUS requests
// and the reader of a warm epoch sends a LOOKUP only for the probes (one name in Every).
// Every file's bytes stay right under strict and arrival binding.
func TestLookaheadListsWarmClassDirectories(t *testing.T) {
	for _, tc := range []struct {
		name             string
		arrival, ownList bool
	}{{"strict", false, false}, {"arrival", true, false}, {"arrival, listed by a reader first", true, true}, {"strict, listed by a reader first", false, true}} {
		arrival := tc.arrival
		t.Run(tc.name, func(t *testing.T) {
			const n, every = 400, 8
			f := newFixture(t, n, classes, memstore.Options{})
			mnt, fsys, p, stop := lookaheadMount(t, f, arrival, every)

			readEpochInOrder(t, f, filepath.Join(mnt, "all", "epoch-0")) // every sample held now
			listed := fsys.LookaheadStats().ReaderListed
			if tc.ownList {
				// Every sample held (or strict binding): the reader's own listing binds
				// every name but the probes, as the helper's would (readerListedLookup),
				// and the follower still sees the reader's progress.
				for _, c := range classes {
					testkit.Must(os.ReadDir(filepath.Join(mnt, "all", "epoch-1", c)))(t)
				}
			}
			listed = fsys.LookaheadStats().ReaderListed - listed
			req, answered := fsys.RequestStats(), fsys.LookaheadStats().Answered
			read := readEpochInOrder(t, f, filepath.Join(mnt, "all", "epoch-1"))
			lookups, plus := fsys.RequestStats()["lookup"]-req["lookup"], fsys.RequestStats()["readdirplus"]-req["readdirplus"]
			ahead := fsys.LookaheadStats().Answered - answered
			t.Logf("epoch 1: %d files, %d LOOKUPs, %d READDIRPLUS, %d READs, %d names looked up ahead", read, lookups, plus, fsys.RequestStats()["read"]-req["read"], ahead)
			switch {
			case tc.ownList:
				if listed != int64(read-read/every) || lookups > int64(read/every+8) {
					t.Errorf("epoch 1 listed by a reader first: %d names bound by the listing, %d LOOKUPs; want %d bound, and only the probes and directories looked up", listed, lookups, read-read/every)
				}
			// The probes, the reader's first 2·every names (before the helper starts), the
			// every names next to the reader when a listing starts (looked up one by one)
			// and the directories: without listings, a LOOKUP per name the helper looked up.
			case plus == 0 || lookups > int64(read/every+4*every+8):
				t.Errorf("a warm epoch of %d files sent %d LOOKUPs and %d READDIRPLUS: want its class directories listed, about one LOOKUP in %d files", read, lookups, plus, every)
			}
			// Each epoch's names after its last probe are never reported.
			if st := p.Stats(); len(st) != 1 || st[0].Consumed < 2*(n-every) || st[0].Consumed > 2*n {
				t.Errorf("prefetch stream %+v: want the reader's progress followed to the end of epoch 1 (%d), each file once", st, 2*n)
			}
			stop()
		})
	}
}

// Readers who finished an epoch and went quiet find the next one's names bound when they
// come: its class directories were listed meanwhile, and the epoch costs them a LOOKUP
// for the probes only, with every file's bytes right. (Readers who go
// straight on find them bound as the epoch goes: TestLookaheadListsWarmClassDirectories.)
func TestNextEpochListedWhileReadersAreQuiet(t *testing.T) {
	const n, every = 400, 8
	f := newFixture(t, n, classes, memstore.Options{})
	// Quiet for 200 ms: the readers' last files of epoch 2, after its last probe, do not
	// take that long (under -race), and epoch 3 is not listed while epoch 2 is counted.
	mnt, fsys, _, stop := lookaheadMountWith(t, f, true, cfs.LookaheadOptions{Distance: 64, Every: every, NextEpoch: 200 * time.Millisecond})
	defer stop()
	readEpochInOrder(t, f, filepath.Join(mnt, "all", "epoch-0")) // every sample held now
	readEpochInOrder(t, f, filepath.Join(mnt, "all", "epoch-1"))
	// Listed once the readers were quiet: every class, a READDIRPLUS each at least.
	req := fsys.RequestStats()
	deadline := time.Now().Add(5 * time.Second)
	for fsys.RequestStats()["readdirplus"]-req["readdirplus"] < int64(len(classes)) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // its answers handled
	req = fsys.RequestStats()
	read := readEpochInOrder(t, f, filepath.Join(mnt, "all", "epoch-2"))
	lookups, plus := fsys.RequestStats()["lookup"]-req["lookup"], fsys.RequestStats()["readdirplus"]-req["readdirplus"]
	t.Logf("epoch 2: %d files, %d LOOKUPs, %d READDIRPLUS", read, lookups, plus)
	// Its probes are one name in view.AheadEvery·every.
	if plus != 0 || lookups > int64((read+view.AheadEvery*every-1)/(view.AheadEvery*every)+3) {
		t.Errorf("epoch 2 after quiet readers: %d LOOKUPs, %d READDIRPLUS for %d files; want its names bound before, a LOOKUP only for the probes (one in %d) and file_list.txt", lookups, plus, read, view.AheadEvery*every)
	}
}

// A class directory too large for one 128 KiB READDIRPLUS is still listed in one: the
// kernel sends READDIRPLUS only for a listing's first request and for one that follows a
// lookup in the directory, plain READDIR otherwise, whose names the helper would look up
// one by one (fs/mount.go, MaxWrite).
func TestLookaheadListsLargeClassDirectories(t *testing.T) {
	const n, every = 1000, 32 // ~180 KiB of entries in one directory
	f := newFixture(t, n, []string{"a"}, memstore.Options{})
	mnt, fsys, _, stop := lookaheadMount(t, f, false, every)
	defer stop()
	readEpochInOrder(t, f, filepath.Join(mnt, "all", "epoch-0"))
	req := fsys.RequestStats()
	read := readEpochInOrder(t, f, filepath.Join(mnt, "all", "epoch-1"))
	lookups, plus, plain := fsys.RequestStats()["lookup"]-req["lookup"], fsys.RequestStats()["readdirplus"]-req["readdirplus"], fsys.RequestStats()["readdir"]-req["readdir"]
	t.Logf("epoch 1: %d files, %d LOOKUPs, %d READDIRPLUS, %d READDIR", read, lookups, plus, plain)
	// One READDIRPLUS with every entry, and one more (either kind) finding the end.
	if plus == 0 || plus+plain > 2 || lookups > int64(read/every+4*every+8) {
		t.Errorf("a warm epoch of %d files in one directory sent %d LOOKUPs, %d READDIRPLUS and %d READDIR: want it listed in one READDIRPLUS, about one LOOKUP in %d files", read, lookups, plus, plain, every)
	}
}

// Without the helper a reader's listing binds nothing, under either binding, though the
// kernel asks for READDIRPLUS: the prefetcher follows the readers by their own lookups
// (and under arrival binding names are bound at their lookup, to what has arrived by
// then). With the helper, see TestLookaheadListsWarmClassDirectories.
func TestListingBindsNothingWithoutTheHelper(t *testing.T) {
	for _, arrival := range []bool{false, true} {
		t.Run(map[bool]string{false: "strict", true: "arrival"}[arrival], func(t *testing.T) {
			f := newFixture(t, 40, classes, memstore.Options{})
			var fsys *cfs.FS
			mnt := f.mount(t, mountOpts{fsys: &fsys, arrival: arrival})
			dir := filepath.Join(mnt, "all", "epoch-0", classes[0])
			entries := testkit.Must(os.ReadDir(dir))(t)
			looked := fsys.Stats().Lookups
			if fsys.RequestStats()["readdirplus"] == 0 {
				t.Fatalf("the listing sent no READDIRPLUS: the test cannot tell")
			}
			if looked != 0 {
				t.Errorf("listing %d names looked %d up, want none", len(entries), looked)
			}
			for _, e := range entries { // and every name still reads its class's bytes
				got := testkit.Must(os.ReadFile(filepath.Join(dir, e.Name())))(t)
				var ok bool
				for s, b := range f.blobs {
					ok = ok || class(s) == classes[0] && bytes.Equal(b, got)
				}
				if !ok {
					t.Errorf("%s: not a sample of %s", e.Name(), classes[0])
				}
			}
		})
	}
}

// A READ further into a resident file (its first pages stayed, later ones were dropped) is
// no reclaim of others: that file is read back whole and stays resident, the others too.
func TestPartlyDroppedFileIsNoReclaim(t *testing.T) {
	f := newFixtureSized(t, 12, []string{"a", "b", "c"}, memstore.Options{}, nil, nil, func(int) int { return 1500 }) // ~25 KB, 7 pages
	var fsys *cfs.FS
	mnt := f.mount(t, mountOpts{fsys: &fsys})
	epoch := func(n string) []string { return epochPaths(t, mnt, n) }
	sample := func(p string) uint32 { return sampleOf(t, p) }
	pushAll := func(names []string, fill byte) (sent int64) {
		before := fsys.PushStats().Pushed
		for _, p := range names {
			i := sample(p)
			fsys.Push(i, bytes.Repeat([]byte{fill}, int(f.ix.Size(i))))
		}
		return fsys.PushStats().Pushed - before
	}
	e0, e1, e2 := epoch("0"), epoch("1"), epoch("2")
	for _, p := range e0 {
		sample(p)
	}
	pushAll(e0, 'P')
	// The tail of one file dropped: reading it sends a READ from the middle.
	fl := testkit.Must(os.Open(e1[0]))(t)
	testkit.Check(t, unix.Fadvise(int(fl.Fd()), 8192, 0, unix.FADV_DONTNEED))
	fl.Close()
	reads := fsys.RequestStats()["read"]
	testkit.Must(os.ReadFile(e1[0]))(t)
	if fsys.RequestStats()["read"] == reads {
		t.Fatalf("reading a file whose tail was dropped sent no READ: the test cannot tell")
	}
	if s := fsys.PushStats(); s.Reclaims != 0 {
		t.Errorf("a READ from the middle of a file: %+v, want no reclaim noticed", s)
	}
	if n := pushAll(e0, 'Q'); n != 0 {
		t.Errorf("after one file's tail was dropped and read back, %d files pushed again, want none", n)
	}
	for _, p := range e2 {
		i := sample(p)
		want := bytes.Repeat([]byte{'P'}, int(f.ix.Size(i)))
		if i == sample(e1[0]) { // its first pages pushed, the rest read back from the store
			want = append(want[:8192], f.blobs[f.ix.Path(i)][8192:]...)
		}
		if got := testkit.Must(os.ReadFile(p))(t); !bytes.Equal(got, want) {
			t.Errorf("%s: %.16q... (%d bytes), want %.16q... (%d bytes)", p, got, len(got), want, len(want))
		}
	}
}

// A listing binds names whose inodes the kernel forgot (every kernel cache dropped between
// epochs): their held blobs cannot be pushed while the listing is under way, and are pushed
// once the helper answers, so that the reader of the epoch sends no READ for the names the
// listing bound, those whose blobs the prefetcher had taken up before it among them.
func TestListingPushesWhatTheKernelForgot(t *testing.T) {
	const n, every = 400, 8
	testkit.LockCaches(t, true) // it drops the machine's dentries and inodes
	f := newFixture(t, n, classes, memstore.Options{})
	mnt, fsys, _, stop := lookaheadMount(t, f, false, every)
	defer stop()
	readEpochInOrder(t, f, filepath.Join(mnt, "all", "epoch-0")) // every sample held now
	// The kernel forgets the mount's dentries and inodes (FORGET): nothing can be pushed
	// until a name is looked up or listed again.
	testkit.Check(t, os.WriteFile("/proc/sys/vm/drop_caches", []byte("2"), 0))
	settle(t, func() int64 { return fsys.RequestStats()["forget"] }) // FORGETs come after
	root := filepath.Join(mnt, "all", "epoch-1")
	names := epochNames(t, root)
	// The reader's first names start the helper, which lists the class directories (all
	// but the 2·every names next to the reader) while the prefetcher takes the blobs of
	// the next names up again.
	start := 2*every + 1
	for _, name := range names[:start] {
		testkit.Must(os.ReadFile(filepath.Join(root, name)))(t)
	}
	settle(t, func() int64 { return fsys.LookaheadStats().Answered + fsys.PushStats().Pushed })
	// The machine's proactive reclaim (DAMON's pageout) may take the pages of a file pushed
	// here before its reader comes: READ as a resident file, or found by a look as it
	// nears the reader and pushed again, in time or not. Those READs are not this test's.
	settled := fsys.PushStats()
	var readAt []int // positions, not probes, of files READ that were not pushed
	for k := start; k < len(names); k++ {
		before, lost := fsys.RequestStats()["read"], fsys.PushStats().ResidentReads
		testkit.Must(os.ReadFile(filepath.Join(root, names[k])))(t)
		if fsys.RequestStats()["read"] > before && fsys.PushStats().ResidentReads == lost && k%every != 0 && k > start+2*every {
			readAt = append(readAt, k)
		}
	}
	// Without the pushes once listed: the ~45 names the prefetcher had taken up. A stray
	// READ or two comes now and then and is answered all the same.
	s := fsys.PushStats()
	found := s.CheckedGone - settled.CheckedGone
	if plus := fsys.RequestStats()["readdirplus"]; plus == 0 || int64(len(readAt)) > 2+found {
		t.Errorf("epoch 1 after the kernel forgot every inode: %d READDIRPLUS; READs at positions %v (%d files found paged out as they neared the reader); want the class directories listed and no READ but the probes' and those (2 more at most)", plus, readAt, found)
	}
	t.Logf("pushes %+v", s)
}

// epochNames returns the names of view root's file_list.txt, in order.
func epochNames(t *testing.T, root string) []string {
	t.Helper()
	var names []string
	for _, line := range strings.Split(strings.TrimSpace(string(testkit.Must(os.ReadFile(filepath.Join(root, "file_list.txt")))(t))), "\n") {
		name, _ := splitLine(line)
		names = append(names, name)
	}
	return names
}
