package disktier

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// Backing opens sample i's entry for a reader to read directly (FUSE passthrough, or
// spliced by package fs), after verifying its content; false if there is none or it does
// not verify (it is then removed, and the sample is fetched again when read). The caller
// closes the file; it shares its offset with other opens of the entry, so only positional
// reads (ReadAt, splice with an offset, passthrough) may use it.
//
// A verified entry stays open (up to maxFiles of them) and later opens duplicate that
// descriptor: opening an entry by its path cost a fifth of the daemon's CPU per file in
// cached epochs (path walk, and after the kernel dropped its caches a read of the
// directory and the inode from disk, inside the reader's OPEN). The held file pins its
// inode, not its data, and the entry's eviction or removal closes it, so the bound on
// disk still holds once no reader has it open.
func (d *Tier) Backing(i uint32) (*os.File, bool) {
	if !d.Holds(i) {
		return nil, false
	}
	var f *os.File
	var err error
	d.mu.Lock()
	h := d.files[i]
	if h != nil {
		f, _ = dupFile(h) // under the lock: an eviction cannot close h meanwhile
	}
	d.mu.Unlock()
	if f == nil { // not held, or no descriptor to spare for a duplicate
		h = nil
		f, err = os.Open(d.path(i))
	}
	if err == nil {
		id, ok := idOf(f)
		d.mu.Lock()
		known, seen := d.verified[i]
		d.mu.Unlock()
		if ok && seen && id == known {
			d.hits.Add(1)
			if h == nil {
				d.hold(i, f, id)
			}
			return f, true // written or verified by this mount, and not changed since
		}
		bp := verifyBufs.Get().(*[]byte)
		buf := (*bp)[:0]
		n := d.ix.BlobSize(i)
		if int64(cap(buf)) < n+1 {
			buf = make([]byte, 0, n+1)
		}
		var m int
		m, err = io.ReadFull(io.NewSectionReader(f, 0, n+1), buf[:n+1])
		if errors.Is(err, io.ErrUnexpectedEOF) && int64(m) == n {
			err = d.verify(i, buf[:n])
		} else if err == nil {
			err = fmt.Errorf("cache file %s is longer than the sample", d.path(i))
		}
		*bp = buf[:0]
		verifyBufs.Put(bp)
		if err == nil && ok {
			d.mu.Lock()
			d.verified[i] = id
			d.mu.Unlock()
			d.hold(i, f, id)
		}
	}
	if err != nil {
		if f != nil {
			f.Close()
		}
		d.drop(i)
		return nil, false
	}
	d.hits.Add(1)
	return f, true
}

// hold keeps a descriptor of f, which verified as id, open for later opens of sample i's
// entry, unless one is held already or the entry was dropped meanwhile. When maxFiles are
// held, another one is closed first.
func (d *Tier) hold(i uint32, f *os.File, id fileID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if h := d.files[i]; h != nil || d.maxFiles <= 0 {
		return
	}
	if known, ok := d.verified[i]; !ok || known != id {
		return // dropped, or changed, since f was verified
	}
	if len(d.files) >= d.maxFiles {
		for v, h := range d.files { // any one: the map's order is as good as random here
			h.Close()
			delete(d.files, v)
			break
		}
	}
	if h, err := dupFile(f); err == nil {
		d.files[i] = h
	}
}

// dupFile returns a new descriptor of f's open file (same offset, same file), closed on
// exec from the start (F_DUPFD_CLOEXEC: no window for a child to inherit it).
func dupFile(f *os.File) (*os.File, error) {
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), f.Name()), nil
}

// maxHeldFiles is how many entries a tier holds open: a quarter of the descriptors the
// process may open (Go raises the soft limit to the hard one at start), at most 32,768 —
// each pins an inode and a dentry, about a kilobyte of kernel memory.
func maxHeldFiles() int {
	var lim unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &lim) != nil {
		return 0
	}
	return int(min(lim.Cur/4, 1<<15))
}

// verifyBufs are the buffers Backing verifies files in.
var verifyBufs = sync.Pool{New: func() any { b := make([]byte, 0, 256<<10); return &b }}

// fileID is what tells that an entry's file is still the one verified: its inode, size and
// modification time (a write to it, or a new file in its place, changes them).
type fileID struct {
	ino, size, mtime int64
}

func idOf(f *os.File) (fileID, bool) {
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil {
		return fileID{}, false
	}
	return fileID{int64(st.Ino), st.Size, st.Mtim.Nano()}, true
}
