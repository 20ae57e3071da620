package fs

import (
	"sync/atomic"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// Ops names the FUSE requests counted per operation (RequestStats), in the order they are
// reported. "other" counts the rest a read-only mount is sent (ACCESS, STATX, LSEEK).
// "ioctl" is named because Python's open() asks every file it opens whether it is a
// terminal (isatty: TCGETS), and the kernel forwards every ioctl on a FUSE file to the
// daemon: one round trip per file for torchvision's loader, the page cache warm or not.
var Ops = []string{"lookup", "forget", "getattr", "open", "read", "release", "flush", "opendir", "readdir", "readdirplus", "releasedir", "getxattr", "listxattr", "statfs", "ioctl", "other"}

// Op indices into requestCounters, in Ops' order.
const (
	opLookup = iota
	opForget
	opGetattr
	opOpen
	opRead
	opRelease
	opFlush
	opOpendir
	opReaddir
	opReaddirplus
	opReleasedir
	opGetxattr
	opListxattr
	opStatfs
	opIoctl
	opOther
	numOps
)

// requestCounters count the requests that reached the daemon, by operation: what a file
// costs the reader in round trips through cassfs, the cost pushing into the page cache and
// no_open exist to remove. One atomic add per request.
type requestCounters [numOps]atomic.Int64

// RequestStats returns how many requests of each operation (Ops) reached the daemon.
func (f *FS) RequestStats() map[string]int64 {
	m := make(map[string]int64, numOps)
	for k, name := range Ops {
		m[name] = f.requests[k].Load()
	}
	return m
}

// countingFS counts each request by operation, then hands it to the node filesystem.
// Methods not overridden here count as "other" through the wrappers below.
type countingFS struct {
	fuse.RawFileSystem
	c *requestCounters
}

func (w countingFS) Lookup(cancel <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	w.c[opLookup].Add(1)
	return w.RawFileSystem.Lookup(cancel, h, name, out)
}

func (w countingFS) Forget(nodeid, nlookup uint64) {
	w.c[opForget].Add(1)
	w.RawFileSystem.Forget(nodeid, nlookup)
}

func (w countingFS) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	w.c[opGetattr].Add(1)
	return w.RawFileSystem.GetAttr(cancel, in, out)
}

func (w countingFS) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	w.c[opOpen].Add(1)
	return w.RawFileSystem.Open(cancel, in, out)
}

func (w countingFS) Read(cancel <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	w.c[opRead].Add(1)
	return w.RawFileSystem.Read(cancel, in, buf)
}

func (w countingFS) Release(cancel <-chan struct{}, in *fuse.ReleaseIn) {
	w.c[opRelease].Add(1)
	w.RawFileSystem.Release(cancel, in)
}

func (w countingFS) Flush(cancel <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	w.c[opFlush].Add(1)
	return w.RawFileSystem.Flush(cancel, in)
}

func (w countingFS) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	w.c[opOpendir].Add(1)
	return w.RawFileSystem.OpenDir(cancel, in, out)
}

func (w countingFS) ReadDir(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	w.c[opReaddir].Add(1)
	return w.RawFileSystem.ReadDir(cancel, in, out)
}

func (w countingFS) ReadDirPlus(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	w.c[opReaddirplus].Add(1)
	return w.RawFileSystem.ReadDirPlus(cancel, in, out)
}

func (w countingFS) ReleaseDir(in *fuse.ReleaseIn) {
	w.c[opReleasedir].Add(1)
	w.RawFileSystem.ReleaseDir(in)
}

func (w countingFS) GetXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string, dest []byte) (uint32, fuse.Status) {
	w.c[opGetxattr].Add(1)
	return w.RawFileSystem.GetXAttr(cancel, h, attr, dest)
}

func (w countingFS) ListXAttr(cancel <-chan struct{}, h *fuse.InHeader, dest []byte) (uint32, fuse.Status) {
	w.c[opListxattr].Add(1)
	return w.RawFileSystem.ListXAttr(cancel, h, dest)
}

func (w countingFS) StatFs(cancel <-chan struct{}, h *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	w.c[opStatfs].Add(1)
	return w.RawFileSystem.StatFs(cancel, h, out)
}

func (w countingFS) Ioctl(cancel <-chan struct{}, in *fuse.IoctlIn, inbuf []byte, out *fuse.IoctlOut, outbuf []byte) fuse.Status {
	w.c[opIoctl].Add(1)
	return w.RawFileSystem.Ioctl(cancel, in, inbuf, out, outbuf)
}

func (w countingFS) Access(cancel <-chan struct{}, in *fuse.AccessIn) fuse.Status {
	w.c[opOther].Add(1)
	return w.RawFileSystem.Access(cancel, in)
}

func (w countingFS) Statx(cancel <-chan struct{}, in *fuse.StatxIn, out *fuse.StatxOut) fuse.Status {
	w.c[opOther].Add(1)
	return w.RawFileSystem.Statx(cancel, in, out)
}

func (w countingFS) Lseek(cancel <-chan struct{}, in *fuse.LseekIn, out *fuse.LseekOut) fuse.Status {
	w.c[opOther].Add(1)
	return w.RawFileSystem.Lseek(cancel, in, out)
}
