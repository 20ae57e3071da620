package fs

import (
	"sync/atomic"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// PushStats counts pushes into the kernel's page cache.
type PushStats struct {
	Pushed int64 // blobs written into the page cache of their inode
	Bytes  int64 // bytes of them
	// Unknown counts pushes the kernel did not know the inode for: never looked up,
	// forgotten, or its first lookup not answered yet (not tried, or answered ENOENT).
	Unknown int64
	Failed  int64 // refused by the kernel for another reason (memory)
	// OverLimit counts pushes not made because the daemon's memory cgroup had no room
	// for them (Config.PushRoom): their READs carry them.
	OverLimit int64
	// Resident counts pushes not made because the sample is resident: pushed or read whole
	// before, and no READ has shown its pages gone since.
	Resident int64
	// Reclaims counts the times READs found the pages of resident samples gone, and the
	// filesystem forgot which samples are resident (see FS.reading).
	Reclaims int64
	// Checks counts looks at the page cache made before forgetting (residency.go), and
	// CheckedGone the resident samples they found with pages gone, or found as they neared
	// the readers.
	Checks, CheckedGone int64
	// NearChecked counts resident files looked at as they neared the readers.
	NearChecked int64
	// ResidentReads counts the resident files READ all the same: their pages went after
	// they were pushed or read whole, before the filesystem saw it.
	ResidentReads int64
	// Records counts blobs pushed into record files (records.go); their bytes are in Bytes.
	Records int64
	// TarsDropped counts record files of past epochs whose pages the kernel was told to
	// let go (FS.dropPages).
	TarsDropped int64
}

type pushCounters struct {
	pushed, bytes, unknown, failed, resident, reclaims, overLimit atomic.Int64
	suspect, suspectSince                                         atomic.Int64 // READs of resident files since suspectSince (Unix ns)
	checks, checkedGone, nearChecked                              atomic.Int64 // residency.go
	residentReads                                                 atomic.Int64
	records, dropped                                              atomic.Int64
}

// PushStats returns the pushes so far.
func (f *FS) PushStats() PushStats {
	return PushStats{Pushed: f.push.pushed.Load(), Bytes: f.push.bytes.Load(), Unknown: f.push.unknown.Load(), Failed: f.push.failed.Load(), OverLimit: f.push.overLimit.Load(),
		Resident: f.push.resident.Load(), Reclaims: f.push.reclaims.Load(), Checks: f.push.checks.Load(), CheckedGone: f.push.checkedGone.Load(), NearChecked: f.push.nearChecked.Load(),
		ResidentReads: f.push.residentReads.Load(), Records: f.push.records.Load(), TarsDropped: f.push.dropped.Load()}
}

// Push writes sample i's bytes as the cache holds them (its blob, then its target's with
// targets) into the kernel's page cache of its inode, and of its target's, so that a reader
// reads them with no request to cassfs. It reports whether the sample's blob is there now.
// A push the kernel cannot take costs one system call and is counted; the sample is then
// served by READs as without pushing. A resident sample (pushed or read whole before, with
// no sign since that its pages are gone) is not pushed again. data is not kept. The bytes
// also go into the record files the kernel knows that hold the sample (records.go).
func (f *FS) Push(i uint32, data []byte) bool {
	rec := f.pushRecords(i, data)
	if rec && !f.known.Has(i) {
		return true // read as a record only: no sample file to push to
	}
	return f.pushFile(i, data) || rec
}

// pushFile is Push into the sample's own file.
func (f *FS) pushFile(i uint32, data []byte) bool {
	s := f.server.Load()
	if s == nil || !f.known.Has(i) {
		f.push.unknown.Add(1)
		return false
	}
	if f.resident.Has(i) {
		f.push.resident.Add(1)
		return true
	}
	n := f.ix.Size(i)
	if int64(len(data)) < n {
		f.push.failed.Add(1)
		return false
	}
	if f.cfg.PushRoom != nil && !f.cfg.PushRoom(int64(len(data))) {
		f.push.overLimit.Add(1)
		return false
	}
	if st := s.InodeNotifyStoreCache(firstSampleIno+uint64(i), 0, data[:n]); st != fuse.OK {
		if st == fuse.ENOENT {
			// Forgotten with the forget not seen yet, or a push racing the inode's first
			// lookup (known is set before the kernel has the answer): no more tries until
			// the next lookup.
			f.known.Put(i, false)
			f.push.unknown.Add(1)
			return false
		}
		f.push.failed.Add(1)
		return false
	}
	f.push.pushed.Add(1)
	f.push.bytes.Add(n)
	whole := true // the sample's pages, and its target's with targets
	if f.ix.HasTargets() {
		whole = false
		if f.knownTargets.Has(i) {
			st := s.InodeNotifyStoreCache(firstTargetIno+uint64(i), 0, data[n:])
			if st == fuse.ENOENT {
				f.knownTargets.Put(i, false)
			}
			whole = st == fuse.OK
		}
	}
	if whole {
		f.resident.Put(i, true)
	}
	return true
}

// SkipPush reports whether a push of sample i would be skipped now, its pages being in the
// kernel's page cache (resident), and counts it as Push counts such a skip. It is a bitset
// read and a counter: the cache asks it under its lock, and a warm epoch then costs no
// goroutine per sample to learn that there is nothing to push.
func (f *FS) SkipPush(i uint32) bool {
	if f.tars.n.Load() > 0 {
		// A record file's pages are not the sample file's: skipped only where every tar
		// holding it has it pushed (between epochs: records_ahead.go), and its own file
		// has too or is not being read.
		if holding, pushed := f.tars.pushedIn(i); holding && !pushed {
			return false
		} else if holding && !f.known.Has(i) {
			return true // read as a record only
		}
	}
	if f.server.Load() == nil || !f.known.Has(i) || !f.resident.Has(i) {
		return false
	}
	f.push.resident.Add(1)
	return true
}

// Resident reports whether sample i is resident: its pages (and its target's) are in the
// kernel's page cache as far as cassfs knows (pushed or read whole, no READ of it since).
// Unlike SkipPush it counts nothing; it is a bitset read, safe under any lock.
func (f *FS) Resident(i uint32) bool {
	return f.server.Load() != nil && f.known.Has(i) && f.resident.Has(i)
}

// reclaimAfter READs of resident files within reclaimWithin make the filesystem forget
// every mark (see reading).
const (
	reclaimAfter  = 32
	reclaimWithin = time.Second
)

// reading is told of every READ of sample i (or of its target). If i is resident, some of
// its pages were dropped: it is resident no more (until a READ reaching its end makes it so
// again: sampleFile.servedTo). Which other files lost pages is unknown; reclaimAfter such
// READs within reclaimWithin make every mark be forgotten, so that every file is pushed again,
// unless the lookahead helper, asked first, finds most files the readers read next still
// cached (residency.go). Not fewer: READs of resident files come now and then with no
// memory pressure, a few at a time (a proactive reclaim paging out some regions of memory:
// DAMON's pageout scheme on the machine they were logged on; also a reader's READ already
// on its way as a push filled the pages), and forgetting every mark for them costs a whole
// epoch of pushes; a real reclaim (memory pressure, drop_caches) sends one for every file
// read, thousands a second.
func (f *FS) reading(i uint32) {
	if !f.resident.Has(i) {
		return
	}
	f.resident.Put(i, false)
	f.push.residentReads.Add(1)
	if la := f.helper.Load(); la != nil {
		la.pagesLost()
	}
	now := time.Now().UnixNano()
	if now-f.push.suspectSince.Load() > int64(reclaimWithin) {
		f.push.suspectSince.Store(now)
		f.push.suspect.Store(0)
	}
	if f.push.suspect.Add(1) >= reclaimAfter {
		f.push.suspect.Store(0)
		if la := f.helper.Load(); la != nil && la.checkResidency() {
			return // the page cache is looked at first (residency.go)
		}
		f.forgetResident()
	}
}

// forgetResident forgets which samples are resident: the page cache was reclaimed.
func (f *FS) forgetResident() {
	f.resident.Clear()
	f.push.reclaims.Add(1)
	f.pagesGone()
}

// pagesGone tells Config.PagesGone that resident files lost their pages.
func (f *FS) pagesGone() {
	if f.cfg.PagesGone != nil {
		go f.cfg.PagesGone()
	}
}

// OnForget implements gofs.NodeOnForgetter: the kernel dropped the sample's inode, so its
// page cache is gone and a push would be refused until the next lookup. A forget that
// races with a new lookup of the same sample may leave the bit clear while the kernel knows
// the inode again: its pushes are then skipped, and its READs served as without pushing.
func (s *sampleFile) OnForget() {
	s.fs.resident.Put(s.i, false)
	if s.target {
		s.fs.knownTargets.Put(s.i, false)
		return
	}
	s.fs.known.Put(s.i, false)
}
