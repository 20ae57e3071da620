package fs_test

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cfs "github.com/cassfs/cassfs/fs"
	"github.com/cassfs/cassfs/internal/testkit"
	"github.com/cassfs/cassfs/prefetch"
	"github.com/cassfs/cassfs/store/memstore"
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

// Push writes a sample into the page cache of its inode, which every epoch's name of the
// sample shares: read under a name of another epoch, its pushed bytes come back with no
// READ reaching the daemon. Without a push, the same read after the pages were dropped
// sends READs (the control). A sample whose inode the kernel does not know is not pushed.
func TestPushServesLaterEpochsFromThePageCache(t *testing.T) {
	f := newFixture(t, 12, []string{"a", "b", "c"}, memstore.Options{})
	var fsys *cfs.FS
	mnt := f.mount(t, mountOpts{fsys: &fsys})
	epoch := func(n string) (names []string) {
		root := filepath.Join(mnt, "all", "epoch-"+n)
		for _, line := range strings.Split(strings.TrimSpace(string(testkit.Must(os.ReadFile(filepath.Join(root, "file_list.txt")))(t))), "\n") {
			name, _ := splitLine(line)
			names = append(names, filepath.Join(root, name))
		}
		return names
	}
	// Sample of a path: the inode number is firstSampleIno + its index.
	sample := func(p string) uint32 {
		var st unix.Stat_t
		testkit.Check(t, unix.Stat(p, &st))
		return uint32(st.Ino - 1<<20)
	}
	// No sample was looked up yet: the kernel knows no inode to push into.
	if fsys.Push(0, make([]byte, f.ix.Size(0))) || fsys.PushStats().Unknown != 1 {
		t.Errorf("a push before any lookup: stats %+v, want it refused as unknown", fsys.PushStats())
	}
	e0, e1 := epoch("0"), epoch("1")
	for _, p := range e0 {
		testkit.Must(os.ReadFile(p))(t) // the kernel now knows every sample's inode
	}
	reads := func() int64 { return fsys.RequestStats()["read"] }

	// The control: pages dropped, no push: reading under epoch 1's names sends READs.
	dropPages(t, e0[0])
	before := reads()
	testkit.Must(os.ReadFile(e1[slicesIndexOfSample(t, e1, sample(e0[0]), sample)]))(t)
	if reads() == before {
		t.Fatalf("a read after its pages were dropped sent no READ: the test cannot tell a push from the page cache")
	}

	// Pushed bytes other than the store's, to tell which path served.
	for _, p := range e0 {
		dropPages(t, p)
		i := sample(p)
		size := int(f.ix.Size(i))
		if !fsys.Push(i, bytes.Repeat([]byte{'P'}, size)) {
			t.Fatalf("push of sample %d, looked up and read: refused (%+v)", i, fsys.PushStats())
		}
	}
	before = reads()
	for _, p := range e1 {
		got := testkit.Must(os.ReadFile(p))(t)
		if strings.Trim(string(got), "P") != "" || int64(len(got)) != f.ix.Size(sample(p)) {
			t.Errorf("%s: read %.16q... (%d bytes), want the %d pushed bytes", p, got, len(got), f.ix.Size(sample(p)))
		}
	}
	if n := reads() - before; n != 0 {
		t.Errorf("reading %d pushed samples under epoch 1's names sent %d READs, want none", len(e1), n)
	}
	// An mmap reader sees the pushed pages too.
	fl := testkit.Must(os.Open(e1[0]))(t)
	defer fl.Close()
	size := int(f.ix.Size(sample(e1[0])))
	m := testkit.Must(unix.Mmap(int(fl.Fd()), 0, size, unix.PROT_READ, unix.MAP_PRIVATE))(t)
	if strings.Trim(string(m), "P") != "" || len(m) != size {
		t.Errorf("%s mapped: %.16q... (%d bytes), want the %d pushed bytes", e1[0], m, len(m), size)
	}
	testkit.Check(t, unix.Munmap(m))
	if n := reads() - before; n != 0 {
		t.Errorf("an mmap read of a pushed sample sent %d READs, want none", n)
	}
	if s := fsys.PushStats(); s.Pushed != int64(len(e0)) || s.Failed != 0 || s.Unknown != 1 {
		t.Errorf("push stats %+v, want %d pushed, none failed, the one before any lookup unknown", s, len(e0))
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
			var fsys *cfs.FS
			cache := prefetch.NewCache(prefetch.StoreFetch(f.st, f.ix), prefetch.CacheOptions{MaxBytes: 1 << 30, Samples: n,
				Push: func(i uint32, data []byte) bool { return fsys.Push(i, data) }})
			p := prefetch.NewPrefetcher(cache, prefetch.Options{Size: f.ix.Size, InitialWindow: 16, Samples: n})
			defer p.Close()
			mnt := f.mount(t, mountOpts{cache: cache, prefetcher: p, fsys: &fsys, push: true, arrival: arrival, config: func(c *cfs.Config) {
				c.Looked, c.Held, c.LookedAhead = cache.Looked, cache.Has, func(i uint32) { cache.PushHeld(i) }
			}})
			toHelper, fromDaemon := io.Pipe()
			toDaemon, fromHelper := io.Pipe()
			helped := make(chan error, 1)
			go func() { helped <- cfs.ServeLookahead(mnt, toHelper, fromHelper, 2); fromHelper.Close() }()
			fsys.StartLookahead(fromDaemon, toDaemon, cfs.LookaheadOptions{Distance: 64, Every: 8})

			root := filepath.Join(mnt, "all", "epoch-0")
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
			fromDaemon.Close()
			if err := <-helped; err != nil {
				t.Errorf("helper: %v", err)
			}
		})
	}
}
