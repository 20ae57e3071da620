// Package fs is the FUSE adapter of cassfs: it shows a mount's views (package view) as a
// read-only filesystem in which splits and epochs are directories. It translates what view
// answers into go-fuse nodes, entries, attributes and errnos, and READs into the prefetch
// cache; it decides nothing about names, orders or bindings itself. It is the only package
// besides cmd/cassfs that imports go-fuse, and it must not know CQL.
//
// # Tree
//
//	MOUNT/
//	  <split>/                 one directory per split
//	    epoch-<N>/             the split in epoch N's order; any N >= 0 resolves on lookup,
//	                           a window of them is listed
//	    epoch-<N>@<K>/         the same from position K on (a resumed job)
//	    epoch-<N>[@<K>].targets/  with targets: the same, each sample's target
//	      <class>/<pos>_<name> one directory per label; pos is the zero-padded position in
//	                           the epoch, so names sort bytewise in epoch order
//	      file_list.txt        DALI file_list: "<class>/<pos>_<name> <label>" per line, in
//	                           epoch order
//	    samples.csv            every sample of the split with its metadata (view.Table)
//	  by-uuid/<uuid>.<ext>     every sample by id
//
// The shape follows what DALI's fn.readers.file and torchvision's ImageFolder do with a
// directory: an epoch root holds only class directories and one plain file; class names
// sort bytewise into label order; exactly two levels; d_type is set; sizes are exact from
// the first LOOKUP and never change.
//
// # Identity and caching
//
// A sample has one inode number (firstSampleIno + its canonical index) in every epoch, split
// and by-uuid, so the kernel's page cache serves a sample read in an earlier epoch. Content
// is immutable, so entries and attributes are cached by the kernel for a long time, OPEN and
// FLUSH answer ENOSYS (the kernel then stops sending them for the whole mount and keeps the
// page cache: two fewer requests per file), and directories are cached by the kernel
// (FOPEN_CACHE_DIR). With a disk tier (Config.Backing), where the kernel allows FUSE
// passthrough, OPEN is answered instead, and a sample held in a local file is opened in
// passthrough mode: the kernel reads that file and no READ reaches cassfs (see
// sampleFile.Open for how modes are kept consistent). Where it does not, a READ of such a
// sample is answered by splicing from the file (no copy through cassfs's memory).
//
// With pushing (MountOptions.Push, push.go), blobs are written into the page cache of
// their inode ahead of their readers (FUSE_NOTIFY_STORE), once the kernel knows the inode:
// a later epoch's file is then looked up and read with no other request reaching cassfs.
// Pushing keeps OPEN unanswered, so it excludes passthrough. Requests that do reach
// cassfs are counted by operation (requests.go: FS.RequestStats).
//
// # The read path
//
//	LOOKUP <class>/<pos>_<name>   fs: the class directory's node
//	  → view.Set.Lookup            view: parse, check, report the access, bind the name
//	      → Prefetcher.Access      prefetch: the window moves; fetches start ahead
//	READ                           fs: the sample's node
//	  → BlobSource (Cache.Get)     prefetch: from memory, joining a fetch, or fetching
//	      → prefetch.Fetcher       disk tier, store: the blob, verified against the index
//
// The whole chain, down to the database, and the locks taken across packages are in
// the package doc of mount.
//
// LOOKUP, GETATTR and READDIR are served from the in-memory index and views and never
// touch the database.
//
// # Errors
//
// Unknown names are ENOENT. Failures of the data path are mapped to an errno in one place
// (errno.go), which logs the cause once per failure.
package fs

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cassfs/cassfs/index"
	"github.com/cassfs/cassfs/internal/bitset"
	"github.com/cassfs/cassfs/view"
	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// BlobSource is where READs find a sample's content: *prefetch.Cache, from memory, joining
// the fetch in flight or fetching.
type BlobSource interface {
	// Get returns sample i's content (canonical index). It must honour ctx and bound its
	// own time; the returned slice is not modified by the filesystem.
	Get(ctx context.Context, i uint32) ([]byte, error)
}

// Backing is where samples held in local files are opened from: the disk tier.
type Backing interface {
	// Backing opens a local file holding sample i's verified content (a sample's target
	// follows its blob in the same file), or reports false.
	Backing(i uint32) (*os.File, bool)
}

// Config describes a mount.
type Config struct {
	// Views is what the mount shows: splits, epochs, names and their binding.
	Views *view.Set
	// EpochsListed is how many epoch directories (epoch-0 ...) a split directory lists
	// (default 10); any epoch resolves on lookup.
	EpochsListed int
	Blobs        BlobSource
	// Backing, if set, holds samples in local files (the disk tier). Such samples are served from their files: where the kernel allows it (FUSE passthrough,
	// Linux 6.9+ and root, and no targets), the mount answers OPEN and passes opens of
	// them through, so the kernel reads the file with no request to cassfs; elsewhere
	// OPEN stays unanswered as without a disk tier and each READ of one is answered by
	// splicing from its file (Mount decides, see MountOptions.NoPassthrough).
	Backing Backing
	// Looked, if set, is told of every lookup of sample i (in an epoch or by-uuid): its
	// reader is about to read it, from the page cache if its bytes were pushed there
	// (FS.Push), so no READ may come to say it was read.
	Looked func(i uint32)
	// Held reports whether sample i is at hand for its readers: its blob is cached, to
	// push, or a local file holds it (Backing), whose pages are in the page cache or are
	// pushed as the prefetcher brings its blob. Names are looked up ahead of the readers
	// (StartLookahead) only over held samples.
	Held func(i uint32) bool
	// PagesGone, if set, is told (on a goroutine of its own) when files marked resident
	// were found to have lost their pages: a reclaim, or a residency check that found some
	// short. Whoever passed such samples over as in the page cache should look again.
	PagesGone func()
	// LookedAhead is told when a name of sample i was looked up ahead of its reader: the
	// kernel knows the inode now, so its blob can be pushed (and counts as read: the
	// reader's open and read will not reach cassfs).
	LookedAhead func(i uint32)
	// PushRoom, if set, is asked before a push writes n bytes into the page cache: pushed
	// pages are charged to the daemon's memory cgroup, and past its limit the kernel would
	// reclaim pages pushed before, unread ones among them. On false the push is not made
	// (counted as OverLimit) and the sample's READs carry it, their pages charged to the
	// reader.
	PushRoom func(n int64) bool
	Logger   *slog.Logger
}

// FS is the filesystem; Root returns its root node for mounting.
type FS struct {
	cfg        Config
	views      *view.Set
	ix         *index.Index
	log        *slog.Logger
	errLog     errorLog
	mtime      uint64 // every entry's times: when the filesystem was made
	totalBytes uint64 // sum of all samples' sizes, for statfs

	reads, readBytes, filesRead atomic.Int64 // what readers were served
	lookups                     atomic.Int64 // lookups of samples' names (epochs, by-uuid)
	passedThrough               atomic.Int64 // opens passed through to a backing file
	fromFiles                   atomic.Int64 // READs answered from a backing file
	// passthrough: OPEN is answered and samples with a backing file are passed through;
	// otherwise their READs are spliced from the file. Mount clears it where the kernel
	// refuses passthrough, and for datasets with targets.
	passthrough atomic.Bool

	openMu sync.Mutex
	opens  map[uint32]*openMode // guarded by openMu: samples open now, and how (with Backing)

	requests requestCounters             // requests that reached the daemon, by operation
	server   atomic.Pointer[fuse.Server] // set by Mount; Push writes through it
	// known has bit i set while the kernel knows sample i's inode (set at its lookup,
	// cleared when the kernel forgets it), knownTargets the same for targets: pushing into
	// an inode the kernel does not know is refused (ENOENT), so it is not tried.
	known, knownTargets bitset.Set
	// resident has bit i set while sample i's pages (and its target's) are in the page
	// cache as far as cassfs knows: pushed or read whole, and no READ of it since (push.go).
	resident bitset.Set
	push     pushCounters
	// helper is the lookahead helper's feed while the helper runs (StartLookahead; nil once
	// it is gone), lastHelper the last one, kept for its counters.
	helper, lastHelper atomic.Pointer[lookahead]
}

// ServeStats counts what readers were served.
type ServeStats struct {
	Reads int64 // READ requests answered with data
	Bytes int64 // bytes returned by them
	Files int64 // reads from offset 0: about one per file read
	// PassedThrough counts opens passed through to a backing file (their reads never
	// reach cassfs).
	PassedThrough int64
	// FromFiles counts READs answered from a backing file where opens are not passed
	// through (included in Reads).
	FromFiles int64
	// Lookups counts lookups of samples' names: one per file a reader opens (the kernel
	// caches the name after; a name looked up ahead of its reader counts once, for it),
	// whether its bytes then come from cassfs or the page cache.
	Lookups int64
}

// Stats returns what readers were served so far.
func (f *FS) Stats() ServeStats {
	return ServeStats{Reads: f.reads.Load(), Bytes: f.readBytes.Load(), Files: f.filesRead.Load(), PassedThrough: f.passedThrough.Load(), FromFiles: f.fromFiles.Load(), Lookups: f.lookups.Load()}
}

// served counts a READ answered with bytes off..end of a file.
func (f *FS) served(off, end int64) {
	f.reads.Add(1)
	f.readBytes.Add(end - off)
	if off == 0 {
		f.filesRead.Add(1)
	}
}

// firstSampleIno is the inode number of canonical sample 0, firstTargetIno that of its
// target. Directory and file_list inodes are numbered automatically by go-fuse from 2^63
// on, so they never collide.
const (
	firstSampleIno = 1 << 20
	firstTargetIno = firstSampleIno + 1<<32
)

// New builds the filesystem.
func New(cfg Config) *FS {
	if cfg.EpochsListed <= 0 {
		cfg.EpochsListed = 10
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	ix := cfg.Views.Index()
	f := &FS{cfg: cfg, views: cfg.Views, ix: ix, log: cfg.Logger, mtime: uint64(time.Now().Unix()), opens: map[uint32]*openMode{},
		known: bitset.New(ix.Len()), knownTargets: bitset.New(ix.Len()), resident: bitset.New(ix.Len())}
	f.passthrough.Store(cfg.Backing != nil) // until Mount finds otherwise
	f.errLog = errorLog{log: cfg.Logger, window: 10 * time.Second}
	for i := range uint32(ix.Len()) {
		f.totalBytes += uint64(ix.Size(i))
	}
	return f
}

// Root returns the root directory node.
func (f *FS) Root() gofs.InodeEmbedder { return &rootDir{dirNode: dirNode{fs: f}} }

// sampleAttr fills the attributes of sample i.
func (f *FS) sampleAttr(i uint32, a *fuse.Attr) {
	size := uint64(f.ix.Size(i))
	a.Ino = firstSampleIno + uint64(i)
	a.Mode = syscall.S_IFREG | 0o444
	a.Size = size
	a.Blocks = (size + 511) / 512
	a.Blksize = 1 << 17
	a.Nlink = 1
	f.times(a)
}

// sampleNode returns the (shared) inode of sample i under parent.
func (f *FS) sampleNode(ctx context.Context, parent *gofs.Inode, i uint32, out *fuse.EntryOut) *gofs.Inode {
	f.sampleAttr(i, &out.Attr)
	if f.cfg.Looked != nil {
		f.cfg.Looked(i)
	}
	return f.sampleInode(ctx, parent, i)
}

// sampleInode returns the (shared) inode of sample i under parent, counted as a lookup;
// sampleNode also tells Config.Looked, which a name looked up ahead of its reader does not.
func (f *FS) sampleInode(ctx context.Context, parent *gofs.Inode, i uint32) *gofs.Inode {
	f.lookups.Add(1)
	f.known.Put(i, true)
	return parent.NewInode(ctx, &sampleFile{fs: f, i: i}, gofs.StableAttr{Mode: syscall.S_IFREG, Ino: firstSampleIno + uint64(i)})
}

// targetAttr fills the attributes of sample i's target.
func (f *FS) targetAttr(i uint32, a *fuse.Attr) {
	f.sampleAttr(i, a)
	size := uint64(f.ix.TargetSize(i))
	a.Ino = firstTargetIno + uint64(i)
	a.Size = size
	a.Blocks = (size + 511) / 512
}

// targetNode returns the (shared) inode of sample i's target under parent.
func (f *FS) targetNode(ctx context.Context, parent *gofs.Inode, i uint32, out *fuse.EntryOut) *gofs.Inode {
	f.targetAttr(i, &out.Attr)
	f.knownTargets.Put(i, true)
	return parent.NewInode(ctx, &sampleFile{fs: f, i: i, target: true}, gofs.StableAttr{Mode: syscall.S_IFREG, Ino: firstTargetIno + uint64(i)})
}

func (f *FS) dirAttr(a *fuse.Attr) {
	a.Mode = syscall.S_IFDIR | 0o555
	a.Nlink = 2
	f.times(a)
}

func (f *FS) times(a *fuse.Attr) {
	a.Mtime, a.Ctime, a.Atime = f.mtime, f.mtime, f.mtime
}
