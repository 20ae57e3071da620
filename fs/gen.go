package fs

import (
	"context"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// genFile is a file generated on demand by the view: an epoch view's DALI file_list or a
// split's samples.csv.
type genFile struct {
	gofs.Inode
	fs   *FS
	size func() int64
	read func(off int64, n int) []byte
	// answer: OPEN is answered (keeping the page cache), on a connection where every OPEN
	// must be (the record view's own: records_local.go).
	answer bool
}

var (
	_ gofs.NodeGetattrer = (*genFile)(nil)
	_ gofs.NodeOpener    = (*genFile)(nil)
	_ gofs.NodeReader    = (*genFile)(nil)
)

// lookupGen returns parent's generated file called name, made with mk on first lookup.
func (f *FS) lookupGen(ctx context.Context, parent *gofs.Inode, name string, out *fuse.EntryOut, mk func() *genFile) *gofs.Inode {
	if ch := parent.GetChild(name); ch != nil {
		ch.Operations().(*genFile).attr(&out.Attr)
		out.Ino = ch.StableAttr().Ino
		return ch
	}
	g := mk()
	g.attr(&out.Attr)
	ch := parent.NewInode(ctx, g, gofs.StableAttr{Mode: syscall.S_IFREG})
	out.Ino = ch.StableAttr().Ino
	return ch
}

func (g *genFile) attr(a *fuse.Attr) { g.fs.fileAttr(a, g.size()) }

// fileAttr fills the attributes of a generated file (file lists, tables, record files) of
// size bytes.
func (f *FS) fileAttr(a *fuse.Attr, size int64) {
	a.Mode = syscall.S_IFREG | 0o444
	a.Size = uint64(size)
	a.Blocks = (uint64(size) + 511) / 512
	a.Blksize = 1 << 17
	a.Nlink = 1
	f.times(a)
}

func (g *genFile) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	g.attr(&out.Attr)
	out.Ino = g.StableAttr().Ino
	return 0
}

// Open answers ENOSYS (see sampleFile.Open), unless the mount answers OPEN for samples:
// one ENOSYS stops the kernel sending OPEN for the whole mount.
func (g *genFile) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if g.answer {
		return nil, fuse.FOPEN_KEEP_CACHE, 0
	}
	return g.fs.openGenerated()
}

// openGenerated answers the OPEN of a generated file: ENOSYS (see sampleFile.Open), or
// where the mount answers OPEN for samples, an open that keeps the page cache.
func (f *FS) openGenerated() (gofs.FileHandle, uint32, syscall.Errno) {
	if f.passthrough.Load() {
		return nil, fuse.FOPEN_KEEP_CACHE, 0
	}
	return nil, 0, syscall.ENOSYS
}

func (g *genFile) Read(ctx context.Context, fh gofs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return fuse.ReadResultData(g.read(off, len(dest))), 0
}
