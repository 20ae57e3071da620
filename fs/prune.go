package fs

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/cassfs/cassfs/splits"
	"github.com/cassfs/cassfs/view"
	gofs "github.com/hanwen/go-fuse/v2/fs"
)

// keptEpochs is how many epoch views of a split directory (or shard directory, or their
// targets) keep their names in go-fuse's tree: the one the readers are in and the one
// before it, which readers finishing an epoch while others begin the next still use.
const keptEpochs = 2

// pruneIdle is how long an older epoch view must have gone without a name linked before it
// is pruned: several readers on one mount (two trainings, each in its own epoch) each keep
// theirs, where pruning by order alone would have each one's next epoch prune the other's
// current one, and its readers look every name up again. A view being read links names as
// its readers go (their probes, the helper's names), so one left this long is done with.
var pruneIdle = 2 * time.Second

// pastEpochs takes the names of past epochs out of go-fuse's tree (see "Past epochs leave
// the tree" in the package doc).
type pastEpochs struct {
	mu      sync.Mutex
	fams    map[epochFamily]*recentEpochs // guarded by mu
	pruned  atomic.Int64                  // names taken out
	dropped atomic.Int64                  // class directories the kernel was told to drop
}

// epochFamily is the epoch views of one directory: a split's, a shard directory's, or
// their targets'.
type epochFamily struct {
	split   string
	shard   splits.Shard
	targets bool
}

// recentEpochs is a family's views with names in the tree, in the order they got their
// first, and the class directories holding them (each with the time of its last link).
type recentEpochs struct {
	order []view.Key
	dirs  map[view.Key][]*classDir
}

// linking is told of every sample (or target) node go-fuse is about to link under parent.
// The first link of a class directory since it was last pruned tracks the directory; then,
// of the views of its family with names in the tree, all but the keptEpochs that got their
// first last are pruned if no name was linked in them for pruneIdle, in the background (a
// request's answer does not wait for it).
func (f *FS) linking(parent *gofs.Inode) {
	d, ok := parent.Operations().(*classDir)
	if !ok {
		return
	}
	// Written at most every 100 ms: every lookup passes here, from every thread.
	if now := time.Now().UnixNano(); now-d.last.Load() > int64(100*time.Millisecond) {
		d.last.Store(now)
	}
	if d.tracked.Swap(true) {
		return
	}
	if old := f.past.track(d); len(old) > 0 {
		go f.past.prune(old)
	}
}

// track records class directory d's view as having names in the tree and returns the
// class directories of the views that are pruned now: beyond the last keptEpochs, and idle
// for pruneIdle.
func (p *pastEpochs) track(d *classDir) (old []*classDir) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fams == nil {
		p.fams = map[epochFamily]*recentEpochs{}
	}
	fam := epochFamily{split: d.key.Split, shard: d.key.Shard, targets: d.targets}
	r := p.fams[fam]
	if r == nil {
		r = &recentEpochs{dirs: map[view.Key][]*classDir{}}
		p.fams[fam] = r
	}
	if _, ok := r.dirs[d.key]; !ok {
		r.order = append(r.order, d.key)
	}
	r.dirs[d.key] = append(r.dirs[d.key], d)
	if len(r.order) <= keptEpochs {
		return nil
	}
	idleSince := time.Now().Add(-pruneIdle).UnixNano()
	kept := r.order[:0]
	for k, key := range r.order {
		if k < len(r.order)-keptEpochs && idle(r.dirs[key], idleSince) {
			old = append(old, r.dirs[key]...)
			delete(r.dirs, key)
			continue
		}
		kept = append(kept, key)
	}
	r.order = kept
	return old
}

// idle reports whether no name was linked in any of dirs since the time since.
func idle(dirs []*classDir, since int64) bool {
	for _, d := range dirs {
		if d.last.Load() > since {
			return false
		}
	}
	return true
}

// prune takes every name out of class directories dirs, and each directory out of its
// epoch directory. The kernel is then told to drop a directory's entry, and with it the
// entries under it, only where every sample it holds was linked again since (in a newer
// epoch): the kernel may drop an inode whose last entry goes at once, page cache and all
// (FUSE has long used generic_delete_inode), and a warm epoch would read it from the
// database again. Dropped, the directory's inode is forgotten and its node, with its
// tables of names, freed; kept, the names go from go-fuse's tables but the tables stay as
// large. A name the kernel asks for again is looked up as any other, and a directory it
// still holds keeps answering. A link go-fuse makes while its directory is being pruned
// can stay behind; the directory is tracked again at its next link.
func (p *pastEpochs) prune(dirs []*classDir) {
	for _, d := range dirs {
		d.tracked.Store(false) // a link from now on tracks it again
		self := d.EmbeddedInode()
		children := d.Children()
		names := make([]string, 0, len(children))
		linkedSince := true
		for name, ch := range children {
			names = append(names, name)
			if _, newest := ch.Parent(); newest == self {
				linkedSince = false
			}
		}
		// Transactional: fails only if a name went meanwhile, and only pruning takes names
		// out.
		if ok, _ := d.RmChild(names...); ok {
			p.pruned.Add(int64(len(names)))
		}
		name, parent := d.Parent()
		if parent == nil || parent.GetChild(name) != self {
			continue
		}
		parent.RmChild(name)
		if linkedSince {
			// Not from a request's goroutine: the kernel takes the directory's lock, which
			// a request being answered may hold.
			if parent.NotifyEntry(name) == 0 {
				p.dropped.Add(1)
			}
		}
	}
}
