package fs

import (
	"os"
	"strconv"
	"time"

	"github.com/cassfs/cassfs/view"

	"golang.org/x/sys/unix"
)

// check is a file asked about: its sample and its name.
type check struct {
	i  uint32
	pk pendingKey
}

// checkResidency starts a check of the resident files ahead of the readers (see above); it
// reports false when none can be made (no names ahead looked up, or none of them marked),
// and the caller should forget every mark.
func (la *lookahead) checkResidency() bool {
	la.mu.Lock()
	defer la.mu.Unlock()
	if len(la.checks) > 0 {
		if time.Since(la.checkAt) < reclaimWithin {
			return true // one at a time
		}
		for _, c := range la.checks { // not answered: taken for a reclaim
			delete(la.pending, c.pk)
		}
		clear(la.checks)
		return false
	}
	var lines []string
	la.follow.Ahead(func(e *view.Epoch, dir string, k uint32) {
		i := e.Order[k]
		pk := pendingKey{e.Key, k}
		if _, ok := la.pending[pk]; ok || !la.f.resident.Has(i) {
			return
		}
		// Pending, and pushed: should the kernel have dropped the name, the lookup the
		// open sends is the helper's, not a reader's (classDir.Lookup), and pushes
		// nothing.
		la.pending[pk] = true
		la.seq++
		la.checks[la.seq] = check{i, pk}
		lines = append(lines, "C"+strconv.FormatUint(la.seq, 10)+" "+la.namePath(e, dir, k)+"\n")
	})
	if len(lines) == 0 {
		return false
	}
	la.checkGone, la.checkOf, la.checkAt = 0, len(lines), time.Now()
	la.queued = append(la.queued, lines...)
	select {
	case la.wake <- struct{}{}:
	default:
	}
	return true
}

// checkNearing returns the lines that ask the helper about the resident files nearing the
// readers (see "Files nearing the readers" in fs.go), each once.
func (la *lookahead) checkNearing() []string {
	if la.noCachestat.Load() {
		return nil
	}
	type name struct {
		e   *view.Epoch
		dir string
		k   uint32
	}
	var near []name
	la.mu.Lock()
	la.follow.Nearing(func(e *view.Epoch, dir string, k uint32) { near = append(near, name{e, dir, k}) })
	la.mu.Unlock()
	var lines []string
	for _, n := range near {
		// Looked up ahead already, so bound already: this binds nothing new. By position:
		// every name near the readers passes here, one in nearSparse is looked at.
		i := la.f.views.BoundAhead(n.e, n.k)
		if !la.f.Resident(i) {
			continue
		}
		pk := pendingKey{n.e.Key, n.k}
		la.mu.Lock()
		la.nearSeen++
		sampled := la.nearSeen-la.nearLost <= nearQuiet || la.nearSeen%nearSparse == 0
		if _, ok := la.pending[pk]; !ok && sampled {
			// Pending, as in checkResidency: should the kernel have dropped the name, the
			// helper's lookup is not taken for a reader's.
			la.pending[pk] = true
			la.seq++
			la.nearing[la.seq] = check{i, pk}
			lines = append(lines, "C"+strconv.FormatUint(la.seq, 10)+" "+la.namePath(n.e, n.dir, n.k)+"\n")
		}
		la.mu.Unlock()
	}
	return lines
}

// sendNearing appends the looks at nearing files to lines once nearSend of them are
// waiting, or with lines to send anyway: each write to the helper costs both processes a
// few wake-ups, which a look at a time paid for every probe of a warm epoch (one look per
// 16 files at one in nearSparse). The looks held back are of names at most nearSend·nearSparse
// further on, and Distance ahead of the readers is several times that.
func (la *lookahead) sendNearing(lines, nearing []string) []string {
	la.nearHeld = append(la.nearHeld, nearing...)
	if len(la.nearHeld) < nearSend && len(lines) == 0 {
		return lines
	}
	if len(la.nearHeld) > 0 {
		la.nearSends++
	}
	lines = append(lines, la.nearHeld...)
	la.nearHeld = la.nearHeld[:0]
	return lines
}

// nearSend is how many looks at nearing files are sent together at least.
const nearSend = 8

// nearBatch is how many looks at files nearing the readers are counted together: more
// than half of them short is a page cache dropped as a whole.
const nearBatch = 32

// Every resident file nearing the readers is looked at until nearQuiet of them in a row
// were not found short, then one in nearSparse until pages are found gone again (a look
// finds a file short, or a resident file is READ). A look costs the helper 11–15 µs, and
// the two cores the readers share: on a machine whose proactive reclaim pages out a file
// in a thousand or so, looking at every file read later epochs at 0.75–0.96× local disk
// and not looking at all 0.96–1.11×, the files paged out coming by READs instead
// (bench/history/journal.md, "files nearing the readers, looked at sparsely").
const (
	nearQuiet  = 256
	nearSparse = 16
)

// pagesLost has every resident file nearing the readers looked at again for a while
// (nearQuiet): a resident file was READ, its pages gone.
func (la *lookahead) pagesLost() {
	la.mu.Lock()
	la.nearLost = la.nearSeen
	la.mu.Unlock()
}

// checkedNearing handles the answer to a look at a resident file nearing the readers (if
// seq is one: ok): one found short is unmarked, and the prefetcher told to look again.
func (la *lookahead) checkedNearing(seq uint64, verdict string) (ok bool) {
	la.mu.Lock()
	c, ok := la.nearing[seq]
	if ok {
		delete(la.nearing, seq)
		delete(la.pending, c.pk)
	}
	la.mu.Unlock()
	if !ok {
		return false
	}
	switch verdict {
	case "1", "0":
		// Most of the files looked at short: the page cache was dropped or reclaimed as a
		// whole (drop_caches, memory pressure), not a page here and there, and every mark
		// goes, as checked concludes. The READs that would tell it otherwise never come:
		// the files nearing the readers are unmarked before they are read.
		la.mu.Lock()
		la.nearOf++
		if verdict == "0" {
			la.nearGone++
			la.nearLost = la.nearSeen
		}
		whole := false
		if la.nearOf >= nearBatch {
			whole = 2*la.nearGone > la.nearOf
			la.nearOf, la.nearGone = 0, 0
		}
		la.mu.Unlock()
		if whole {
			la.f.push.checkedGone.Add(1)
			la.f.forgetResident()
			break
		}
		if verdict == "1" {
			break
		}
		la.f.resident.Put(c.i, false)
		la.f.push.checkedGone.Add(1)
		if la.rewindDue.CompareAndSwap(false, true) {
			// One rewind for the files found within a millisecond of each other.
			time.AfterFunc(time.Millisecond, func() {
				la.rewindDue.Store(false)
				la.f.pagesGone()
			})
		}
	default:
		// The helper cannot tell (no cachestat before Linux 6.5): files are not asked
		// about any more, and their marks stand (a READ still unmarks a file).
		la.noCachestat.Store(true)
	}
	la.f.push.nearChecked.Add(1)
	return true
}

// checked handles the helper's answer to check seq: verdict "1" says all the file's pages
// were in the page cache, "0" not ("?": the helper could not tell, taken for no).
func (la *lookahead) checked(seq uint64, verdict string) {
	if la.checkedNearing(seq, verdict) {
		return
	}
	cached := verdict == "1"
	la.mu.Lock()
	c, ok := la.checks[seq]
	if !ok {
		la.mu.Unlock()
		return
	}
	i := c.i
	delete(la.checks, seq)
	delete(la.pending, c.pk)
	if !cached {
		la.checkGone++
	}
	done, gone, of := len(la.checks) == 0, la.checkGone, la.checkOf
	la.mu.Unlock()
	if !cached {
		la.f.resident.Put(i, false)
		la.f.push.checkedGone.Add(1)
	}
	if done {
		la.f.push.checks.Add(1)
		switch {
		case 2*gone > of:
			la.f.forgetResident()
		case gone > 0:
			la.f.pagesGone()
		}
	}
}

// cachedWhole reports, for the helper, whether every page of file p under dir is in the
// page cache: "1", "0", or "?" where it cannot tell (no cachestat before Linux 6.5).
func cachedWhole(dir int, p string) string {
	fd, err := unix.Openat(dir, p, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return "?"
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return "?"
	}
	var cs unix.Cachestat_t
	if unix.Cachestat(uint(fd), &unix.CachestatRange{}, &cs, 0) != nil {
		return "?"
	}
	page := int64(os.Getpagesize())
	if int64(cs.Cache) >= (st.Size+page-1)/page {
		return "1"
	}
	return "0"
}
