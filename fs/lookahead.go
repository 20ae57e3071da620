package fs

import (
	"bufio"
	"context"
	"io"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cassfs/cassfs/view"
	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// LookaheadOptions tune the names looked up ahead.
type LookaheadOptions struct {
	// Distance is how many names ahead of the readers are looked up (default 512).
	Distance int
	// Every leaves one name in Every to the readers (default 32): a lookup of theirs per
	// Every files is how the daemon follows their progress.
	Every int
	// Stream, if set, says whether the directory of a class not wholly at hand is read a
	// chunk at a time ahead of the readers (view.FollowOptions.Stream; "Streamed class
	// directories" above).
	Stream func() bool
	// NextEpoch, if not 0, is how long readers who reached the end of an epoch must have
	// looked up nothing before the next epoch's class directories wholly at hand are
	// listed ahead of them ("The next epoch's names, bound between epochs" above).
	NextEpoch time.Duration
}

// lookahead feeds the helper process and follows the readers.
type lookahead struct {
	f    *FS
	opts LookaheadOptions
	out  *bufio.Writer // to the helper; only the feeding goroutine writes
	wake chan struct{}
	done chan struct{}

	mu sync.Mutex
	// follow decides what is looked up ahead in the epoch views readers are in, and when
	// (view.Follower: the rules are there); guarded by mu.
	follow  *view.Follower
	pending map[pendingKey]bool   // guarded by mu: names sent, not yet answered → pushed already
	bySeq   map[uint64]pendingKey // guarded by mu
	lists   map[uint64]listKey    // guarded by mu: listings sent, by sequence number
	// tarLooks is the next epochs' tars sent to be looked up, by sequence number
	// (records_ahead.go); guarded by mu.
	tarLooks map[uint64]tarLook
	// Samples a listing not answered yet bound whose push would be refused, or was, until
	// the kernel has their entries (inodes it did not know, or had forgotten with the
	// FORGET not handled yet): pushed once the helper answers.
	listedUnpushed map[listKey][]uint32 // guarded by mu
	seq            uint64               // guarded by mu

	// A check of the page cache (residency.go); guarded by mu.
	checks             map[uint64]check // by sequence number, not answered yet
	checkGone, checkOf int              // answers of no so far, files asked about
	checkAt            time.Time
	queued             []string // lines for the helper besides next's
	// Resident files asked about as they near the readers (residency.go), by sequence
	// number, not answered yet; guarded by mu.
	nearing          map[uint64]check
	nearOf, nearGone int // looks at nearing files in this batch (nearBatch), and found short; guarded by mu
	// nearSeen counts the resident files that came near the readers, nearLost is its value
	// when pages were last found gone (a look found a file short, or a resident file was
	// READ): every one is looked at within nearQuiet of that, one in nearSparse after.
	// Guarded by mu.
	nearSeen, nearLost int64
	// nearHeld is looks at nearing files not sent yet (sendNearing), nearSends how many
	// writes carried some; guarded by mu.
	nearHeld  []string
	nearSends int64
	// A rewind of the prefetcher is due for files found short (residency.go).
	rewindDue atomic.Bool
	// The helper cannot look at the page cache: nearing files are not asked about.
	noCachestat atomic.Bool

	sent, answered, readerListed atomic.Int64
}

type pendingKey struct {
	key view.Key
	k   uint32
}

type listKey struct {
	key   view.Key
	label int
}

// LookaheadStats counts names looked up ahead.
type LookaheadStats struct {
	Sent     int64 // names sent to the helper
	Answered int64 // of which looked up
	// ReaderListed: names bound by readers' own listings of class directories
	// (readerListedLookup).
	ReaderListed int64
	// StreamedLate: names a class directory's stream brought at or behind the readers,
	// or passed over to catch up with them (view.Follower.Late): left to their own
	// lookups.
	StreamedLate int64
}

// StartLookahead has names looked up ahead of the readers by a helper process (see the
// comment above) that reads requests from out and answers on in; it returns when the
// mount's lookahead is set up, and stops when in ends. Call it once, before or after
// Mount: the helper is sent names only once readers look them up.
func (f *FS) StartLookahead(out io.Writer, in io.Reader, opts LookaheadOptions) {
	follow := view.NewFollower(view.FollowOptions{Distance: opts.Distance, Every: opts.Every, Stream: opts.Stream, Bound: f.known.Has})
	fo := follow.Options()
	opts.Distance, opts.Every = fo.Distance, fo.Every
	la := &lookahead{f: f, opts: opts, out: bufio.NewWriterSize(out, 64<<10), wake: make(chan struct{}, 1), done: make(chan struct{}),
		follow: follow, pending: map[pendingKey]bool{}, bySeq: map[uint64]pendingKey{}, lists: map[uint64]listKey{}, tarLooks: map[uint64]tarLook{}, listedUnpushed: map[listKey][]uint32{}, checks: map[uint64]check{}, nearing: map[uint64]check{}}
	f.helper.Store(la)
	f.lastHelper.Store(la)
	go la.feed()
	go la.answers(in)
}

// LookaheadStats returns the names looked up ahead so far.
func (f *FS) LookaheadStats() LookaheadStats {
	la := f.lastHelper.Load()
	if la == nil {
		return LookaheadStats{}
	}
	la.mu.Lock()
	late := la.follow.Late()
	la.mu.Unlock()
	return LookaheadStats{Sent: la.sent.Load(), Answered: la.answered.Load(), ReaderListed: la.readerListed.Load(), StreamedLate: late}
}

// isPending reports whether index k of view key was sent to the helper and not answered.
func (la *lookahead) isPending(key view.Key, k uint32) bool {
	la.mu.Lock()
	defer la.mu.Unlock()
	_, ok := la.pending[pendingKey{key, k}]
	return ok
}

// lookedUp handles the lookup of a pending name, bound to sample i: where the kernel knows
// the inode already (a sample read in an earlier epoch), its blob is pushed now, before the
// lookup is answered, so that a reader who finds the name finds the bytes too; otherwise
// when the helper's answer says the kernel knows it.
func (la *lookahead) lookedUp(key view.Key, k, i uint32) {
	if !la.f.known.Has(i) || la.f.cfg.LookedAhead == nil {
		return
	}
	la.mu.Lock()
	pk := pendingKey{key, k}
	pushed, ok := la.pending[pk]
	if ok && !pushed {
		la.pending[pk] = true
	}
	la.mu.Unlock()
	if ok && !pushed {
		la.f.cfg.LookedAhead(i)
	}
}

// readerAt records a reader's lookup of index k of view e, in the class directory at
// classPath: the readers got there, so the names looked up for them before it were read
// too (reported now), and the helper may run further.
func (la *lookahead) readerAt(e *view.Epoch, classPath string, k uint32) {
	la.mu.Lock()
	dir := ""
	if !la.follow.Follows(e) {
		dir = path.Dir(classPath)
	}
	covered := la.follow.ReaderAt(e, dir, k)
	la.mu.Unlock()
	la.f.views.Advance(e, covered)
	select {
	case la.wake <- struct{}{}:
	default:
	}
}

// feed sends names to the helper as the readers advance and samples arrive.
func (la *lookahead) feed() {
	// A name waiting for its sample is tried again every 2 ms; an idle mount is not woken.
	// Readers gone for a second are not waited for.
	retry, quiet := time.NewTimer(time.Hour), time.NewTimer(time.Hour)
	defer retry.Stop()
	defer quiet.Stop()
	var lines []string
	var active time.Time // the readers' last lookup
	for {
		select {
		case <-la.done:
			return
		case <-la.wake:
			active = time.Now()
			if la.opts.NextEpoch > 0 {
				quiet.Reset(la.opts.NextEpoch)
			}
		case <-retry.C:
		case <-quiet.C:
			la.followNextEpochs()
		}
		var waiting bool
		lines, waiting = la.next(lines[:0])
		if waiting && time.Since(active) < time.Second {
			retry.Reset(2 * time.Millisecond)
		}
		if len(lines) == 0 {
			continue
		}
		for _, l := range lines {
			la.out.WriteString(l)
		}
		if err := la.out.Flush(); err != nil {
			la.f.log.Warn("names are no longer looked up ahead of the readers", "err", err)
			return
		}
	}
}

// next collects the names the helper may look up now, and the resident files it is to
// look at (residency.go); waiting: some name the readers will want next is held back until
// its sample arrives.
func (la *lookahead) next(lines []string) (_ []string, waiting bool) {
	nearing := la.checkNearing()
	la.mu.Lock()
	defer la.mu.Unlock()
	lines = append(lines, la.queued...)
	checks := len(la.queued)
	la.queued = la.queued[:0]
	classes := la.f.views.ClassNames()
	waiting = la.follow.Next(la.f.cfg.Held, func(e *view.Epoch, dir string, k uint32) {
		la.seq++
		pk := pendingKey{e.Key, k}
		la.pending[pk] = false
		la.bySeq[la.seq] = pk
		lines = append(lines, strconv.FormatUint(la.seq, 10)+" "+la.namePath(e, dir, k)+"\n")
	}, func(e *view.Epoch, dir string, label int) {
		la.seq++
		la.lists[la.seq] = listKey{e.Key, label}
		lines = append(lines, "L"+strconv.FormatUint(la.seq, 10)+" "+dir+"/"+classes[label]+"\n")
	}, func(e *view.Epoch, dir string, label, from int) {
		la.seq++
		la.lists[la.seq] = listKey{e.Key, label}
		lines = append(lines, "S"+strconv.FormatUint(la.seq, 10)+"@"+strconv.Itoa(from)+" "+dir+"/"+classes[label]+"\n")
	})
	la.sent.Add(int64(len(lines) - checks))
	return la.sendNearing(lines, nearing), waiting
}

// namePath is the path, from the mount's root, of index k of view e, whose directory is
// dir.
func (la *lookahead) namePath(e *view.Epoch, dir string, k uint32) string {
	return dir + "/" + la.f.views.ClassNames()[la.f.ix.Label(e.Order[k])] + "/" + e.NameAt(k, false)
}

// answers reads the helper's answers: each name looked up, its sample's blob is pushed.
func (la *lookahead) answers(in io.Reader) {
	defer func() {
		// The helper is gone: readers look names up themselves from now on, as without it.
		la.f.helper.CompareAndSwap(la, nil)
		close(la.done)
	}()
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		if c, ok := strings.CutPrefix(sc.Text(), "C"); ok {
			seq, verdict, _ := strings.Cut(c, " ")
			if n, err := strconv.ParseUint(seq, 10, 64); err == nil {
				la.checked(n, verdict)
				continue
			}
		}
		line, next := sc.Text(), 0
		if c, ok := strings.CutPrefix(line, "S"); ok {
			var at string
			line, at, _ = strings.Cut(c, " ")
			next, _ = strconv.Atoi(at) // 0 (the end) if unreadable
		}
		seq, err := strconv.ParseUint(strings.TrimPrefix(line, "L"), 10, 64)
		if err != nil {
			la.f.log.Warn("lookahead helper: unexpected answer", "line", sc.Text())
			continue
		}
		la.mu.Lock()
		if tl, ok := la.tarLooks[seq]; ok {
			delete(la.tarLooks, seq)
			la.mu.Unlock()
			go la.f.tarLookedUp(tl)
			continue
		}
		pk, looked := la.bySeq[seq] // a name looked up
		if lk, ok := la.lists[seq]; ok {
			delete(la.lists, seq)
			la.follow.Listed(lk.key, lk.label)
			la.follow.Streamed(lk.key, lk.label, next)
			listed := la.listedUnpushed[lk]
			delete(la.listedUnpushed, lk)
			la.mu.Unlock()
			if looked {
				la.lookupAnswered(seq, pk)
			}
			if la.f.cfg.LookedAhead != nil {
				for _, i := range listed {
					// The kernel has the entries now; a push tried before it had them was
					// refused and unmarked the inode.
					la.f.known.Put(i, true)
					la.f.cfg.LookedAhead(i)
				}
			}
			select {
			case la.wake <- struct{}{}:
			default:
			}
			continue
		}
		la.mu.Unlock()
		if looked {
			la.lookupAnswered(seq, pk)
		}
	}
}

// lookupAnswered handles the helper's answer to the lookup of pending name pk, sent as
// number seq: the kernel has the name now, so its sample's blob is pushed, unless that
// was done as the daemon answered the lookup (lookedUp).
func (la *lookahead) lookupAnswered(seq uint64, pk pendingKey) {
	la.mu.Lock()
	pushed := la.pending[pk]
	delete(la.bySeq, seq)
	delete(la.pending, pk)
	e, followed := la.follow.Epoch(pk.key)
	la.mu.Unlock()
	if !followed {
		return
	}
	la.answered.Add(1)
	if pushed {
		return
	}
	i := e.Order[pk.k]
	name := e.NameAt(pk.k, false)
	if b, ok := la.f.views.LookupAhead(e, la.f.ix.Label(i), name); ok && la.f.cfg.LookedAhead != nil {
		la.f.cfg.LookedAhead(b)
	}
}

// listedLookup looks up name, listed in class directory d of view e, if the helper was
// asked to list d (see "Whole class directories"): ok is false otherwise. A probe, a name
// the readers are at, and a name sent to the helper by itself go out without a node.
func (la *lookahead) listedLookup(ctx context.Context, d *classDir, e *view.Epoch, name string, out *fuse.EntryOut) (_ *gofs.Inode, _ syscall.Errno, ok bool) {
	k, found := e.EntryPos(name)
	la.mu.Lock()
	if !la.follow.Listing(e, d.label) {
		la.mu.Unlock()
		return nil, 0, false
	}
	if !found {
		la.mu.Unlock()
		return nil, syscall.ENOENT, true
	}
	if !la.follow.ListEntry(e, k) {
		la.mu.Unlock()
		return nil, syscall.EAGAIN, true // a probe, a name at the readers, or sent by itself
	}
	la.mu.Unlock()
	ch, i, known := la.bindListed(ctx, d, e, name, out)
	if ch == nil {
		return nil, syscall.ENOENT, true
	}
	la.sent.Add(1)
	la.answered.Add(1)
	if la.f.cfg.LookedAhead == nil {
		return ch, 0, true
	}
	if known {
		la.f.cfg.LookedAhead(i) // pushed before the kernel has the name, as in lookedUp
		if la.f.known.Has(i) {
			return ch, 0, true // not refused
		}
	}
	la.mu.Lock()
	if la.follow.Listing(e, d.label) {
		lk := listKey{e.Key, d.label}
		la.listedUnpushed[lk] = append(la.listedUnpushed[lk], i)
	}
	la.mu.Unlock()
	return ch, 0, true
}

// readerListedLookup looks up name, listed by a reader in class directory d of view e
// under strict binding or with every sample of the class at hand (classListing.wholeHeld;
// see "Readers' listings" in fs.go): bound now, to what a lookup would bind it to, a name
// costs its reader no LOOKUP. Probes go out without a node: readers still look them up,
// which is how the follower sees where they are. The binding reports no access, as a name
// looked up ahead.
func (la *lookahead) readerListedLookup(ctx context.Context, d *classDir, e *view.Epoch, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	k, found := e.EntryPos(name)
	if !found {
		return nil, syscall.ENOENT
	}
	la.mu.Lock()
	dir := ""
	if !la.follow.Follows(e) {
		dir = path.Dir(d.path)
	}
	bind := la.follow.ReaderListed(e, dir, k)
	la.mu.Unlock()
	if !bind {
		return nil, syscall.EAGAIN // a probe
	}
	ch, i, known := la.bindListed(ctx, d, e, name, out)
	if ch == nil {
		return nil, syscall.ENOENT
	}
	la.readerListed.Add(1)
	if known && la.f.cfg.LookedAhead != nil {
		la.f.cfg.LookedAhead(i) // pushed now if held but not in the page cache
	}
	return ch, 0
}

// bindListed binds name, listed in class directory d of view e, as a name looked up ahead
// (no access reported) and returns its sample's node, nil if e has no such name; known:
// the kernel knew the sample's inode before, so its blob can be pushed now.
func (la *lookahead) bindListed(ctx context.Context, d *classDir, e *view.Epoch, name string, out *fuse.EntryOut) (_ *gofs.Inode, i uint32, known bool) {
	i, found := la.f.views.LookupAhead(e, d.label, name)
	if !found {
		return nil, 0, false
	}
	known = la.f.known.Has(i)
	la.f.sampleAttr(i, &out.Attr)
	return la.f.sampleInode(ctx, d.EmbeddedInode(), i), i, known
}
