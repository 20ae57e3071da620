package fs_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cfs "github.com/cassfs/cassfs/fs"
	"github.com/cassfs/cassfs/internal/testkit"
	"github.com/cassfs/cassfs/store/memstore"
	"golang.org/x/sys/unix"
)

// With the lookahead helper, READs that look like a reclaim make the filesystem look at the
// page cache before it forgets which samples are resident (residency.go): a few files
// paged out (a proactive reclaim) are unmarked alone, a page cache dropped whole makes every
// mark go, as without the helper.
func TestResidencyCheckedBeforeForgetting(t *testing.T) {
	const n, every = 256, 32
	f := residencyFixture(t, n)
	mnt, fsys, _, stop := lookaheadMount(t, f, false, every)
	defer stop()
	e0, e1 := epochPaths(t, mnt, "0"), epochPaths(t, mnt, "1")
	for _, p := range e0 {
		testkit.Must(os.ReadFile(p))(t) // read whole: resident
	}
	// A reader in epoch 1 up to r; the helper looks names up to 64 (its distance) ahead
	// of the furthest probe the reader looked up, then waits.
	const r = 100
	for _, p := range e1[:r] {
		testkit.Must(os.ReadFile(p))(t)
	}
	settle(t, func() int64 { return fsys.LookaheadStats().Answered })
	// Paged out: five files the reader reads next (names looked up, none a probe) ...
	var gone []uint32
	for k := r; len(gone) < 5; k++ {
		if k%every != 0 {
			dropPages(t, e1[k])
			gone = append(gone, sampleOf(t, e1[k]))
		}
	}
	// ... and 32 other files, read again at once: their READs look like a reclaim. (No
	// name of epoch 1 beyond those the helper looked up is touched: a lookup there would
	// be the reader's, and move it.)
	isGone := map[uint32]bool{}
	for _, i := range gone {
		isGone[i] = true
	}
	var far []string
	for _, p := range e0 {
		if !isGone[sampleOf(t, p)] && len(far) < 32 {
			far = append(far, p)
		}
	}
	readDropped := func() {
		for _, p := range far {
			dropPages(t, p)
			testkit.Must(os.ReadFile(p))(t)
		}
	}
	gone0 := pagesGone.Load()
	readDropped()
	settle(t, func() int64 { return fsys.PushStats().Checks })
	s := fsys.PushStats()
	// Found by the check or, some of them, by the looks at files nearing the reader; the
	// machine's proactive reclaim (DAMON's pageout) may take a page of another file.
	if s.Checks != 1 || s.CheckedGone < int64(len(gone)) || s.CheckedGone > int64(len(gone))+2 || s.Reclaims != 0 {
		t.Fatalf("after five files ahead were paged out: %+v, want 1 check, %d found gone and no reclaim", s, len(gone))
	}
	// Told, so that a prefetcher that passed them over as resident looks again.
	settle(t, pagesGone.Load)
	if n := pagesGone.Load() - gone0; n != 1 {
		t.Errorf("after a check found five files gone: Config.PagesGone called %d times, want 1", n)
	}
	for _, i := range gone {
		if fsys.SkipPush(i) {
			t.Errorf("sample %d, paged out, still marked resident", i)
		}
	}
	// The files ahead of the reader not paged out stay marked: all but the two at most the
	// machine's reclaim may have taken (found gone above). (Only names the helper looked
	// up are looked at: a lookup of another would be the reader's, and move it.)
	kept, ahead := 0, 0
	for k := r; k <= r+10; k++ {
		if i := sampleOf(t, e1[k]); !isGone[i] {
			ahead++
			if fsys.SkipPush(i) {
				kept++
			}
		}
	}
	if kept < ahead-2 {
		t.Errorf("of %d files ahead of the reader and cached, %d still marked resident, want all but two at most", ahead, kept)
	}
	// The whole page cache dropped: the check finds most files short, every mark goes.
	for _, p := range e0 {
		dropPages(t, p)
	}
	readDropped()
	settle(t, func() int64 { return fsys.PushStats().Checks })
	if s := fsys.PushStats(); s.Checks != 2 || s.Reclaims != 1 {
		t.Errorf("after the whole page cache was dropped: %+v, want a second check and a reclaim", s)
	}
	settle(t, pagesGone.Load)
	if n := pagesGone.Load() - gone0; n != 2 {
		t.Errorf("after a check and a reclaim: Config.PagesGone called %d times, want 2", n)
	}
}

// settle waits until v has not changed for 200 ms (at most 10 s).
func settle(t *testing.T, v func() int64) {
	t.Helper()
	last, since := v(), time.Now()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if now := v(); now != last {
			last, since = now, time.Now()
		}
		if time.Since(since) > 200*time.Millisecond {
			return
		}
	}
	t.Fatalf("still changing after 10 s: %d", last)
}

// TestResidentFilesNearingTheReadersAreLookedAt: files read whole in one epoch and paged
// out since, a few of them (a proactive reclaim), are found by the helper as they near
// their readers in the next epoch: unmarked, the prefetcher told, and pushed again before
// the reader gets there, so that no READ reaches the daemon for them.
func TestResidentFilesNearingTheReadersAreLookedAt(t *testing.T) {
	const n, every = 256, 32
	f := residencyFixture(t, n)
	var rewind func()
	mnt, fsys, p, stop := lookaheadMount(t, f, false, every, func(c *cfs.Config) {
		c.PagesGone = func() { pagesGone.Add(1); rewind() }
	})
	rewind = p.Rewind
	defer stop()
	e0, e1 := epochPaths(t, mnt, "0"), epochPaths(t, mnt, "1")
	bySample := map[string]string{} // a sample's name → its path in epoch 0
	for _, p := range e0 {
		testkit.Must(os.ReadFile(p))(t) // read whole: resident
		_, name, _ := strings.Cut(filepath.Base(p), "_")
		bySample[name] = p
	}
	// Paged out: five files epoch 1 reads well after its start, through their names of
	// epoch 0 (a name of epoch 1 looked up here would be taken for its reader's).
	var gone []string
	for k := 160; len(gone) < 5; k++ {
		if k%every != 0 {
			_, name, _ := strings.Cut(filepath.Base(e1[k]), "_")
			dropPages(t, bySample[name])
			gone = append(gone, bySample[name])
		}
	}
	before, reads, gone0 := fsys.PushStats(), fsys.RequestStats()["read"], pagesGone.Load()
	for _, p := range e1 {
		testkit.Must(os.ReadFile(p))(t)
		time.Sleep(time.Millisecond) // a reader with work to do: the helper keeps ahead
	}
	s := fsys.PushStats()
	t.Logf("pushes %+v; %d READs", s, fsys.RequestStats()["read"]-reads)
	// A proactive reclaim of the machine's (DAMON's pageout) may page out a page of another
	// file or two meanwhile: found too if before its look, a READ if after.
	if s.NearChecked-before.NearChecked < n/2 || s.CheckedGone-before.CheckedGone < int64(len(gone)) || s.Checks != before.Checks {
		t.Errorf("epoch 1 read after five of its files were paged out: %+v (before %+v); want most files looked at as they neared, the five found gone, no other check", s, before)
	}
	if pagesGone.Load() == gone0 {
		t.Error("files found gone, and the prefetcher was not told")
	}
	if r := fsys.RequestStats()["read"] - reads; r >= int64(len(gone)) {
		t.Errorf("%d READs reached the daemon in epoch 1: the files paged out were not pushed again ahead of the reader", r)
	}
}

// TestNearingFilesLookedAtSparselyWhileNoneIsShort: once NearQuiet files in a row were
// found whole as they neared the readers, one in NearSparse is looked at (a look costs the
// helper's CPU, beside the readers'), and looks go to the helper NearSend or more at a time;
// a resident file READ, its pages gone, has every one looked at again for a while.
func TestNearingFilesLookedAtSparselyWhileNoneIsShort(t *testing.T) {
	const n, every = 1024, 32
	f := residencyFixture(t, n)
	mnt, fsys, _, stop := lookaheadMount(t, f, false, every)
	defer stop()
	readAll := func(paths []string, drop string) {
		for _, p := range paths {
			if p == drop {
				dropPages(t, p)
			}
			testkit.Must(os.ReadFile(p))(t)
			time.Sleep(200 * time.Microsecond) // a reader with work to do: the helper keeps ahead
		}
	}
	e1, e2 := epochPaths(t, mnt, "1"), epochPaths(t, mnt, "2")
	readAll(epochPaths(t, mnt, "0"), "") // read whole: resident
	before, sends := fsys.PushStats(), fsys.NearSends()
	readAll(e1, "")
	s := fsys.PushStats()
	sends = fsys.NearSends() - sends
	// The machine's proactive reclaim (DAMON's pageout) may take pages meanwhile: each file
	// found short, or READ as resident, has the next NearQuiet looked at.
	lost := s.CheckedGone - before.CheckedGone + s.ResidentReads - before.ResidentReads
	looked := s.NearChecked - before.NearChecked
	most := int64(cfs.NearQuiet + n/cfs.NearSparse + 16 + lost*cfs.NearQuiet)
	t.Logf("epoch 1: %d files looked at in %d writes to the helper, %d found short or READ", looked, sends, lost)
	// (Epoch 0's pushed files were the first NearQuiet; the names near the start and the
	// probes are not looked up ahead.)
	if looked > most || looked < n/cfs.NearSparse/2 {
		t.Errorf("epoch 1 with no page gone: %d files looked at as they neared the readers, want %d to %d (all until %d in a row were whole, then one in %d)", looked, n/cfs.NearSparse/2, most, cfs.NearQuiet, cfs.NearSparse)
	}
	// Looks go to the helper several at a time: a write costs both processes wake-ups.
	if most := looked/cfs.NearSend + 8; sends > most {
		t.Errorf("epoch 1: %d looks in %d writes to the helper, want at most %d writes", looked, sends, most)
	}
	// Epoch 2: a file of its first half paged out, and READ by its reader: the files
	// after it are looked at, every one, for a while.
	var drop string
	for k := n / 4; drop == ""; k++ {
		if k%every != 0 {
			drop = e2[k]
		}
	}
	before = fsys.PushStats()
	readAll(e2, drop)
	s = fsys.PushStats()
	t.Logf("epoch 2: %d files looked at, %d READ as resident", s.NearChecked-before.NearChecked, s.ResidentReads-before.ResidentReads)
	if s.ResidentReads == before.ResidentReads {
		t.Fatalf("the file paged out was not READ: %+v", s)
	}
	if got := s.NearChecked - before.NearChecked; got < int64(n/cfs.NearSparse+cfs.NearQuiet/2) {
		t.Errorf("epoch 2, a resident file READ at a quarter: %d files looked at, want at least %d (every one for a while after)", got, n/cfs.NearSparse+cfs.NearQuiet/2)
	}
}

// residencyFixture is a fixture of n samples in two classes for a test that looks at the
// page cache: skipped without cachestat (Linux 6.5+), and holding the machine's caches.
func residencyFixture(t *testing.T, n int) *fixture {
	t.Helper()
	var cs unix.Cachestat_t
	if err := unix.Cachestat(uint(os.Stdin.Fd()), &unix.CachestatRange{}, &cs, 0); err == unix.ENOSYS {
		t.Skip("no cachestat (Linux 6.5+)")
	}
	testkit.LockCaches(t, false) // it counts on the page cache
	return newFixture(t, n, []string{"a", "b"}, memstore.Options{})
}
