// Package view is the filesystem-free core of a mount: what each directory of a mounted
// dataset shows and which sample each name means. It owns the epoch views of every split
// under one key, the name scheme (epoch directories, class directories, the position
// prefix of entry names, file_list.txt lines, by-uuid names) and the binding of names to
// samples (strict or arrival), and it tells the prefetcher where readers are. The FUSE
// adapter (package fs) only translates what this package answers into nodes, entries,
// attributes and errnos; everything here is tested without a mount.
//
// It must not know FUSE or CQL: it works on the in-memory index (index.Index) and talks
// to the prefetcher through prefetch.Stream.
//
// # Views
//
// A Key names one epoch view: a split, a shard (the mount's own, Config.Shard, or a shard
// directory's), an epoch N and a start position K (0 for the whole epoch; K > 0 for
// epoch-N@K, the epoch resumed at position K). Set.Epoch returns the view
// of a key — the epoch's order restricted to the key's shard, its samples by class and
// the file list — computed once on first use and kept in an LRU bounded by the positions
// its views hold, Config.EpochViews times the dataset's samples (8 bytes per position):
// the views of the 8 ranks of a node, each an eighth of a split, weigh one whole view. An
// evicted view is recomputed when used again (and, under arrival binding, binds anew). Computing a view (a permutation of the whole split) takes no lock shared with
// other keys.
//
// # Names
//
// Within an epoch, the entry of the sample at position p is "<p>_<name>", with p
// zero-padded to the width of the epoch's last position, so that names sort bytewise in
// epoch order, and a resumed view shows the same names as the whole one. Class directories
// are named by ClassNames; file_list.txt holds "<class>/<entry> <label>" per position, in
// epoch order (DALI's file_list format).
//
// # Binding
//
// A Mode chooses how a name of a class directory is bound to a sample when it is looked
// up. Strict: always the sample at its position (the documented permutation, reproducible).
// Arrival: on its first lookup, a sample of the same label, not yet bound in this epoch,
// that has already arrived in the cache — the filesystem form of out-of-order assembly
// (Versaci and Busonera, "Hiding Latencies in Network-Based Image Loading for Deep
// Learning", 2025), so no reader waits behind a straggler. If none has arrived, the
// earliest unbound sample of that label in the epoch's order: the one the prefetcher asked
// for first, so the one most likely to arrive next.
//
// Arrival's invariants: each position binds exactly one sample and keeps it (the kernel
// learns the size at LOOKUP; content never changes under a name); a sample is bound at
// most once per epoch; a class directory of k names binds exactly its label's k samples. So
// every sample appears exactly once per epoch with its label. Listing binds nothing: under
// arrival binding the adapter looks listed names up (READDIRPLUS) only where every sample
// of the class directory has arrived, so that each binds an arrived sample as its own
// lookup would (package fs: the lookahead's listings).
// Bindings live with the epoch's view: a reader that returns to an epoch evicted since may
// see names bound anew; names it already looked up keep their inodes in the kernel.
//
// # Streams
//
// Each split a reader walks is a stream for the prefetcher: the whole split's epochs one
// after another, or, for a resumed view epoch-N@K, the rest of epoch N followed by whole
// epochs; each shard directory of a split (<split>/shard-R-of-W/, ParseShardName) is a
// stream of its own, over rank R's part of every epoch. A Set keeps the streams of its
// most recent keys (maxStreams). Every lookup of a sample in an epoch's class directory reports the stream and the
// epoch to Config.Progress, which pulls the epochs' orders from the stream when it needs
// them.
//
// # Concurrency
//
// A Set and its Epochs are safe for concurrent use. Locks: Set.mu guards the view LRU and
// the stream map and is held for map operations only; each Epoch's binding has a lock of
// its own, held while it asks Config.Arrived (which must not call back into this package).
package view

import (
	"fmt"
	"path"
	"strconv"
	"sync"
	"time"

	"github.com/cassfs/cassfs/index"
	"github.com/cassfs/cassfs/internal/bitset"
	"github.com/cassfs/cassfs/prefetch"
	"github.com/cassfs/cassfs/splits"
	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// Mode is how names are bound to samples: Strict or Arrival. It is a flag value
// (String/Set/Type), parsed once at the command line and carried down.
type Mode int

const (
	// Strict binds every name to the sample at its position.
	Strict Mode = iota
	// Arrival binds a name, on first lookup, to an arrived sample of its class.
	Arrival
)

// String is the mode's name on the command line.
func (m Mode) String() string {
	if m == Arrival {
		return "arrival"
	}
	return "strict"
}

// Set parses "strict" or "arrival".
func (m *Mode) Set(s string) error {
	switch s {
	case "strict":
		*m = Strict
	case "arrival":
		*m = Arrival
	default:
		return fmt.Errorf("%q: use strict or arrival", s)
	}
	return nil
}

// Type names the flag's value in help texts.
func (m *Mode) Type() string { return "mode" }

// Progress learns which epoch readers are in: prefetch.Prefetcher.
type Progress interface {
	Access(s prefetch.Stream, epoch uint64)
	// AccessN reports n accesses at once (names looked up ahead of the readers, whose
	// reads then reach no filesystem; see Set.Advance).
	AccessN(s prefetch.Stream, epoch uint64, n int)
}

// Config describes what a mount shows.
type Config struct {
	Index  *index.Index
	Splits []*splits.Split // one directory each; names must be unique
	Seed   uint64          // seed of the epoch permutations
	// Shard, if set, makes every epoch view show only this rank's part of the epoch
	// (splits.Shard).
	Shard splits.Shard
	// EpochViews bounds the epoch views kept in memory (default 4), in views of the whole
	// dataset: a view weighs the positions it holds, so a shard's view of 1/W of a split
	// weighs 1/W of it, and the views of every rank of a node fit where one whole view does.
	EpochViews int
	// Mode binds names to samples (default Strict).
	Mode Mode
	// Arrived reports whether sample i's blob is at hand (the cache has it); required for
	// Arrival.
	Arrived func(i uint32) bool
	// Progress, if set, is told of every lookup of a sample in an epoch view, and of the
	// samples passed in each shard of a record view.
	Progress Progress
	// ShardBytes is the size a shard of a record view aims at (default DefaultShardBytes;
	// see records.go).
	ShardBytes int64
	// ModTime is the time of every entry and of every record file's members (default: when
	// the set is made, to the second); a record file made with the same one is the same bytes.
	ModTime time.Time
}

// Key names one epoch view: epoch Epoch of split Split, rank Shard's part of it (the zero
// Shard: all of it), from position Start on.
type Key struct {
	Split string
	Shard splits.Shard
	Epoch uint64
	Start uint32
}

// Set is every view of one mount.
type Set struct {
	cfg        Config
	ix         *index.Index
	byName     map[string]*splits.Split
	classNames []string
	binding    binding

	mu      sync.Mutex
	views   *simplelru.LRU[Key, *slot]         // guarded by mu
	weight  int                                // guarded by mu: positions of the views held (views' eviction callback)
	limit   int                                // EpochViews × the dataset's samples
	streams *simplelru.LRU[streamKey, *Stream] // guarded by mu: the streams of recent keys (maxStreams)
	tables  map[string]*Table                  // guarded by mu: samples.csv by split, made on first use
	modTime time.Time                          // of every entry, and of record files' members

	headerOnce sync.Once
	header     [tarBlock]byte // a record member's header, as a template (ustarHeader)
}

// slot holds one view, computed once by whoever asks first.
type slot struct {
	once   sync.Once
	e      *Epoch
	weight int // positions of the view (known before it is computed)
}

// maxStreams bounds the streams a Set keeps (each a few words): a long job that visits many
// shards and resumed views leaves at most this many behind. A stream dropped here and
// needed again is made anew; the prefetcher tells streams apart by name, so it is the same
// stream to it.
const maxStreams = 1024

type streamKey struct {
	split string
	shard splits.Shard
	start uint32
}

// New returns the views of cfg's splits.
func New(cfg Config) *Set {
	if cfg.EpochViews <= 0 {
		cfg.EpochViews = 4
	}
	if cfg.ShardBytes <= 0 {
		cfg.ShardBytes = DefaultShardBytes
	}
	streams, _ := simplelru.NewLRU[streamKey, *Stream](maxStreams, nil)
	s := &Set{
		cfg:        cfg,
		ix:         cfg.Index,
		byName:     map[string]*splits.Split{},
		classNames: ClassNames(cfg.Index.Labels()),
		limit:      cfg.EpochViews * max(cfg.Index.Len(), 1),
		streams:    streams,
		binding:    strictBinding{},
		modTime:    cfg.ModTime,
	}
	if s.modTime.IsZero() {
		s.modTime = time.Now().Truncate(time.Second)
	}
	// The count bound is loose: the weight (positions) is what evicts (Set.Epoch), and
	// every view leaving, for either reason, takes its weight with it.
	s.views, _ = simplelru.NewLRU[Key, *slot](1<<16, func(_ Key, old *slot) { s.weight -= old.weight })
	if cfg.Mode == Arrival {
		s.binding = &arrivalBinding{arrived: cfg.Arrived}
	}
	for _, sp := range cfg.Splits {
		s.byName[sp.Name] = sp
	}
	return s
}

// Index is the dataset's index.
func (s *Set) Index() *index.Index { return s.ix }

// Mode is how names are bound.
func (s *Set) Mode() Mode { return s.cfg.Mode }

// Splits are the splits shown, in the order given.
func (s *Set) Splits() []*splits.Split { return s.cfg.Splits }

// Split returns the split called name.
func (s *Set) Split(name string) (*splits.Split, bool) {
	sp, ok := s.byName[name]
	return sp, ok
}

// ClassNames is the directory name of each label.
func (s *Set) ClassNames() []string { return s.classNames }

// Class returns the label whose class directory is called name.
func (s *Set) Class(name string) (int, bool) {
	for l, n := range s.classNames {
		if n == name {
			return l, true
		}
	}
	return 0, false
}

// EpochKey resolves an epoch directory's name in split: "epoch-<N>" or "epoch-<N>@<K>",
// with K at most the length of the shard's epoch (at the end is an empty view). The view
// is of the mount's shard (Config.Shard).
func (s *Set) EpochKey(split, name string) (Key, bool) {
	return s.EpochKeyIn(split, s.cfg.Shard, name)
}

// EpochKeyIn is EpochKey in a shard directory of split (see ParseShardName): the view is of
// shard sh.
func (s *Set) EpochKeyIn(split string, sh splits.Shard, name string) (Key, bool) {
	sp, ok := s.byName[split]
	if !ok {
		return Key{}, false
	}
	n, start, ok := ParseEpochName(name)
	if !ok || uint64(start) > uint64(sh.Len(len(sp.Members))) {
		return Key{}, false
	}
	return Key{Split: split, Shard: sh, Epoch: n, Start: start}, true
}

// Shard is the mount's own shard: what a split's epoch directories show (the zero Shard:
// whole epochs).
func (s *Set) Shard() splits.Shard { return s.cfg.Shard }

// Epoch returns the view of k, which must name a split of the set and a start within its
// epoch (EpochKey checks both).
func (s *Set) Epoch(k Key) *Epoch {
	s.mu.Lock()
	sl, ok := s.views.Get(k)
	if !ok {
		// A resumed view holds the whole shard's order (its Order is a slice of it).
		sl = &slot{weight: max(k.Shard.Len(len(s.byName[k.Split].Members)), 1)}
		s.weight += sl.weight
		s.views.Add(k, sl)
		// Evict by weight, oldest first, keeping the view just added.
		for s.weight > s.limit && s.views.Len() > 1 {
			s.views.RemoveOldest()
		}
	}
	s.mu.Unlock()
	// The permutation is computed outside mu: other keys are not held up, and lookups of
	// this one wait for the first.
	sl.once.Do(func() { sl.e = s.newEpoch(k) })
	return sl.e
}

// NextEpoch is the view of the epoch after view e's, in the same split and shard, from its
// start, and its directory beside dir (e's): false where dir is not named as e's epoch
// directory (a targets directory, say) or e is the last epoch there is.
func (s *Set) NextEpoch(e *Epoch, dir string) (*Epoch, string, bool) {
	parent, base := path.Split(dir)
	n, _, ok := ParseEpochName(base)
	if !ok || n != e.Key.Epoch || n == 1<<64-1 {
		return nil, "", false
	}
	k := e.Key
	k.Epoch, k.Start = n+1, 0
	return s.Epoch(k), parent + EpochName(n+1), true
}

func (s *Set) newEpoch(k Key) *Epoch {
	sp := s.byName[k.Split]
	e := splits.NewEpoch(s.ix, sp, s.cfg.Seed, k.Epoch, splits.View{Shard: k.Shard, Start: k.Start})
	return &Epoch{Epoch: e, Key: k, set: s, width: len(strconv.Itoa(max(int(e.Len)-1, 0))), stream: s.stream(sp, k)}
}

// stream returns the prefetch stream an epoch view belongs to.
func (s *Set) stream(sp *splits.Split, k Key) *Stream {
	sk := streamKey{sp.Name, k.Shard, k.Start}
	s.mu.Lock()
	defer s.mu.Unlock()
	st, _ := s.streams.Get(sk)
	if st == nil {
		name := sp.Name
		if k.Shard != s.cfg.Shard {
			name += "/" + ShardName(k.Shard)
		}
		if k.Start > 0 {
			name += "@" + strconv.FormatUint(uint64(k.Start), 10)
		}
		// A resumed view is a stream of its own whose first epoch is the rest of the epoch
		// it was first looked up in; it continues into whole epochs.
		st = &Stream{set: s, split: sp.Name, shard: k.Shard, start: k.Start, first: k.Epoch, name: name}
		s.streams.Add(sk, st)
	}
	return st
}

// Lookup resolves the entry name in the class directory of label in view e: the sample it
// shows, bound now if this is the name's first lookup. It reports the access to the
// prefetcher. A name that is not in the directory is false.
func (s *Set) Lookup(e *Epoch, label int, name string) (uint32, bool) {
	return s.lookup(e, label, name, false, true)
}

// LookupAhead is Lookup for a name looked up ahead of its reader (package fs makes the
// kernel do so): the name is bound as by Lookup, but no access is reported; the reader's
// read of it is reported with Advance once a later lookup of theirs shows they got there.
func (s *Set) LookupAhead(e *Epoch, label int, name string) (uint32, bool) {
	return s.lookup(e, label, name, false, false)
}

// BoundAhead is the sample index k of view e shows: LookupAhead by position, for a name
// looked up ahead (bound already; under arrival binding one not bound yet is bound now, as
// by LookupAhead). It formats and parses no name.
func (s *Set) BoundAhead(e *Epoch, k uint32) uint32 {
	return s.binding.bind(e, k)
}

// Advance reports n accesses of view e that reached no filesystem: readers read n names
// that were looked up ahead for them.
func (s *Set) Advance(e *Epoch, n int) {
	if s.cfg.Progress != nil && n > 0 {
		s.cfg.Progress.AccessN(e.stream, e.N, n)
	}
}

// EntryPos is the index in view e's order of the entry name, if it is one of e's.
func (e *Epoch) EntryPos(name string) (uint32, bool) {
	pos, ok := ParseEntryPos(name, e.width)
	if !ok || pos < e.Start || pos >= e.Len {
		return 0, false
	}
	return pos - e.Start, true
}

// LookupTarget is Lookup in the .targets twin of view e: the name is the target's, and the
// sample is the one the same position of the view shows (bound together, whichever
// directory is looked up first).
func (s *Set) LookupTarget(e *Epoch, label int, name string) (uint32, bool) {
	if !s.ix.HasTargets() {
		return 0, false
	}
	return s.lookup(e, label, name, true, true)
}

func (s *Set) lookup(e *Epoch, label int, name string, targets, report bool) (uint32, bool) {
	pos, ok := ParseEntryPos(name, e.width)
	if !ok || pos < e.Start || pos >= e.Len {
		return 0, false
	}
	k := pos - e.Start
	i := e.Order[k]
	if s.ix.Label(i) != label {
		return 0, false
	}
	if targets && name[e.width+1:] != s.ix.TargetName(i) || !targets && name[e.width+1:] != s.ix.Name(i) {
		return 0, false
	}
	if report && s.cfg.Progress != nil && e.firstLookup(k) {
		s.cfg.Progress.Access(e.stream, e.N)
	}
	return s.binding.bind(e, k), true
}

// firstLookup reports whether a lookup of index k of the view's order is one the
// prefetcher should count. Readers of a dataset with targets look up each position twice
// (the image and its target); the prefetcher counts positions, so only the first counts.
// Without targets every lookup counts (the kernel caches names, so repeats are rare).
func (e *Epoch) firstLookup(k uint32) bool {
	if !e.set.ix.HasTargets() {
		return true
	}
	e.seenOnce.Do(func() { e.seen = bitset.New(len(e.Order)) })
	return e.seen.Add(k)
}

// UUIDName is sample i's name in by-uuid: its id and its file name's extension.
func (s *Set) UUIDName(i uint32) string {
	return s.ix.ID(i).String() + path.Ext(s.ix.Name(i))
}

// Stream is the prefetch stream of a split (or of a resumed view of it): it implements
// prefetch.Stream over the set's views.
type Stream struct {
	set   *Set
	split string
	shard splits.Shard
	start uint32 // > 0: a resumed view
	first uint64 // the epoch a resumed view resumes
	name  string
}

var _ prefetch.Stream = (*Stream)(nil)

// Name is "<split>", "<split>/shard-<R>-of-<W>" for a shard directory, and "@<start>" after
// either for a resumed view: unique among the set's streams.
func (st *Stream) Name() string { return st.name }

// Order is the canonical sample of each position of the stream's epoch.
func (st *Stream) Order(epoch uint64) []uint32 {
	start := uint32(0)
	if epoch == st.first {
		start = st.start
	}
	return st.set.Epoch(Key{Split: st.split, Shard: st.shard, Epoch: epoch, Start: start}).Order
}

// Epoch is one view of one epoch of one split.
type Epoch struct {
	*splits.Epoch
	Key    Key
	set    *Set
	width  int // digits of the position prefix
	stream *Stream

	lists [2]fileListState // file_list.txt, and that of the .targets twin

	seenOnce sync.Once
	seen     bitset.Set // with targets: positions looked up (in either directory)

	bindOnce sync.Once
	bound    *arrivalState // arrival bindings, made on first use

	recOnce sync.Once
	rec     *Records // the record view, made on first use
}
