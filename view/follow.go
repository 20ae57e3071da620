package view

import (
	"slices"

	"github.com/cassfs/cassfs/internal/bitset"
)

// Follower follows readers along an epoch's order: it decides which names of the epoch views readers walk are looked up ahead of
// them, by a helper process of package fs, so that the kernel knows the names (and the
// daemon can push their bytes) before the readers open them. It decides and remembers;
// package fs does the looking up, the listing and the pushing, and tells it what the
// readers did. The rules:
//
//   - A view is followed from the readers' own lookups (ReaderAt): their furthest
//     position is the head. Nothing is looked up ahead until readers have looked up
//     2·Every names of the view themselves (a reader of a few files is never followed by
//     a burst of lookups), and never again in a view where a reader looks up a name more
//     than Distance behind the head (readers that shuffle for themselves: looking ahead
//     along the order would only cost).
//   - Names are looked up at most Distance ahead of the head, in order, and only over
//     samples held (the caller's predicate: fetched, or at hand in the page cache or a
//     local file): under arrival binding a name looked up ahead is bound to a sample
//     that has arrived. The first name not held stops the view until it is (Next reports
//     waiting).
//   - One name in Every (by its position in the whole epoch) is left to the readers: a
//     probe. Their lookups of probes are how the readers' progress is known; the names
//     looked up for them since the last one are reported as read then (ReaderAt's
//     covered).
//   - Where every sample of a class is held, its directory is listed instead (one
//     request for many names); a listing declined for a sample not held is tried again
//     max(Distance/2, Every) names further on. While a listing is pending, names more
//     than Every ahead of the head wait for it; of its entries, probes, names within
//     Every of the head and names sent by themselves go out without a lookup
//     (ListEntry).
//   - With Stream, a class not wholly held is streamed instead of declined: its directory
//     is read on, a chunk at a time, as its names come within Distance of the head (one
//     request for some tens of names, whether their samples arrived or not), and none of
//     its names is looked up by itself. A streamed name is bound when its chunk is read:
//     under arrival binding to a sample of its class that has arrived if there is one, or
//     else to the next one the prefetcher brings (fetch order); the blob is pushed as it
//     arrives, the kernel knowing the name and its inode by then. So a first epoch costs
//     the readers' probes and a request per chunk, not a lookup per name; readers that
//     leave the order are not followed, and keep arrival binding whole. A chunk starts
//     where the last one ended, or past the readers if they got ahead of the stream (its
//     names within Every of them would go out without a node anyway): a stream that fell
//     behind (its helper slow to be scheduled, say, on cores the readers keep busy)
//     catches up at its next chunk instead of reading, chunk after chunk, names the
//     readers have looked up themselves (Late counts the names a chunk brings too late
//     and those a stream passes over to catch up).
//   - Where readers reached the end of a view (Ended), the caller may have the next epoch
//     followed ahead of them (FollowAhead) while the mount is idle between epochs: its class
//     directories whose samples are all held are listed as if the readers were about to
//     begin it, and nothing else is looked up for it until they do. A warm epoch's names
//     are then bound before its first reader, in the gap a training loop leaves between
//     epochs (validation, a checkpoint, its loader's restart), instead of on the cores
//     its readers need. Such a view leaves one name in AheadEvery·Every to the readers, not
//     one in Every: its probes are then all the daemon hears of the epoch.
//   - A name looked up ahead or listed whose sample's inode the kernel has forgotten since
//     (FollowOptions.Bound) counts as not looked up: Next looks it up again when it
//     reaches it.
//
// A Follower is not safe for concurrent use: its caller holds one lock around it.
type Follower struct {
	opts  FollowOptions
	views map[Key]*followed
	late  int64 // names streams brought at or behind the readers, or passed over (Late)
}

// FollowOptions tune a Follower.
type FollowOptions struct {
	// Distance is how many names ahead of the readers are looked up (default 512).
	Distance int
	// Every leaves one name in Every to the readers (default 32).
	Every int
	// Stream, if set, says whether the directory of a class not wholly held is streamed
	// (see above): asked as a class is first met in a view, and as a declined one is tried
	// again.
	Stream func() bool
	// Bound, if set, reports whether the kernel still knows sample i's inode. A name looked
	// up ahead, or listed, whose sample the kernel has forgotten since (its inode cache
	// dropped or shrunk: the entries and inodes of names bound before readers came) is
	// looked up again when Next reaches it: otherwise its blob, arriving, could not be
	// pushed (the kernel refuses a push to an inode it does not know), and its reader
	// would READ it.
	Bound func(i uint32) bool
}

// followed is one epoch view a Follower follows.
type followed struct {
	e           *Epoch
	dir         string     // the caller's path of the epoch directory
	head        int        // furthest index of the order a reader looked up
	reported    int        // readers' accesses reported up to this index
	next        int        // next index to look up ahead
	sent        bitset.Set // indices looked up ahead, by name or by a listing
	listed      []uint8    // per label: listUntried, listPending, listDone, listDeclined, or stream*
	retry       []int      // per label: the index from which a declined listing is tried again
	want        []int      // per label, streamed: the furthest index within Distance wanting the stream
	streamed    []int      // per label, streamed: the furthest index its chunks brought
	streamAt    []int      // per label, streamed: where its last chunk ended in its directory (Streamed)
	lookups     int        // readers' own lookups in the view
	near        int        // Nearing has passed the names before this index
	random      bool       // a reader looked up a name far behind the others: no looking ahead
	ahead       bool       // followed ahead of its readers (FollowAhead): no reader in it yet
	listedAhead bool       // listAhead ran
	ended       bool       // Ended reported it
	every       int        // one name in every is a probe: Every, or AheadEvery·Every if followed ahead
}

// A class directory's listing.
const (
	listUntried  = iota
	listPending  // asked for, not answered yet
	listDone     // answered
	listDeclined // some sample of the class was not held (tried again further on: followed.retry)
	// Streamed (FollowOptions.Stream): no chunk asked for, one asked for, or read to its end.
	streamIdle
	streamPending
	streamEnd
)

// followedViews is how many views a Follower keeps: readers are in one or two at a time,
// and views they left behind are forgotten wholesale beyond it.
const followedViews = 8

// NewFollower returns a Follower following nothing yet.
func NewFollower(o FollowOptions) *Follower {
	if o.Distance <= 0 {
		o.Distance = 512
	}
	if o.Every <= 1 {
		o.Every = 32
	}
	return &Follower{opts: o, views: map[Key]*followed{}}
}

// Options are the Follower's options, defaults applied.
func (f *Follower) Options() FollowOptions { return f.opts }

// Follows reports whether view e is followed already (ReaderAt needs no dir then).
func (f *Follower) Follows(e *Epoch) bool {
	a := f.views[e.Key]
	return a != nil && a.e == e
}

// IsProbe reports whether index k of view e is left to the readers: one name in Every, in
// AheadEvery·Every in a view followed ahead of its readers.
func (f *Follower) IsProbe(e *Epoch, k uint32) bool {
	if a := f.views[e.Key]; a != nil && a.e == e {
		return a.probe(k)
	}
	return (int(k)+int(e.Start))%f.opts.Every == 0
}

// probe is IsProbe for a view followed.
func (a *followed) probe(k uint32) bool {
	return (int(k)+int(a.e.Start))%a.every == 0
}

// AheadEvery spaces the probes of a view followed ahead of its readers (FollowAhead):
// its names are bound before the readers come, so a probe's lookup is all the daemon does
// for AheadEvery·Every files, and what it costs (a request, the wake-ups of the daemon and
// its helper: on two cores shared with the readers, some hundreds of µs of CPU each) is
// what a warm epoch costs beyond the kernel's own work. Progress then comes in steps of
// that many names, well within Distance.
const AheadEvery = 4

// ReaderAt records a reader's own lookup of index k of view e, whose directory is dir
// (used when the view is new). It returns how many names looked up ahead before k the
// readers read since their last such lookup: accesses to report to the prefetcher.
func (f *Follower) ReaderAt(e *Epoch, dir string, k uint32) (covered int) {
	a := f.follow(e, dir)
	if int(k) > a.reported {
		for j := a.reported + 1; j < int(k); j++ {
			if a.sent.Has(uint32(j)) {
				covered++
			}
		}
		a.reported = int(k)
	}
	a.lookups++
	a.ahead = false
	if int(k)+f.opts.Distance < a.head {
		a.random = true
	}
	a.head = max(a.head, int(k))
	return covered
}

// Next finds what may be looked up ahead now in every view followed: lookup is called for
// each name (index k of view e, in directory dir), list for each class directory to list
// whole, stream for each class directory to read a chunk further of (FollowOptions.Stream;
// nil without), from entry from of its listing (an index into the view's ByClass[label]).
// waiting reports that some name the readers want next waits for its
// sample, or for a pending listing: the caller asks again shortly.
func (f *Follower) Next(held func(uint32) bool, lookup func(e *Epoch, dir string, k uint32), list func(e *Epoch, dir string, label int), stream func(e *Epoch, dir string, label, from int)) (waiting bool) {
	for _, a := range f.views {
		if a.ahead {
			f.listAhead(a, held, list)
			continue
		}
		if a.random || a.lookups < 2*f.opts.Every {
			continue // not (yet) readers walking the epoch in order
		}
		n := len(a.e.Order)
		a.next = max(a.next, a.head+1)
		for a.next < min(a.head+1+f.opts.Distance, n) {
			k := a.next
			i := a.e.Order[k]
			if a.probe(uint32(k)) || a.sent.Has(uint32(k)) && (f.opts.Bound == nil || f.opts.Bound(i)) {
				a.next++ // a probe, or looked up already (by its directory's listing) and still known
				continue
			}
			label := a.e.set.ix.Label(i)
			if a.listed[label] >= streamIdle {
				// Its class's stream brings it, in order: the stream goes on to here.
				a.want[label] = max(a.want[label], k)
				a.next++
				continue
			}
			if a.listed[label] == listUntried || (a.listed[label] == listDeclined && k >= a.retry[label]) {
				// Declined while some sample of the class is not at hand (not fetched yet,
				// or its pages paged out since an earlier epoch): tried again further on,
				// once the prefetcher may have brought it, not given up for the epoch.
				a.listed[label] = listDeclined
				a.retry[label] = k + max(f.opts.Distance/2, f.opts.Every)
				if held != nil && a.e.AllHeld(label, held) {
					a.listed[label] = listPending
					list(a.e, a.dir, label)
				} else if f.opts.Stream != nil && f.opts.Stream() {
					a.listed[label] = streamIdle
					continue // the branch above, now
				}
			}
			if a.listed[label] == listPending && k > a.head+f.opts.Every {
				waiting = true
				break // its listing looks it up, or leaves it to be sent after
			}
			if held != nil && !held(i) {
				waiting = true
				break // not arrived yet: tried again shortly
			}
			a.sent.Put(uint32(k), true)
			lookup(a.e, a.dir, uint32(k))
			a.next++
		}
		for label, st := range a.listed {
			if st == streamIdle && a.want[label] > a.streamed[label] {
				a.listed[label] = streamPending
				// Past the names within Every of the readers, which a chunk leaves to them.
				members := a.e.ByClass[label]
				past, _ := slices.BinarySearch(members, uint32(max(a.head+f.opts.Every+1, 0)))
				if at := a.streamAt[label]; at > 0 && past > at {
					// The stream fell behind: the names it passes over are the readers'.
					for _, k := range members[at:past] {
						if !a.probe(k) && !a.sent.Has(k) {
							f.late++
						}
					}
				}
				stream(a.e, a.dir, label, max(a.streamAt[label], past))
			}
		}
	}
	return waiting
}

// listAhead lists, once, the class directories of view a (followed ahead of its readers)
// whose names would come within Distance of readers at its start and whose samples are
// all held: what Next would list as they begin it. Classes not wholly held are left to
// Next once readers come.
func (f *Follower) listAhead(a *followed, held func(uint32) bool, list func(e *Epoch, dir string, label int)) {
	if a.listedAhead || held == nil {
		return
	}
	a.listedAhead = true
	tried := make([]bool, len(a.listed))
	for k := range min(f.opts.Distance, len(a.e.Order)) {
		label := a.e.set.ix.Label(a.e.Order[k])
		if tried[label] || a.listed[label] != listUntried {
			continue
		}
		tried[label] = true
		if a.e.AllHeld(label, held) {
			a.listed[label] = listPending
			list(a.e, a.dir, label)
		}
	}
}

// Ended calls fn, once for each, for the views followed whose readers reached their end
// (a name within the view's probe spacing of its last: Every, or AheadEvery·Every): the
// caller may follow the next epoch ahead of them (FollowAhead).
func (f *Follower) Ended(fn func(e *Epoch, dir string)) {
	for _, a := range f.views {
		if a.ended || a.ahead || a.random || a.lookups < 2*f.opts.Every || a.head+a.every < len(a.e.Order)-1 {
			continue
		}
		a.ended = true
		fn(a.e, a.dir)
	}
}

// FollowAhead follows view e, whose directory is dir, ahead of its readers (see above): its
// class directories wholly held are listed by Next as if readers were about to begin
// it. A view followed already is left as it is.
func (f *Follower) FollowAhead(e *Epoch, dir string) {
	if f.Follows(e) {
		return
	}
	a := f.follow(e, dir)
	a.ahead = true
	a.every = AheadEvery * f.opts.Every
	a.lookups = 2 * f.opts.Every // followed from the readers' first lookup, as were they in it
}

// AllHeld reports whether every sample of class label in view e is held.
func (e *Epoch) AllHeld(label int, held func(uint32) bool) bool {
	for _, k := range e.ByClass[label] {
		if !held(e.Order[k]) {
			return false
		}
	}
	return true
}

// Listing reports whether a listing of class label's directory of view e, whole or a
// chunk of its stream, is pending.
func (f *Follower) Listing(e *Epoch, label int) bool {
	a := f.views[e.Key]
	return a != nil && a.e == e && (a.listed[label] == listPending || a.listed[label] == streamPending)
}

// follow returns view e as followed, following it from now on if it was not.
func (f *Follower) follow(e *Epoch, dir string) *followed {
	a := f.views[e.Key]
	if a == nil || a.e != e {
		if len(f.views) >= followedViews {
			clear(f.views)
		}
		n := len(e.set.classNames)
		a = &followed{e: e, dir: dir, head: -1, reported: -1, sent: bitset.New(len(e.Order)), listed: make([]uint8, n), retry: make([]int, n), every: f.opts.Every}
		a.want, a.streamed, a.streamAt = make([]int, n), make([]int, n), make([]int, n)
		for l := range n {
			a.want[l], a.streamed[l] = -1, -1
		}
		f.views[e.Key] = a
	}
	return a
}

// ReaderListed records that a reader's own listing of view e (whose directory is dir) binds
// the name at index k, as a name looked up ahead: the readers' later lookups count it as
// read once they are past it, and it is not looked up ahead again. It reports false for a
// probe, which the listing leaves to its reader.
func (f *Follower) ReaderListed(e *Epoch, dir string, k uint32) bool {
	if f.IsProbe(e, k) {
		return false
	}
	f.follow(e, dir).sent.Put(k, true)
	return true
}

// ListEntry reports whether a pending listing of view e looks up its entry at index k
// (and counts it as looked up ahead): not a probe, not a name within Every of the readers
// (one may be looking it up right now, and the kernel makes a LOOKUP and a listing's entry
// of the same name wait for each other only after both are answered; in a view followed
// ahead no reader is yet), not a name sent by itself.
func (f *Follower) ListEntry(e *Epoch, k uint32) bool {
	a := f.views[e.Key]
	if a == nil || a.e != e {
		return false
	}
	label := e.set.ix.Label(e.Order[k])
	streaming := a.listed[label] == streamPending
	if streaming {
		a.streamed[label] = max(a.streamed[label], int(k))
	}
	if streaming && !a.ahead && int(k) <= a.head+f.opts.Every && !a.probe(k) && !a.sent.Has(k) {
		f.late++
	}
	if a.probe(k) || (!a.ahead && int(k) <= a.head+f.opts.Every) || !a.sent.Add(k) {
		return false
	}
	return true
}

// Late reports how many names streams brought at or behind the readers (within Every of
// their head, or past it), or passed over to catch up with them: names the streams left
// to the readers' own lookups for falling behind. (The names before a stream's first
// chunk are not counted: readers look those up before any stream starts.)
func (f *Follower) Late() int64 { return f.late }

// Listed records that the listing of class label's directory of view key was answered.
func (f *Follower) Listed(key Key, label int) {
	if a := f.views[key]; a != nil && a.listed[label] == listPending {
		a.listed[label] = listDone
	}
}

// Streamed records that a chunk of the stream of class label's directory of view key was
// read, ending at entry next of its listing (the next chunk's from, at least); next 0: the
// directory ended (or could not be read).
func (f *Follower) Streamed(key Key, label, next int) {
	if a := f.views[key]; a != nil && a.listed[label] == streamPending {
		a.listed[label] = streamIdle
		a.streamAt[label] = max(a.streamAt[label], next)
		if next <= 0 {
			a.listed[label] = streamEnd
		}
	}
}

// Epoch is the view key names, if it is followed.
func (f *Follower) Epoch(key Key) (*Epoch, bool) {
	a := f.views[key]
	if a == nil {
		return nil, false
	}
	return a.e, true
}

// Nearing calls fn, once each, for the names looked up ahead of the readers (by name or by
// a listing) as they come within Distance of the readers' head, in order: the files the
// readers reach next, early enough to bring back what they lost since (package fs looks at
// the page cache for those marked resident). It stops at the first name not looked up
// ahead yet beyond Every of the head, or at a name whose class's listing is not answered
// yet, and goes on from there next time; names within Every of the head that were never
// looked up ahead (a listing leaves them to the readers) are passed.
func (f *Follower) Nearing(fn func(e *Epoch, dir string, k uint32)) {
	for _, a := range f.views {
		if a.random || a.lookups < 2*f.opts.Every {
			continue
		}
		k := max(a.near, a.head+1)
		for end := min(a.head+1+f.opts.Distance, len(a.e.Order)); k < end; k++ {
			if a.sent.Has(uint32(k)) {
				if l := a.listed[a.e.set.ix.Label(a.e.Order[k])]; l == listPending || l == streamPending {
					break // the kernel may not have the name yet: a look would look it up
				}
				fn(a.e, a.dir, uint32(k))
			} else if !a.probe(uint32(k)) && k > a.head+f.opts.Every {
				break
			}
		}
		a.near = k
	}
}

// Ahead calls fn for every name looked up ahead of the readers in views they walk in
// order (index k of view e, in directory dir), up to Distance ahead: the files they read
// next.
func (f *Follower) Ahead(fn func(e *Epoch, dir string, k uint32)) {
	for _, a := range f.views {
		if a.random {
			continue
		}
		for k := a.head + 1; k < min(a.head+1+f.opts.Distance, len(a.e.Order)); k++ {
			if a.sent.Has(uint32(k)) {
				fn(a.e, a.dir, uint32(k))
			}
		}
	}
}
