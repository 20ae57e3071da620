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

// checked handles the helper's answer to check seq: cached is whether all the file's pages
// were in the page cache ("?": the helper could not tell, taken for no).
func (la *lookahead) checked(seq uint64, cached bool) {
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
