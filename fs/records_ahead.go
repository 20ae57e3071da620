package fs

import (
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cassfs/cassfs/view"
)

// The next epoch's tars, pushed while readers are quiet.
//
// A record view's tars are new bytes every epoch, so a warm epoch (every blob in memory)
// still copies each byte into the page cache as its readers go, and on cores the readers
// share that copy bounds the epoch (bench/history/journal.md, "each epoch as WebDataset
// shards"). A training loop leaves the mount quiet between epochs (validation, a
// checkpoint, its loader's restart). So once readers got to the last shard of an epoch's
// record view and no tar was READ for LookaheadOptions.NextEpoch, the lookahead helper
// looks up the next epoch's tars (the kernel must know an inode before anything is pushed
// into it), and as each lookup is answered the daemon pushes every blob the cache holds
// of that tar into it, and every blob the disk tier holds in its files, up to tierBudget
// (from the tier the readers of a 4,000-image epoch took 0.39–0.58 s where the cache held
// a third of it, 0.12–0.22 s with these pushes, and the daemon less CPU: the prefetcher
// no longer brings each blob through the cache; bench/history/journal.md, "record epochs
// from the disk tier"). The readers of that epoch then read its tars from the page cache
// but for the probes' pages; blobs neither holds come as before, prefetched and pushed as
// the readers go. A tar remembers the samples pushed into it whole (tarFile.done),
// so the prefetcher's pushes as its readers go skip them.

// recordsAhead is what a mount knows of the record views being read, for pushing the
// next epoch's tars between epochs.
type recordsAhead struct {
	mu     sync.Mutex
	ended  map[view.Key]endedView // guarded by mu: views whose last shard was READ (or opened), and where
	pushed map[view.Key]uint8     // guarded by mu: next epochs looked up and pushed (or being): pushedMain, pushedLocal
	// opens is how many of each view's tars are open on the record view's own connection
	// (guarded by mu): a view is not quiet while any is, nor while a process that opened
	// one in passthrough mode maps one of them (mappers: their PIDs and the tars' inode
	// numbers; records_local.go).
	opens   map[view.Key]int
	mappers map[view.Key]*mappers
	timer   *time.Timer // guarded by mu: fires once no tar was READ for the quiet time
	// lookAgain is when the timer looks again at tars still mapped (guarded by mu): twice
	// as long each time, up to mapsEveryMax, from the quiet time on at every other event.
	lookAgain time.Duration
	// tierRoom is the bytes the pause's pushes may still read from the disk tier
	// (tierBudget, set as the pause begins).
	tierRoom atomic.Int64
}

// endedView is a record view whose last shard was read: on the main connection (main, its
// directory dir), on the record view's own (own), or both.
type endedView struct {
	dir       string
	main, own bool
}

// What was done for a next epoch (recordsAhead.pushed): its tars looked up and pushed on
// the main connection, written to local files for the record view's own.
const (
	pushedMain uint8 = 1 << iota
	pushedLocal
)

// recordRead is told of every READ of a tar: with the lookahead helper running, a READ of
// an epoch's last shard marks the epoch as ending, and every READ puts off the quiet.
func (f *FS) recordRead(t *tarFile) { f.recordEvent(t, 0) }

// recordOpened and recordClosed are told of the opens of a tar on the record view's own
// connection, which READs alone do not show (an open passed through sends none): an open
// of an epoch's last shard marks it as ending, and the epoch is quiet only once none of
// its tars is open.
func (f *FS) recordOpened(t *tarFile) { f.recordEvent(t, 1) }
func (f *FS) recordClosed(t *tarFile) { f.recordEvent(t, -1) }

// mapsEveryMax is the longest wait between two looks at the mappings of tars passed
// through (recordsAhead.lookAgain).
const mapsEveryMax = 400 * time.Millisecond

// mappers are the processes that opened an epoch's tars in passthrough mode, and the tars.
type mappers struct {
	pids map[uint32]bool
	inos map[uint64]bool
}

// recordMapper is told that process pid opened t in passthrough mode.
func (f *FS) recordMapper(t *tarFile, pid uint32) {
	a := &f.recAhead
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.mappers == nil {
		a.mappers = map[view.Key]*mappers{}
	}
	m := a.mappers[t.sh.Key()]
	if m == nil {
		m = &mappers{pids: map[uint32]bool{}, inos: map[uint64]bool{}}
		a.mappers[t.sh.Key()] = m
	}
	m.pids[pid], m.inos[t.ino] = true, true
}

// mapped reports whether a process that opened view k's tars in passthrough mode still
// maps one (a.mu held); those that do not are forgotten.
func (a *recordsAhead) mapped(k view.Key) bool {
	m := a.mappers[k]
	if m == nil {
		return false
	}
	for pid := range m.pids {
		if mapsAny(pid, m.inos) {
			return true
		}
		delete(m.pids, pid)
	}
	delete(a.mappers, k)
	return false
}

// recordEvent is a READ (open 0), an open (1) or a close (-1) of t.
func (f *FS) recordEvent(t *tarFile, open int) {
	quiet, helped := quietTime(f.helper.Load())
	if !helped && !t.own {
		return // the main connection's tars are pushed through the helper's lookups
	}
	a := &f.recAhead
	a.mu.Lock()
	defer a.mu.Unlock()
	k := t.sh.Key()
	if open != 0 {
		if a.opens == nil {
			a.opens = map[view.Key]int{}
		}
		if a.opens[k] += open; a.opens[k] <= 0 {
			delete(a.opens, k)
		}
	}
	if t.sh.Last() && open >= 0 {
		if a.ended == nil {
			a.ended = map[view.Key]endedView{}
		}
		e := a.ended[k]
		if t.own {
			e.own = true
		} else {
			e.main, e.dir = true, t.dir
		}
		a.ended[k] = e
	}
	if len(a.ended) == 0 {
		return
	}
	a.lookAgain = quiet
	if a.timer == nil {
		a.timer = time.AfterFunc(quiet, f.recordsQuiet)
		return
	}
	a.timer.Reset(quiet)
}

// ownQuiet is the quiet time of the record view's own connection where no lookahead helper
// runs (its tars are written by the daemon alone): the helper's own default
// (mount.nextEpochQuiet).
const ownQuiet = 50 * time.Millisecond

// quietTime is, with helper la (nil if none), how long no tar may be read before the next
// epoch's are pushed or written (LookaheadOptions.NextEpoch, or ownQuiet), and whether the
// helper runs (its lookups are what the main connection's pushes need).
func quietTime(la *lookahead) (time.Duration, bool) {
	if la != nil && la.opts.NextEpoch > 0 {
		return la.opts.NextEpoch, true
	}
	return ownQuiet, false
}

// recordsQuiet has the helper look up the tars of the epoch after each ended one.
func (f *FS) recordsQuiet() {
	la := f.helper.Load()
	quiet, helped := quietTime(la)
	a := &f.recAhead
	a.mu.Lock()
	ended := a.ended
	a.ended = nil
	if a.pushed == nil || len(a.pushed) > 1024 {
		a.pushed = map[view.Key]uint8{} // forget old epochs wholesale
	}
	var next, local []view.Key
	var dirs []string
	mapped := false
	for k, e := range ended {
		open := a.opens[k] > 0
		if !open && a.mapped(k) {
			open, mapped = true, true
		}
		if open {
			// Still being read: its last close puts the quiet off again (recordEvent), and
			// while its tars are mapped they are looked at again after a quiet time.
			if a.ended == nil {
				a.ended = map[view.Key]endedView{}
			}
			a.ended[k] = e
			continue
		}
		if k.Epoch == 1<<64-1 {
			continue
		}
		nk := k
		nk.Epoch++
		if e.main && helped && a.pushed[nk]&pushedMain == 0 {
			a.pushed[nk] |= pushedMain
			next = append(next, nk)
			dirs = append(dirs, path.Join(path.Dir(e.dir), view.EpochName(nk.Epoch)+view.RecordsSuffix))
		}
		if e.own && a.pushed[nk]&pushedLocal == 0 {
			a.pushed[nk] |= pushedLocal
			local = append(local, nk)
		}
	}
	if mapped && a.timer != nil {
		// A process's mappings cost a millisecond or two to read (2,000 of them in a DALI
		// reader's): looked at every quiet time, they took a tenth of a core from the
		// readers. Twice as long each time, the tars are written at most mapsEveryMax
		// after the readers let them go.
		a.lookAgain = min(2*max(a.lookAgain, quiet), mapsEveryMax)
		a.timer.Reset(a.lookAgain)
	}
	a.mu.Unlock()
	// The epochs before the one that ended are let go first: the pages they free are the
	// next epoch's pushes' to take.
	f.dropPages(f.tars.takePast())
	if len(next)+len(local) > 0 && f.cfg.Backing != nil {
		a.tierRoom.Store(tierBudget())
	}
	for n, k := range next {
		r := f.views.Epoch(k).Records() // computed outside every lock
		var lines []string
		la.mu.Lock()
		for s := range r.Len() {
			la.seq++
			la.tarLooks[la.seq] = tarLook{key: k, shard: s}
			lines = append(lines, strconv.FormatUint(la.seq, 10)+" "+dirs[n]+"/"+view.ShardFileName(s, r.Len(), false)+"\n")
		}
		la.queued = append(la.queued, lines...)
		la.mu.Unlock()
	}
	if len(next) > 0 {
		select {
		case la.wake <- struct{}{}:
		default:
		}
	}
	// The record view's own connection writes the next epoch's tars to local files
	// instead (records_local.go).
	for _, k := range local {
		f.writeLocal(k)
	}
}

// tarLook is a tar of a next epoch sent to the helper to look up.
type tarLook struct {
	key   view.Key
	shard int
}

// tarLookedUp is told that the helper looked up shard tl.shard of epoch view tl.key: the
// kernel knows its inode, and every blob the cache holds of it is pushed into it; with a
// disk tier, so are the blobs it holds in its files, within the pause's budget (tierRoom).
func (f *FS) tarLookedUp(tl tarLook) {
	t := f.tars.find(tl.key, tl.shard)
	if t == nil || f.cfg.Peek == nil {
		return // forgotten already, or nothing to push from
	}
	every := f.tars.every(t)
	// Blobs read from the tier, by index in the shard: the one before j and j's own, for
	// the pages they share (pushTar).
	read := map[int][]byte{}
	var spare []byte
	for j := range t.sh.Len() {
		if t.done.Has(uint32(j)) {
			continue
		}
		i := t.sh.Sample(j)
		data, ok := f.cfg.Peek(i)
		if !ok {
			if data, ok = f.tierBlob(i, spare); !ok {
				continue
			}
			spare = nil // data may be in it: j+1's push renders the page they share from it
			read[j] = data
		}
		f.pushTar(t, j, data, every, read)
		if old, ok := read[j-1]; ok {
			spare = old[:0] // pushed, and j's pushed its shared page: reused for j+1
			delete(read, j-1)
		}
	}
}

// tierBlob reads sample i's blob from the disk tier (Config.Backing) into buf's memory if
// it is large enough, within what is left of the pause's budget (recordsAhead.tierRoom).
func (f *FS) tierBlob(i uint32, buf []byte) ([]byte, bool) {
	if f.cfg.Backing == nil {
		return nil, false
	}
	n := f.ix.BlobSize(i) // with targets, the target follows the blob, as in the cache
	// A blob not read gives its share back: one too large for what is left, one the tier
	// does not hold, or one whose file went (evicted meanwhile: its READs fetch it) leave
	// the room to the blobs after it.
	if f.recAhead.tierRoom.Add(-n) < 0 {
		f.recAhead.tierRoom.Add(n)
		return nil, false
	}
	fl, ok := f.cfg.Backing.Backing(i)
	if !ok {
		f.recAhead.tierRoom.Add(n)
		return nil, false
	}
	defer fl.Close()
	if int64(cap(buf)) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	// At offset 0, not at the file's: the tier may hand out duplicates of one descriptor,
	// which share their offset.
	if _, err := fl.ReadAt(buf, 0); err != nil {
		f.recAhead.tierRoom.Add(n)
		return nil, false
	}
	return buf, true
}

// tierBudget is what the next epoch's tars may take from the disk tier in one pause: half
// the memory the kernel reports available (MemAvailable, /proc/meminfo; 0 where it cannot
// be read). The pushed pages are the kernel's page cache, which a dataset beyond memory
// would churn through: pushing past what memory holds would evict the epoch's first
// shards before their readers came. The rest comes as the readers go, prefetched.
func tierBudget() int64 {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, "MemAvailable:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10 / 2
		}
	}
	return 0
}
