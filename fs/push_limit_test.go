package fs_test

import (
	"bytes"
	"os"
	"testing"

	cfs "github.com/cassfs/cassfs/fs"
	"github.com/cassfs/cassfs/internal/testkit"
	"github.com/cassfs/cassfs/store/memstore"
)

// TestPushRoomLeavesTheRestToReads: a push the memory cgroup has no room for
// (Config.PushRoom) is not made and is counted; its file is then read through READs, with
// the store's bytes; a push with room is made.
func TestPushRoomLeavesTheRestToReads(t *testing.T) {
	f := newFixture(t, 12, []string{"a", "b", "c"}, memstore.Options{})
	var fsys *cfs.FS
	room := int64(0)
	mnt := f.mount(t, mountOpts{fsys: &fsys, config: func(c *cfs.Config) {
		c.PushRoom = func(n int64) bool {
			if room < n {
				return false
			}
			room -= n
			return true
		}
	}})
	e0, e1 := epochPaths(t, mnt, "0"), epochPaths(t, mnt, "1")
	for _, p := range e0 {
		sampleOf(t, p)
	}
	i, j := sampleOf(t, e0[0]), sampleOf(t, e0[1])
	if fsys.Push(i, bytes.Repeat([]byte{'P'}, int(f.ix.Size(i)))) {
		t.Fatal("a push with no room: made")
	}
	if s := fsys.PushStats(); s.OverLimit != 1 || s.Pushed != 0 {
		t.Errorf("after a push with no room: %+v, want OverLimit 1, nothing pushed", s)
	}
	reads := fsys.RequestStats()["read"]
	if got := testkit.Must(os.ReadFile(e1[slicesIndexOfSample(t, e1, i, func(p string) uint32 { return sampleOf(t, p) })]))(t); !bytes.Equal(got, f.blobs[f.ix.Path(i)]) {
		t.Errorf("the sample not pushed read %.16q..., want the store's bytes", got)
	}
	if fsys.RequestStats()["read"] == reads {
		t.Error("the sample not pushed was read with no READ")
	}
	room = f.ix.Size(j)
	if !fsys.Push(j, bytes.Repeat([]byte{'P'}, int(f.ix.Size(j)))) || fsys.PushStats().Pushed != 1 || room != 0 {
		t.Errorf("a push with room: %+v (room left %d), want it made and its bytes taken", fsys.PushStats(), room)
	}
}

// TestReadWholeIsResidentWhateverAPushConcluded: a sample whose push was refused in a race
// with its first lookup (taken for unknown to the kernel) and which its reader then read
// whole by READs is resident: a later epoch takes it from the page cache.
func TestReadWholeIsResidentWhateverAPushConcluded(t *testing.T) {
	f := newFixture(t, 12, []string{"a", "b", "c"}, memstore.Options{})
	var fsys *cfs.FS
	mnt := f.mount(t, mountOpts{fsys: &fsys})
	e0 := epochPaths(t, mnt, "0")
	i := sampleOf(t, e0[0])
	fsys.Unknow(i)
	testkit.Must(os.ReadFile(e0[0]))(t)
	if !fsys.Resident(i) {
		t.Error("a sample read whole after a push refused as unknown: not resident")
	}
}
