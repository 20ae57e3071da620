package fs

import (
	"context"
	"os"
	"slices"
	"sync/atomic"
	"syscall"

	"github.com/cassfs/cassfs/splits"
	"github.com/cassfs/cassfs/view"
	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// dirNode is what every directory shares: attributes, and listing through a handle that the
// kernel may cache (FOPEN_CACHE_DIR), with stable offsets so seekdir works at any size.
type dirNode struct {
	gofs.Inode
	fs *FS
}

func (d *dirNode) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	d.fs.dirAttr(&out.Attr)
	out.Ino = d.StableAttr().Ino
	return 0
}

func dirEntry(name string) fuse.DirEntry {
	return fuse.DirEntry{Name: name, Mode: syscall.S_IFDIR}
}

// lookupDir returns the existing child called name, or makes it with mk. Reusing the child
// keeps one inode per directory however often the kernel looks it up again.
func (f *FS) lookupDir(ctx context.Context, parent *gofs.Inode, name string, out *fuse.EntryOut, mk func() gofs.InodeEmbedder) *gofs.Inode {
	f.dirAttr(&out.Attr)
	if ch := parent.GetChild(name); ch != nil {
		out.Ino = ch.StableAttr().Ino
		return ch
	}
	ch := parent.NewInode(ctx, mk(), gofs.StableAttr{Mode: syscall.S_IFDIR})
	out.Ino = ch.StableAttr().Ino
	return ch
}

// rootDir holds one directory per split and by-uuid; the record view's own root (records,
// MountRecords) one directory per split, showing only the split's record views.
type rootDir struct {
	dirNode
	records bool
}

var (
	_ gofs.NodeLookuper       = (*rootDir)(nil)
	_ gofs.NodeOpendirHandler = (*rootDir)(nil)
	_ gofs.NodeGetattrer      = (*rootDir)(nil)
	_ gofs.NodeStatfser       = (*rootDir)(nil)
)

func (r *rootDir) names() []string {
	var names []string
	for _, s := range r.fs.views.Splits() {
		names = append(names, s.Name)
	}
	if !r.records {
		names = append(names, view.ByUUIDName)
	}
	slices.Sort(names)
	return names
}

func (r *rootDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if name == view.ByUUIDName && !r.records {
		return r.fs.lookupDir(ctx, r.EmbeddedInode(), name, out, func() gofs.InodeEmbedder { return &byUUIDDir{dirNode: dirNode{fs: r.fs}} }), 0
	}
	s, ok := r.fs.views.Split(name)
	if !ok {
		return nil, syscall.ENOENT
	}
	return r.fs.lookupDir(ctx, r.EmbeddedInode(), name, out, func() gofs.InodeEmbedder {
		return &splitDir{dirNode: dirNode{fs: r.fs}, split: s, shard: r.fs.views.Shard(), records: r.records}
	}), 0
}

func (r *rootDir) OpendirHandle(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	names := r.names()
	return openListing(len(names), func(k int) fuse.DirEntry { return dirEntry(names[k]) })
}

func (r *rootDir) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	out.Bsize = 4096
	out.Frsize = 4096
	out.Blocks = (r.fs.totalBytes + 4095) / 4096
	out.Files = uint64(r.fs.ix.Len())
	out.NameLen = 255
	return 0
}

// splitDir lists a window of epochs and the split's samples.csv, and resolves any epoch and
// any shard directory (shard-R-of-W: a splitDir of rank R's part of every epoch, with the
// same epochs and no samples.csv, not listed).
type splitDir struct {
	dirNode
	split   *splits.Split
	shard   splits.Shard // what its epochs show: the mount's shard, or a shard directory's
	inShard bool         // a shard directory
	records bool         // on the record view's own connection: its record views only
}

var (
	_ gofs.NodeLookuper       = (*splitDir)(nil)
	_ gofs.NodeOpendirHandler = (*splitDir)(nil)
	_ gofs.NodeGetattrer      = (*splitDir)(nil)
)

func (d *splitDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if sh, ok := view.ParseShardName(name); ok && !d.inShard {
		sh.Pad = d.shard.Pad // --shard-pad: every shard directory pads as the mount's shard does
		return d.fs.lookupDir(ctx, d.EmbeddedInode(), name, out, func() gofs.InodeEmbedder {
			return &splitDir{dirNode: dirNode{fs: d.fs}, split: d.split, shard: sh, inShard: true, records: d.records}
		}), 0
	}
	if key, ok := d.fs.views.RecordsKeyIn(d.split.Name, d.shard, name); ok {
		return d.fs.lookupDir(ctx, d.EmbeddedInode(), name, out, func() gofs.InodeEmbedder {
			return &recordsDir{dirNode: dirNode{fs: d.fs}, key: key, path: d.Path(nil) + "/" + name, own: d.records}
		}), 0
	}
	if d.records {
		return nil, syscall.ENOENT
	}
	if name == view.SamplesName && !d.inShard {
		t, _ := d.fs.views.Table(d.split.Name)
		return d.fs.lookupGen(ctx, d.EmbeddedInode(), name, out, func() *genFile {
			return &genFile{fs: d.fs, size: t.Size, read: t.Read}
		}), 0
	}
	key, ok := d.fs.views.EpochKeyIn(d.split.Name, d.shard, name)
	targets := false
	if !ok {
		key, ok = d.fs.views.TargetsKeyIn(d.split.Name, d.shard, name)
		targets = true
	}
	if !ok {
		return nil, syscall.ENOENT
	}
	return d.fs.lookupDir(ctx, d.EmbeddedInode(), name, out, func() gofs.InodeEmbedder {
		return &epochDir{dirNode: dirNode{fs: d.fs}, key: key, targets: targets}
	}), 0
}

func (d *splitDir) OpendirHandle(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	// epoch-0, epoch-0.wds, ... (with targets: epoch-0, epoch-0.targets, epoch-0.wds,
	// ...), then samples.csv.
	per := 2
	if d.fs.views.HasTargets() {
		per = 3
	}
	if d.records { // epoch-0.wds, epoch-1.wds, ...
		return openListing(d.fs.cfg.EpochsListed, func(k int) fuse.DirEntry {
			return dirEntry(view.EpochName(uint64(k)) + view.RecordsSuffix)
		})
	}
	n := d.fs.cfg.EpochsListed * per
	listed := n + 1
	if d.inShard {
		listed = n // no samples.csv
	}
	return openListing(listed, func(k int) fuse.DirEntry {
		if k == n {
			return fuse.DirEntry{Name: view.SamplesName, Mode: syscall.S_IFREG}
		}
		name := view.EpochName(uint64(k / per))
		switch {
		case k%per == per-1:
			name += view.RecordsSuffix
		case k%per == 1:
			name += view.TargetsSuffix
		}
		return dirEntry(name)
	})
}

// epochDir holds one directory per class and file_list.txt, of one epoch view: its
// samples, or (targets) their targets.
type epochDir struct {
	dirNode
	key     view.Key
	targets bool
}

var (
	_ gofs.NodeLookuper       = (*epochDir)(nil)
	_ gofs.NodeOpendirHandler = (*epochDir)(nil)
	_ gofs.NodeGetattrer      = (*epochDir)(nil)
)

func (d *epochDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if name == view.FileListName {
		return d.fs.lookupGen(ctx, d.EmbeddedInode(), name, out, func() *genFile {
			views, key, targets := d.fs.views, d.key, d.targets
			return &genFile{fs: d.fs,
				size: func() int64 { return views.Epoch(key).FileListSize(targets) },
				read: func(off int64, n int) []byte { return views.Epoch(key).ReadFileList(off, n, targets) }}
		}), 0
	}
	label, ok := d.fs.views.Class(name)
	if !ok {
		return nil, syscall.ENOENT
	}
	return d.fs.lookupDir(ctx, d.EmbeddedInode(), name, out, func() gofs.InodeEmbedder {
		return &classDir{dirNode: dirNode{fs: d.fs}, key: d.key, label: label, targets: d.targets, path: d.Path(nil) + "/" + name}
	}), 0
}

func (d *epochDir) OpendirHandle(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	// Class names sort before or after "file_list.txt"; readers sort for themselves, but a
	// sorted listing is what people expect from ls -f.
	names := append(slices.Clone(d.fs.views.ClassNames()), view.FileListName)
	slices.Sort(names)
	return openListing(len(names), func(k int) fuse.DirEntry {
		if names[k] == view.FileListName {
			return fuse.DirEntry{Name: view.FileListName, Mode: syscall.S_IFREG}
		}
		return dirEntry(names[k])
	})
}

// classDir lists one class's samples (or targets) of an epoch view in epoch order.
type classDir struct {
	dirNode
	key     view.Key
	label   int
	targets bool
	// path is the directory's path in the mount, kept from its making: go-fuse's tree
	// loses it once the directory is pruned (prune.go) while the kernel may still use it.
	path    string
	tracked atomic.Bool  // its names are tracked for pruning
	last    atomic.Int64 // when a name was last linked in it (Unix ns; prune.go)
}

var (
	_ gofs.NodeLookuper       = (*classDir)(nil)
	_ gofs.NodeOpendirHandler = (*classDir)(nil)
	_ gofs.NodeGetattrer      = (*classDir)(nil)
)

func (d *classDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	e := d.fs.views.Epoch(d.key)
	if d.targets {
		i, ok := d.fs.views.LookupTarget(e, d.label, name)
		if !ok {
			return nil, syscall.ENOENT
		}
		return d.fs.targetNode(ctx, d.EmbeddedInode(), i, out), 0
	}
	la := d.fs.helper.Load()
	if la == nil {
		i, ok := d.fs.views.Lookup(e, d.label, name)
		if !ok {
			return nil, syscall.ENOENT
		}
		return d.fs.sampleNode(ctx, d.EmbeddedInode(), i, out), 0
	}
	k, ok := e.EntryPos(name)
	if !ok {
		return nil, syscall.ENOENT
	}
	if la.isPending(d.key, k) { // the helper's lookup (lookahead.go)
		i, ok := d.fs.views.LookupAhead(e, d.label, name)
		if !ok {
			return nil, syscall.ENOENT
		}
		la.lookedUp(d.key, k, i)
		d.fs.sampleAttr(i, &out.Attr)
		return d.fs.sampleInode(ctx, d.EmbeddedInode(), i), 0
	}
	i, ok := d.fs.views.Lookup(e, d.label, name)
	if !ok {
		return nil, syscall.ENOENT
	}
	la.readerAt(e, d.path, k)
	return d.fs.sampleNode(ctx, d.EmbeddedInode(), i, out), 0
}

func (d *classDir) OpendirHandle(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	e := d.fs.views.Epoch(d.key)
	members := e.ByClass[d.label]
	ino := uint64(firstSampleIno)
	if d.targets {
		ino = firstTargetIno
	}
	h, fl, errno := openListing(len(members), func(j int) fuse.DirEntry {
		k := members[j]
		return fuse.DirEntry{Name: e.NameAt(k, d.targets), Mode: syscall.S_IFREG, Ino: ino + uint64(e.Order[k])}
	})
	return &classListing{listing: h.(*listing), d: d, e: e}, fl, errno
}

// byUUIDDir holds every sample as <uuid><ext>.
type byUUIDDir struct {
	dirNode
}

var (
	_ gofs.NodeLookuper       = (*byUUIDDir)(nil)
	_ gofs.NodeOpendirHandler = (*byUUIDDir)(nil)
	_ gofs.NodeGetattrer      = (*byUUIDDir)(nil)
)

func (d *byUUIDDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	i, ok := d.fs.views.FindUUIDName(name)
	if !ok {
		return nil, syscall.ENOENT
	}
	return d.fs.sampleNode(ctx, d.EmbeddedInode(), i, out), 0
}

func (d *byUUIDDir) OpendirHandle(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	h, fl, errno := openListing(d.fs.ix.Len(), func(k int) fuse.DirEntry {
		return fuse.DirEntry{Name: d.fs.views.UUIDName(uint32(k)), Mode: syscall.S_IFREG, Ino: firstSampleIno + uint64(k)}
	})
	return plainListing{h.(*listing)}, fl, errno
}

// sampleFile is one sample's content, or its target's. The node is shared by every
// directory that shows the sample (one inode per sample, one per target).
type sampleFile struct {
	gofs.Inode
	fs     *FS
	i      uint32
	target bool
}

var (
	_ gofs.NodeGetattrer   = (*sampleFile)(nil)
	_ gofs.NodeOpener      = (*sampleFile)(nil)
	_ gofs.NodeFlusher     = (*sampleFile)(nil)
	_ gofs.NodeReader      = (*sampleFile)(nil)
	_ gofs.NodeGetxattrer  = (*sampleFile)(nil)
	_ gofs.NodeListxattrer = (*sampleFile)(nil)
)

// Getxattr answers the sample's extended attributes (view.Set.Attr) from memory; an
// unknown name is ENODATA. Setting or removing one never gets here: the mount is
// read-only, so the kernel answers EROFS itself.
func (s *sampleFile) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	v, ok := s.fs.views.Attr(s.i, attr)
	if !ok {
		return 0, syscall.ENODATA
	}
	return xattrCopy(dest, v)
}

// Listxattr lists the sample's extended attribute names, each ending in a NUL byte.
func (s *sampleFile) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	var list []byte
	for _, n := range s.fs.views.AttrNames(s.i) {
		list = append(append(list, n...), 0)
	}
	return xattrCopy(dest, list)
}

// xattrCopy answers a GETXATTR or LISTXATTR: the value if dest holds it, else ERANGE with
// the size needed (a request with an empty dest asks for the size only; go-fuse turns that
// ERANGE into the size answer).
func xattrCopy(dest, v []byte) (uint32, syscall.Errno) {
	if len(dest) < len(v) {
		return uint32(len(v)), syscall.ERANGE
	}
	return uint32(copy(dest, v)), 0
}

func (s *sampleFile) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if s.target {
		s.fs.targetAttr(s.i, &out.Attr)
		return 0
	}
	s.fs.sampleAttr(s.i, &out.Attr)
	return 0
}

// Open answers ENOSYS on purpose unless opens are passed through to backing files:
// with FUSE_NO_OPEN_SUPPORT the kernel then treats every open of the mount as successful
// without asking again and keeps the page cache, saving a request per file. Writes never
// get here: the mount is read-only.
//
// With Config.Backing where the kernel allows passthrough (FS.passthrough, set by Mount),
// a sample held in a local file is opened in passthrough mode (the
// kernel reads the file itself), others in cached mode. The kernel refuses (EIO)
// an open whose mode differs from that of the inode's opens still open (fs/fuse/iomode.c,
// fuse_file_io_open), so while a sample is open every further open gets the same mode; a
// passthrough sample whose file is gone meanwhile is opened for direct I/O, which takes
// no mode.
func (s *sampleFile) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	f := s.fs
	if !f.passthrough.Load() {
		return nil, 0, syscall.ENOSYS
	}
	f.openMu.Lock()
	m := f.opens[s.i]
	f.openMu.Unlock()
	var file *os.File
	if m == nil || m.passthrough {
		file, _ = f.cfg.Backing.Backing(s.i) // verifies the file: not under the lock
	}
	f.openMu.Lock()
	defer f.openMu.Unlock()
	m = f.opens[s.i]
	if m == nil {
		m = &openMode{passthrough: file != nil}
		f.opens[s.i] = m
	}
	m.n++
	switch {
	case m.passthrough && file != nil:
		f.passedThrough.Add(1)
		return &passthroughFile{s: s, f: file}, 0, 0
	case m.passthrough:
		return &cachedFile{s: s}, fuse.FOPEN_DIRECT_IO, 0
	}
	if file != nil {
		file.Close()
	}
	return &cachedFile{s: s}, fuse.FOPEN_KEEP_CACHE, 0
}

// openMode is how a sample's open files are open (with Config.Backing).
type openMode struct {
	n           int  // files open
	passthrough bool // in passthrough mode (else cached)
}

// release ends one open of the sample.
func (s *sampleFile) release() {
	s.fs.openMu.Lock()
	defer s.fs.openMu.Unlock()
	if m := s.fs.opens[s.i]; m != nil {
		if m.n--; m.n <= 0 {
			delete(s.fs.opens, s.i)
		}
	}
}

// passthroughFile is an open of a sample held in a local file: go-fuse registers the file
// with the kernel as the open's backing file (gofs.FilePassthroughFder). Where the kernel
// or the privileges do not allow it, reads come to Read as for any open.
type passthroughFile struct {
	s *sampleFile
	f *os.File
}

// PassthroughFd implements gofs.FilePassthroughFder.
func (p *passthroughFile) PassthroughFd() (int, bool) { return int(p.f.Fd()), true }

// Release implements gofs.FileReleaser.
func (p *passthroughFile) Release(ctx context.Context) syscall.Errno {
	p.f.Close()
	p.s.release()
	return 0
}

// cachedFile is an open of a sample read through cassfs.
type cachedFile struct{ s *sampleFile }

// Release implements gofs.FileReleaser.
func (c *cachedFile) Release(ctx context.Context) syscall.Errno {
	c.s.release()
	return 0
}

// Flush answers ENOSYS for the same reason as Open: the kernel stops sending FLUSH.
func (s *sampleFile) Flush(ctx context.Context, fh gofs.FileHandle) syscall.Errno {
	return syscall.ENOSYS
}

func (s *sampleFile) Read(ctx context.Context, fh gofs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	s.fs.reading(s.i)
	if s.fs.cfg.Backing != nil && !s.fs.passthrough.Load() {
		if r, ok := s.readFile(off, len(dest)); ok {
			return r, 0
		}
	}
	data, err := s.fs.cfg.Blobs.Get(ctx, s.i)
	if err != nil {
		return nil, s.fs.errno("read", s.i, err)
	}
	// With targets, what is cached for a sample is its blob, then its target's.
	if n := s.fs.ix.Size(s.i); s.target {
		data = data[n:]
	} else if s.fs.ix.HasTargets() {
		data = data[:n]
	}
	if off >= int64(len(data)) {
		return fuse.ReadResultData(nil), 0
	}
	end := min(off+int64(len(dest)), int64(len(data)))
	s.fs.served(off, end)
	s.servedTo(end, int64(len(data)))
	// data is immutable (shared from the cache), so go-fuse may send it after we return.
	return fuse.ReadResultData(data[off:end]), 0
}

// servedTo is told that a READ of the file, of size bytes, was answered up to end: one
// that reaches the end of the file leaves the file in the page cache (readers read files
// from their start; a READ's answer stays there as a push would), so the sample is resident
// (push.go) and not pushed in a later epoch. Samples with targets are left unmarked. The
// kernel reading through the inode knows it, whatever a push refused for a race with its
// first lookup concluded (FS.Push): the mark must hold, or a later epoch would take the
// sample for one the page cache lacks (FS.Resident) and fetch it.
func (s *sampleFile) servedTo(end, size int64) {
	if end == size && !s.target && !s.fs.ix.HasTargets() {
		s.fs.known.Put(s.i, true)
		s.fs.resident.Put(s.i, true)
	}
}

// readFile answers a READ from the sample's backing file, if it has one: go-fuse splices
// the range from the file to the kernel, so the bytes never pass through cassfs's memory.
// The file was verified by Backing; its entry holds the blob, then the target.
func (s *sampleFile) readFile(off int64, n int) (fuse.ReadResult, bool) {
	file, ok := s.fs.cfg.Backing.Backing(s.i)
	if !ok {
		return nil, false
	}
	start, size := int64(0), s.fs.ix.Size(s.i)
	if s.target {
		start, size = size, s.fs.ix.TargetSize(s.i)
	}
	if off >= size {
		file.Close()
		return fuse.ReadResultData(nil), true
	}
	end := min(off+int64(n), size)
	s.fs.served(off, end)
	s.servedTo(end, size)
	s.fs.fromFiles.Add(1)
	return &fileResult{s: s, f: file, off: start + off, n: int(end - off)}, true
}

// fileResult is a READ answered from a range of a local file. go-fuse splices it to the
// kernel when it can (it asks Seekable: file → pipe → /dev/fuse, fuse/splice_linux.go) and
// calls Bytes otherwise; Done closes the file once the reply is written.
type fileResult struct {
	s   *sampleFile
	f   *os.File
	off int64
	n   int
}

func (r *fileResult) Seekable() (fd uintptr, off int64, n int) { return r.f.Fd(), r.off, r.n }
func (r *fileResult) Size() int                                { return r.n }
func (r *fileResult) Done()                                    { r.f.Close() }

func (r *fileResult) Bytes(buf []byte) ([]byte, fuse.Status) {
	n, err := r.f.ReadAt(buf[:min(len(buf), r.n)], r.off)
	if err != nil { // shorter than the index says: it changed since it was verified
		return nil, fuse.Status(r.s.fs.errno("read", r.s.i, err))
	}
	return buf[:n], fuse.OK
}
