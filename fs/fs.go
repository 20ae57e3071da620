// Package fs shows a dataset as a read-only FUSE filesystem in which splits and epochs are
// directories. It is the only package besides cmd/cassfs that imports go-fuse.
//
// # Tree
//
//	MOUNT/
//	  <split>/                 one directory per split
//	    epoch-<N>/             the split in epoch N's order; any N >= 0 resolves on lookup,
//	                           a window of them is listed
//	      <class>/<pos>_<name> one directory per label; pos is the zero-padded position in
//	                           the epoch, so names sort bytewise in epoch order
//	      file_list.txt        DALI file_list: "<class>/<pos>_<name> <label>" per line, in
//	                           epoch order
//	  by-uuid/<uuid>.<ext>     every sample by id
//
// The shape follows what DALI's fn.readers.file and torchvision's ImageFolder do with a
// directory (../shared design notes "readers"): an epoch root holds only class directories
// and one plain file; class names sort bytewise into label order (labels are assigned in
// that order at ingest; otherwise names get a zero-padded label prefix); exactly two levels;
// d_type is set; sizes are exact from the first LOOKUP and never change.
//
// # Identity and caching
//
// A sample has one inode number (firstSampleIno + its canonical index) in every epoch, split
// and by-uuid, so the kernel's page cache serves a sample read in an earlier epoch. Content
// is immutable, so entries and attributes are cached by the kernel for a long time, OPEN and
// FLUSH answer ENOSYS (the kernel then stops sending them for the whole mount and keeps the
// page cache: two fewer requests per file), and directories are cached by the kernel
// (FOPEN_CACHE_DIR).
//
// # Metadata and data paths
//
// LOOKUP, GETATTR and READDIR are served from the in-memory index (splits.Index) and never
// touch the database. READ asks a BlobSource (the prefetch cache), which fetches each sample
// once, whole, however many READs ask for it. A LOOKUP in an epoch's class directory tells
// the prefetcher the readers progressed, so the samples that follow in the epoch's order are
// fetched before they are asked for.
//
// # Errors
//
// Unknown names are ENOENT. Failures of the data path are mapped to an errno in one place
// (errno.go), which logs the cause once per failure.
package fs

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cassfs/cassfs/prefetch"
	"github.com/cassfs/cassfs/splits"
	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	lru "github.com/hashicorp/golang-lru/v2"
)

// BlobSource returns sample i's content (canonical index). It must honour ctx and bound its
// own time; the returned slice is not modified by the filesystem.
type BlobSource func(ctx context.Context, i uint32) ([]byte, error)

// Config describes what a mount shows.
type Config struct {
	Index  *splits.Index
	Splits []*splits.Split // one directory each; names must be unique
	Seed   uint64          // seed of the epoch permutations
	// EpochsListed is how many epoch directories (epoch-0 ...) a split directory lists
	// (default 10); any epoch resolves on lookup.
	EpochsListed int
	// EpochViews bounds how many epochs' orders are kept in memory (default 4; each costs 8
	// bytes per sample of its split). Evicted ones are recomputed when used.
	EpochViews int
	// Shard, if set, makes every epoch directory show only this rank's part of the epoch
	// (splits.Shard).
	Shard splits.Shard
	Blobs BlobSource
	// Arrival selects arrival binding (see arrival.go) instead of the fixed name↔sample
	// mapping; Cached must then report whether a sample's blob is in memory.
	Arrival bool
	Cached  func(i uint32) bool
	// Prefetcher, if set, is told of every lookup of a sample in an epoch directory (its
	// position in the epoch), so that it can fetch what comes next.
	Prefetcher *prefetch.Prefetcher
	Logger     *slog.Logger
}

// FS is the filesystem; Root returns its root node for mounting.
type FS struct {
	cfg        Config
	ix         *splits.Index
	classNames []string // directory name of each label
	log        *slog.Logger
	errLog     errorLog
	views      *lru.Cache[viewKey, *epochView]
	mtime      uint64     // every entry's times: when the filesystem was made
	totalBytes uint64     // sum of all samples' sizes, for statfs
	viewMu     sync.Mutex // serializes computing a missing view

	reads, readBytes, filesRead atomic.Int64 // what readers were served
}

// ServeStats counts what readers were served.
type ServeStats struct {
	Reads int64 // READ requests answered with data
	Bytes int64 // bytes returned by them
	Files int64 // reads from offset 0: about one per file read
}

// Stats returns what readers were served so far.
func (f *FS) Stats() ServeStats {
	return ServeStats{Reads: f.reads.Load(), Bytes: f.readBytes.Load(), Files: f.filesRead.Load()}
}

type viewKey struct {
	split string
	n     uint64
	start int
}

// firstSampleIno is the inode number of canonical sample 0. Directory and file_list inodes
// are numbered automatically by go-fuse from 2^63 on, so they never collide.
const firstSampleIno = 1 << 20

// New builds the filesystem.
func New(cfg Config) *FS {
	if cfg.EpochsListed <= 0 {
		cfg.EpochsListed = 10
	}
	if cfg.EpochViews <= 0 {
		cfg.EpochViews = 4
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	views, _ := lru.New[viewKey, *epochView](cfg.EpochViews)
	f := &FS{cfg: cfg, ix: cfg.Index, log: cfg.Logger, views: views, mtime: uint64(time.Now().Unix())}
	f.errLog = errorLog{log: cfg.Logger, window: 10 * time.Second}
	f.classNames = ClassNames(cfg.Index.Labels())
	for i := range uint32(f.ix.Len()) {
		f.totalBytes += uint64(f.ix.Size(i))
	}
	return f
}

// ClassNames returns the directory name of each label: the label's name when the names
// already sort bytewise in label order and are usable as names, otherwise "<label>_<name>"
// with a zero-padded label so that sorting gives label order.
func ClassNames(labels []string) []string {
	ok := true
	for i, l := range labels {
		if !usableName(l) || (i > 0 && labels[i-1] >= l) {
			ok = false
			break
		}
	}
	if ok {
		return labels
	}
	w := len(strconv.Itoa(max(len(labels)-1, 0)))
	out := make([]string, len(labels))
	for i, l := range labels {
		if !usableName(l) {
			l = "class"
		}
		out[i] = padInt(uint64(i), w) + "_" + l
	}
	return out
}

func usableName(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.HasPrefix(s, ".") && !strings.ContainsAny(s, "/\x00\n\r") &&
		strings.TrimRight(s, " \t") == s
}

func padInt(v uint64, width int) string {
	s := strconv.FormatUint(v, 10)
	if len(s) < width {
		s = strings.Repeat("0", width-len(s)) + s
	}
	return s
}

// Root returns the root directory node.
func (f *FS) Root() gofs.InodeEmbedder { return &rootDir{dirNode: dirNode{fs: f}} }

// epochView is one epoch of one split, as the directories need it.
type epochView struct {
	*splits.Epoch
	width int // digits of the position prefix

	listOnce sync.Once
	listSize int64 // size of file_list.txt
	lineOnce sync.Once
	lineEnd  []uint64 // lineEnd[k] = offset just past line k of file_list.txt
	bindOnce sync.Once
	bind     *binding // arrival bindings, made on first use
}

// view returns epoch n of s from position start on (0: the whole epoch).
func (f *FS) view(s *splits.Split, n uint64, start int) *epochView {
	k := viewKey{s.Name, n, start}
	if v, ok := f.views.Get(k); ok {
		return v
	}
	f.viewMu.Lock()
	defer f.viewMu.Unlock()
	if v, ok := f.views.Get(k); ok {
		return v
	}
	e := splits.NewEpoch(f.ix, s, f.cfg.Seed, n, splits.View{Shard: f.cfg.Shard, Start: start})
	v := &epochView{Epoch: e, width: len(strconv.Itoa(max(e.Len-1, 0)))}
	f.views.Add(k, v)
	return v
}

// accessed tells the prefetcher that readers looked up a sample of epoch n of s, in the
// view starting at start. A resumed view is a stream of its own whose first epoch is the
// rest of epoch n; it continues into whole epochs.
func (f *FS) accessed(s *splits.Split, n uint64, start int) {
	if f.cfg.Prefetcher == nil {
		return
	}
	name := s.Name
	if start > 0 {
		name += "@" + strconv.Itoa(start)
	}
	f.cfg.Prefetcher.Access(name, func(e uint64) []uint32 {
		if e == n {
			return f.view(s, e, start).Order
		}
		return f.view(s, e, 0).Order
	}, n)
}

// entryName is the file name of the sample at index k of a view's order: its position in
// the epoch (the same in a resumed view as in the whole one) and its name.
func (f *FS) entryName(v *epochView, k uint32) string {
	return padInt(uint64(v.Start)+uint64(k), v.width) + "_" + f.ix.Name(v.Order[k])
}

// parsePos reads the position prefix of an entry name.
func parsePos(name string, width int) (uint32, bool) {
	if len(name) < width+2 || name[width] != '_' {
		return 0, false
	}
	var pos uint64
	for _, ch := range []byte(name[:width]) {
		if ch < '0' || ch > '9' {
			return 0, false
		}
		pos = pos*10 + uint64(ch-'0')
	}
	return uint32(pos), pos <= 1<<32-1
}

// parseEpoch reads "epoch-<N>" or "epoch-<N>@<K>" (the view resumed at position K), with N
// and K in canonical decimal form.
func parseEpoch(name string) (n uint64, start int, ok bool) {
	s, ok := strings.CutPrefix(name, "epoch-")
	if !ok {
		return 0, 0, false
	}
	s, k, resumed := strings.Cut(s, "@")
	n, ok = parseDecimal(s)
	if !ok {
		return 0, 0, false
	}
	if !resumed {
		return n, 0, true
	}
	kk, ok := parseDecimal(k)
	if !ok || kk > 1<<32-1 {
		return 0, 0, false
	}
	return n, int(kk), true
}

func parseDecimal(s string) (uint64, bool) {
	if s == "" || (len(s) > 1 && s[0] == '0') || s[0] == '+' {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil
}

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
	return parent.NewInode(ctx, &sampleFile{fs: f, i: i}, gofs.StableAttr{Mode: syscall.S_IFREG, Ino: firstSampleIno + uint64(i)})
}

func (f *FS) dirAttr(a *fuse.Attr) {
	a.Mode = syscall.S_IFDIR | 0o555
	a.Nlink = 2
	f.times(a)
}

func (f *FS) times(a *fuse.Attr) {
	a.Mtime, a.Ctime, a.Atime = f.mtime, f.mtime, f.mtime
}
