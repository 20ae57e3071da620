package fs_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	cfs "github.com/cassfs/cassfs/fs"
	"github.com/cassfs/cassfs/internal/testkit"
	"github.com/cassfs/cassfs/store/memstore"
	"github.com/google/uuid"
)

// TestDeclinedListingIsTriedAgain: a class directory whose listing was declined because a
// sample of it was not at hand (paged out since the last epoch, not fetched yet) is listed
// once it is, further on in the epoch, not looked up name by name to the epoch's end.
func TestDeclinedListingIsTriedAgain(t *testing.T) {
	const n, every = 400, 8
	f := newFixture(t, n, classes, memstore.Options{})
	var withheld atomic.Bool
	mnt, fsys, _, stop := lookaheadMount(t, f, false, every, func(c *cfs.Config) {
		has := c.Held
		c.Held = func(i uint32) bool { return has(i) && !withheld.Load() }
	})
	defer stop()
	readEpochInOrder(t, f, filepath.Join(mnt, "all", "epoch-0"))
	// No sample is at hand until the reader is a quarter through epoch 1: every listing is
	// declined at first.
	withheld.Store(true)
	req := fsys.RequestStats()
	for k, p := range epochPaths(t, mnt, "1") {
		if k == n/4 {
			withheld.Store(false)
		}
		testkit.Must(os.ReadFile(p))(t)
	}
	lookups, plus := fsys.RequestStats()["lookup"]-req["lookup"], fsys.RequestStats()["readdirplus"]-req["readdirplus"]
	// The first quarter's names are the reader's own (the helper waits for samples at hand);
	// without listings every later one costs a LOOKUP too.
	if plus == 0 || lookups > int64(n*7/8) {
		t.Errorf("epoch 1, its class directories' listings declined at first: %d LOOKUPs, %d READDIRPLUS for %d files; want them listed once every sample is at hand", lookups, plus, n)
	}
}

// TestStreamedFirstEpoch: with Stream, the class directories of a cold epoch are read a
// chunk at a time ahead of a reader walking file_list.txt, so the kernel knows the names
// before the reader opens them and the blobs are pushed as they arrive: the reader's
// lookups reach the daemon for the probes alone (and the first 2·Every names), and few
// READs. Every file's bytes stay right under strict and arrival binding.
func TestStreamedFirstEpoch(t *testing.T) {
	for _, arrival := range []bool{false, true} {
		t.Run(map[bool]string{false: "strict", true: "arrival"}[arrival], func(t *testing.T) {
			const n, every = 400, 16
			f := newFixture(t, n, classes, memstore.Options{Latency: func(uuid.UUID) time.Duration { return time.Millisecond }})
			mnt, fsys, _, stop := lookaheadMountWith(t, f, arrival, cfs.LookaheadOptions{Distance: 64, Every: every, Stream: func() bool { return true }})
			defer stop()
			readEpochInOrder(t, f, filepath.Join(mnt, "all", "epoch-0"))
			req := fsys.RequestStats()
			t.Logf("%d files: requests %v; pushes %+v", n, req, fsys.PushStats())
			// Besides: the directories', and the names within Every of the reader when the
			// first chunks came (they go out without a node).
			if req["lookup"] > n/4 {
				t.Errorf("%d LOOKUPs for %d files: want about the probes' and the first %d names' (%d)", req["lookup"], n, 2*every, 2*every+n/every)
			}
			if req["readdirplus"] == 0 || req["readdirplus"] > n/8 {
				t.Errorf("%d READDIRPLUS for %d files: want the class directories read in chunks", req["readdirplus"], n)
			}
			if req["read"] > n/4 {
				t.Errorf("%d READs for %d files: the blobs were not pushed as they arrived", req["read"], n)
			}
		})
	}
}

// The kernel asks for READDIRPLUS for every listing: by-uuid's entries, and those of a
// class directory too large to bind, go out without nodes (even under strict binding with
// the helper, where a smaller class's listing binds every name but the probes), so listing
// them makes no inode.
func TestLargeListingsMakeNoNodes(t *testing.T) {
	const n = cfs.ListedNodesMax + 1
	f := newFixtureSized(t, n, []string{"a"}, memstore.Options{}, nil, nil, func(int) int { return 1 })
	mnt, fsys, _, stop := lookaheadMount(t, f, false, 32)
	defer stop()
	for _, dir := range []string{filepath.Join(mnt, "by-uuid"), filepath.Join(mnt, "all", "epoch-0", "a")} {
		plus, looked := fsys.RequestStats()["readdirplus"], fsys.Stats().Lookups
		entries := testkit.Must(os.ReadDir(dir))(t)
		plus, looked = fsys.RequestStats()["readdirplus"]-plus, fsys.Stats().Lookups-looked
		if len(entries) != n || plus == 0 || looked != 0 {
			t.Errorf("%s: %d entries in %d READDIRPLUS, %d samples looked up; want %d entries, none looked up", dir, len(entries), plus, looked, n)
		}
	}
}

// TestStreamsLetTheMountGo: a stream left short of its directory's end (readers stopped
// halfway through the epoch) does not keep its directory open: within a second of its
// last chunk the helper holds no descriptor under the mount, so an unmount from outside
// (umount, fusermount -u) succeeds. Readers coming back go on with the streams from where
// they stood: the rest of the epoch costs as few LOOKUPs and chunks as if they had not
// stopped.
func TestStreamsLetTheMountGo(t *testing.T) {
	const n, every = 1200, 16
	f := newFixture(t, n, classes, memstore.Options{Latency: func(uuid.UUID) time.Duration { return time.Millisecond }})
	mnt, fsys, _, stop := lookaheadMountWith(t, f, true, cfs.LookaheadOptions{Distance: 64, Every: every, Stream: func() bool { return true }})
	defer stop()
	paths := epochPaths(t, mnt, "0")
	for _, p := range paths[:n/2] {
		testkit.Must(os.ReadFile(p))(t)
	}
	if plus := fsys.RequestStats()["readdirplus"]; plus == 0 {
		t.Fatalf("no READDIRPLUS in the first half of the epoch: no stream to close")
	}
	// Descriptors of this process (the helper runs in it) under the mount.
	openUnder := func() (held []string) {
		fds := testkit.Must(os.ReadDir("/proc/self/fd"))(t)
		for _, fd := range fds {
			if l, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && strings.HasPrefix(l, mnt+"/") {
				held = append(held, l)
			}
		}
		return held
	}
	deadline := time.Now().Add(time.Second)
	for len(openUnder()) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if held := openUnder(); len(held) > 0 {
		t.Errorf("a second after the readers stopped, the helper still holds %v open: an unmount from outside would fail", held)
	}
	req := fsys.RequestStats()
	for _, p := range paths[n/2:] {
		testkit.Must(os.ReadFile(p))(t)
	}
	lookups, plus := fsys.RequestStats()["lookup"]-req["lookup"], fsys.RequestStats()["readdirplus"]-req["readdirplus"]
	t.Logf("the epoch's second half: %d LOOKUPs, %d READDIRPLUS (first half %d)", lookups, plus, req["readdirplus"])
	// The probes (n/2/every) and the names within Every of the reader as the streams come
	// back; as many chunks as the first half, give or take one a class (a stream started
	// over reads the first half's chunks again).
	if plus == 0 || lookups > n/8 || plus > req["readdirplus"]+int64(len(classes)) {
		t.Errorf("the epoch's second half after the streams were closed: %d LOOKUPs, %d READDIRPLUS for %d files (the first half's %d); want the streams to go on from where they stood", lookups, plus, n/2, req["readdirplus"])
	}
}
