package fs

import (
	"context"
	"syscall"

	"github.com/cassfs/cassfs/view"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// listing streams n directory entries made on demand by entry(k), so a directory of
// millions of samples costs no memory to list.
type listing struct {
	n     int
	entry func(k int) fuse.DirEntry
	next  int // guarded by go-fuse's per-handle lock
}

var (
	_ gofs.FileReaddirenter = (*listing)(nil)
	_ gofs.FileSeekdirer    = (*listing)(nil)
)

func (l *listing) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	if l.next >= l.n {
		return nil, 0
	}
	e := l.entry(l.next)
	l.next++
	e.Off = uint64(l.next) // the offset of the entry after this one
	return &e, 0
}

func (l *listing) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	l.next = int(min(off, uint64(l.n)))
	return 0
}

func openListing(n int, entry func(k int) fuse.DirEntry) (gofs.FileHandle, uint32, syscall.Errno) {
	return &listing{n: n, entry: entry}, fuse.FOPEN_CACHE_DIR | fuse.FOPEN_KEEP_CACHE, 0
}

// classListing lists a class directory. Under READDIRPLUS, go-fuse asks it to look each
// listed name up (FileLookuper): the kernel then caches the names it returns with their
// inodes, as if each had been looked up. Names are looked up so for a listing the
// lookahead asked its helper for (lookahead.go, "whole class directories"), and for a
// reader's listing where the helper follows the readers and a lookup by itself would bind
// the name to the same sample: under strict binding always, under arrival binding where
// every sample of the class is at hand (wholeHeld). The probes of a reader's listing go
// out without a node (readerListedLookup): the readers' lookups of them are how the
// follower sees where they are. Otherwise a listing binds nothing (the entry goes out
// without a node, which the kernel takes as a plain entry): without the helper the
// prefetcher follows the readers by their own lookups alone. A class too large
// (listedNodesMax) gets no nodes.
type classListing struct {
	*listing
	d *classDir
	e *view.Epoch
	// held: every sample of the class was at hand (Config.Held) when the listing first
	// looked a name up; 0 not known yet, 1 no, 2 yes (go-fuse's per-handle lock).
	held int8
}

var _ gofs.FileLookuper = (*classListing)(nil)

func (h *classListing) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	d := h.d
	la := d.fs.helper.Load()
	if la != nil && !d.targets {
		if ch, errno, ok := la.listedLookup(ctx, d, h.e, name, out); ok {
			return ch, errno
		}
	}
	if len(h.e.ByClass[d.label]) > listedNodesMax {
		return nil, syscall.EAGAIN // no node: a plain entry
	}
	if la != nil && !d.targets && (d.fs.views.Mode() != view.Arrival || h.wholeHeld()) {
		// Bound as a name looked up ahead: no reader is at it yet (a reader's own lookup
		// would tell the follower and the prefetcher it is).
		return la.readerListedLookup(ctx, d, h.e, name, out)
	}
	return nil, syscall.EAGAIN // no node: a plain entry
}

// listedNodesMax is the most entries of a class directory a listing gives nodes (and binds)
// to: a node costs the kernel an inode and this process one, so a listing of a class of a
// million samples makes none. ImageNet's classes hold about 1,300 samples.
const listedNodesMax = 1 << 14

// wholeHeld reports whether every sample of the listed class was at hand when first asked:
// then a reader's listing binds its names as the helper's would (see "Readers' listings"
// in fs.go).
func (h *classListing) wholeHeld() bool {
	if h.held == 0 {
		h.held = 1
		if held := h.d.fs.cfg.Held; held != nil && h.e.AllHeld(h.d.label, held) {
			h.held = 2
		}
	}
	return h.held == 2
}

// plainListing lists entries without nodes under READDIRPLUS (Mount asks the kernel for
// READDIRPLUS always): a listing of every sample makes no inode, in the kernel or here.
type plainListing struct{ *listing }

var _ gofs.FileLookuper = plainListing{}

func (plainListing) Lookup(context.Context, string, *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, syscall.EAGAIN // no node: a plain entry
}
