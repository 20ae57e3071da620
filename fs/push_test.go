package fs_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	cfs "github.com/cassfs/cassfs/fs"
	"github.com/cassfs/cassfs/store/memstore"
	"github.com/cassfs/cassfs/store/storetest"
	"golang.org/x/sys/unix"
)

// dropPages evicts a file's pages from the page cache (POSIX_FADV_DONTNEED), as memory
// pressure would, without touching the rest of the machine's caches.
func dropPages(t *testing.T, path string) {
	t.Helper()
	f := storetest.Must(os.Open(path))(t)
	defer f.Close()
	storetest.Check(t, unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED))
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
		for _, line := range strings.Split(strings.TrimSpace(string(storetest.Must(os.ReadFile(filepath.Join(root, "file_list.txt")))(t))), "\n") {
			name, _ := splitLine(line)
			names = append(names, filepath.Join(root, name))
		}
		return names
	}
	// Sample of a path: the inode number is firstSampleIno + its index.
	sample := func(p string) uint32 {
		var st unix.Stat_t
		storetest.Check(t, unix.Stat(p, &st))
		return uint32(st.Ino - 1<<20)
	}
	// No sample was looked up yet: the kernel knows no inode to push into.
	if fsys.Push(0, make([]byte, f.ix.Size(0))) || fsys.PushStats().Unknown != 1 {
		t.Errorf("a push before any lookup: stats %+v, want it refused as unknown", fsys.PushStats())
	}
	e0, e1 := epoch("0"), epoch("1")
	for _, p := range e0 {
		storetest.Must(os.ReadFile(p))(t) // the kernel now knows every sample's inode
	}
	reads := func() int64 { return fsys.RequestStats()["read"] }

	// The control: pages dropped, no push: reading under epoch 1's names sends READs.
	dropPages(t, e0[0])
	before := reads()
	storetest.Must(os.ReadFile(e1[slicesIndexOfSample(t, e1, sample(e0[0]), sample)]))(t)
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
		got := storetest.Must(os.ReadFile(p))(t)
		if strings.Trim(string(got), "P") != "" || int64(len(got)) != f.ix.Size(sample(p)) {
			t.Errorf("%s: read %.16q... (%d bytes), want the %d pushed bytes", p, got, len(got), f.ix.Size(sample(p)))
		}
	}
	if n := reads() - before; n != 0 {
		t.Errorf("reading %d pushed samples under epoch 1's names sent %d READs, want none", len(e1), n)
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
