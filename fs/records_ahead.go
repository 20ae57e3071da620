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
	ended  map[view.Key]string // guarded by mu: views whose last shard was READ, and their directories
	pushed map[view.Key]bool   // guarded by mu: next epochs looked up and pushed (or being)
	timer  *time.Timer         // guarded by mu: fires once no tar was READ for the quiet time
	// tierRoom is the bytes the pause's pushes may still read from the disk tier
	// (tierBudget, set as the pause begins).
	tierRoom atomic.Int64
}

// recordRead is told of every READ of a tar: with the lookahead helper running, a READ of
// an epoch's last shard marks the epoch as ending, and every READ puts off the quiet.
func (f *FS) recordRead(t *tarFile) {
	la := f.helper.Load()
	if la == nil || la.opts.NextEpoch <= 0 {
		return
	}
	a := &f.recAhead
	a.mu.Lock()
	defer a.mu.Unlock()
	if t.sh.Last() {
		if a.ended == nil {
			a.ended = map[view.Key]string{}
		}
		a.ended[t.sh.Key()] = t.dir
	}
	if len(a.ended) == 0 {
		return
	}
	if a.timer == nil {
		a.timer = time.AfterFunc(la.opts.NextEpoch, f.recordsQuiet)
		return
	}
	a.timer.Reset(la.opts.NextEpoch)
}

// recordsQuiet has the helper look up the tars of the epoch after each ended one.
func (f *FS) recordsQuiet() {
	la := f.helper.Load()
	if la == nil {
		return
	}
	a := &f.recAhead
	a.mu.Lock()
	ended := a.ended
	a.ended = nil
	if a.pushed == nil || len(a.pushed) > 1024 {
		a.pushed = map[view.Key]bool{} // forget old epochs wholesale
	}
	var next []view.Key
	var dirs []string
	for k, dir := range ended {
		if k.Epoch == 1<<64-1 {
			continue
		}
		nk := k
		nk.Epoch++
		if !a.pushed[nk] {
			a.pushed[nk] = true
			next = append(next, nk)
			dirs = append(dirs, path.Join(path.Dir(dir), view.EpochName(nk.Epoch)+view.RecordsSuffix))
		}
	}
	a.mu.Unlock()
	// The epochs before the one that ended are let go first: the pages they free are the
	// next epoch's pushes' to take.
	f.dropPages(f.tars.takePast())
	if len(next) > 0 && f.cfg.Backing != nil {
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
