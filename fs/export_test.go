package fs

import (
	"fmt"
	"os"
	"time"

	"github.com/cassfs/cassfs/internal/bitset"
	"github.com/cassfs/cassfs/view"
	gofs "github.com/hanwen/go-fuse/v2/fs"
)

// ReclaimAfter is how many READs of resident files at once make every mark be forgotten.
const ReclaimAfter = reclaimAfter

// ProbeEvery is how often a record shard's sample leaves its first page to a READ.
const ProbeEvery = probeEvery

// ProcsFor is GOMAXPROCS for a base and n servers serving (procs.go).
var ProcsFor = procsFor

// ServersServing is how many servers this process serves (procs.go).
func ServersServing() int {
	procs.Lock()
	defer procs.Unlock()
	return procs.servers
}

// Unknow makes the filesystem take sample i's inode for one the kernel does not know, as a
// push refused for a race with its first lookup does (FS.Push).
func (f *FS) Unknow(i uint32) { f.known.Put(i, false) }

// NearQuiet and NearSparse: every resident file nearing the readers is looked at until
// NearQuiet in a row were found whole, then one in NearSparse (residency.go).
const NearQuiet, NearSparse, NearSend = nearQuiet, nearSparse, nearSend

// ListedNodesMax is the most entries of a class directory a listing gives nodes to.
const ListedNodesMax = listedNodesMax

// SampleLinks counts the names of samples and targets in go-fuse's tree: the links under
// class directories reachable from the root.
func (f *FS) SampleLinks() int {
	n := 0
	var walk func(in *gofs.Inode)
	walk = func(in *gofs.Inode) {
		_, class := in.Operations().(*classDir)
		for _, ch := range in.Children() {
			if class {
				n++
			} else if ch.IsDir() {
				walk(ch)
			}
		}
	}
	walk(f.root.EmbeddedInode())
	return n
}

// Pruned counts the names taken out of past epochs, and the class directories the kernel
// was told to drop (prune.go).
func (f *FS) Pruned() (names, dirs int64) { return f.past.pruned.Load(), f.past.dropped.Load() }

// NearSends counts the writes to the helper that carried looks at nearing files.
func (f *FS) NearSends() int64 {
	la := f.lastHelper.Load()
	la.mu.Lock()
	defer la.mu.Unlock()
	return la.nearSends
}

// SetPruneIdle sets how long an older epoch must go without a link to be pruned, until the
// test ends.
func SetPruneIdle(t interface{ Cleanup(func()) }, d time.Duration) {
	old := pruneIdle
	pruneIdle = d
	t.Cleanup(func() { pruneIdle = old })
}

// EpochLinks counts the names in go-fuse's tree under epoch directory epoch of split.
func (f *FS) EpochLinks(split, epoch string) int {
	n := 0
	if sp := f.root.GetChild(split); sp != nil {
		if ep := sp.GetChild(epoch); ep != nil {
			for _, class := range ep.Children() {
				n += len(class.Children())
			}
		}
	}
	return n
}

// Claims is what READs of a record shard's bytes claim of its samples (tarFile.claim):
// claim(off, end) marks and returns the samples a READ of [off, end) fills whole;
// unclaim gives them back.
func Claims(sh *view.RecordShard) (claim func(off, end int64) []uint32, unclaim func([]uint32)) {
	t := &tarFile{sh: sh, done: bitset.New(sh.Len())}
	return func(off, end int64) []uint32 {
		return t.claim(off, end, sh.Find(off), min(sh.Find(end-1), sh.Len()-1))
	}, t.unclaim
}

// TierBlob reads sample i's blob from the disk tier for the next epoch's tars, within a
// pause's budget of room bytes left (records_ahead.go), and reports the budget after.
func (f *FS) TierBlob(i uint32, room int64) (data []byte, ok bool, left int64) {
	f.recAhead.tierRoom.Store(room)
	data, ok = f.tierBlob(i, nil)
	return data, ok, f.recAhead.tierRoom.Load()
}

// WriteLocalTar writes shard k of split's record view called name (epoch-N.wds) into a file
// in dir, as the record view's own connection does between epochs (records_local.go).
func (f *FS) WriteLocalTar(dir, split, name string, k int) (*os.File, error) {
	key, ok := f.views.RecordsKeyIn(split, f.views.Shard(), name)
	if !ok {
		return nil, fmt.Errorf("no record view %s/%s", split, name)
	}
	return f.writeTar(dir, f.views.Epoch(key).Records().Shard(k))
}
