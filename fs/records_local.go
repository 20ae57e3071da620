package fs

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/cassfs/cassfs/view"
	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// The record view on a connection of its own (MountRecords), its tars passed through to
// local files.
//
// DALI maps the tars it reads, and a FUSE file's page cache is in 4 KiB pages however it
// is filled, pushed or READ (Linux 6.18 gives FUSE no large folios), so every page a
// reader touches through its mapping costs it 2–3× what ext4's large folios cost: a warm
// epoch read 0.71–1.00× (median 0.885) the same tars on local disk, and 0.96–1.10× through
// go-fuse's loopback with its opens passed through (bench/history/journal.md, "the record
// view's warm epoch against local tars, and what passthrough would give"). A file passed
// through (FUSE passthrough, Linux 6.9+, CAP_SYS_ADMIN) reads the local file's own pages.
// Passthrough is set up only in an OPEN reply, and the main connection answers OPEN ENOSYS
// (one request less per file read, and the kernel keeps pushed pages), which stops OPEN
// for the whole connection (fuse_file_open, fs/fuse/file.c). So the record view is also
// served on a connection of its own: MountRecords mounts a tree of the splits' record
// views only (<split>/epoch-N.wds/ and shard directories' <split>/shard-R-of-W/epoch-N.wds/),
// where every OPEN is answered. A tar held in a local file is opened in passthrough mode
// (the kernel reads the file, no READ comes); others keep their page cache
// (FOPEN_KEEP_CACHE) and are READ and pushed into as on the main connection.
//
// The local files: where the main connection pushes the next epoch's tars between epochs
// (records_ahead.go), the record view's own writes each tar of the next epoch whose every
// blob the cache (or the disk tier) holds into an unlinked file (O_TMPFILE) in
// Config.RecordsDir, in 4 MiB writes, so that the local filesystem keeps it in large
// folios; within the disk's free space and half the memory available (the file's pages
// are page cache, dirty until written back). A tar not written is read as in a cold epoch.
// An epoch's files are closed once the epoch after it is being written (the kernel keeps
// a file while an open passes through to it).
//
// A reader of tars passed through sends no READ, so the quiet time before the next epoch's
// tars are written starts only once no tar of the epoch is open, and no process that
// opened one still maps it: DALI maps each tar and closes it at once, then reads the
// mapping, which the kernel keeps on the local file (/proc/PID/maps shows it under the
// tar's own inode number: file_user_inode). The mappings of those processes are looked at
// after a quiet time (LookaheadOptions.NextEpoch; 50 ms without the lookahead helper), then
// twice as long each time, until none is left; writing the next epoch's tars while they
// were read cost the readers a fifth to a half of their rate.

// recordsIno is where the record view's connection numbers its nodes (go-fuse numbers
// them automatically from there): apart from the main connection's, which starts at 2^63,
// since the tars of both are kept by inode number (tarSet).
const recordsIno = 1<<63 + 1<<62

// localKey is a tar: an epoch view's shard.
type localKey struct {
	key   view.Key
	shard int
}

// localTars are tars written whole to local files.
type localTars struct {
	mu    sync.RWMutex
	files map[localKey]*os.File // guarded by mu
	// closed: the record view's connection ended; no file is kept any more (guarded by mu).
	closed  bool
	written int64 // guarded by mu: tars written
}

func (l *localTars) has(k view.Key, s int) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.files[localKey{k, s}] != nil
}

// open returns a descriptor of its own of shard s's local file (nil if none): the file may
// be closed (dropBefore) while the open is answered.
func (l *localTars) open(k view.Key, s int) *os.File {
	l.mu.RLock()
	defer l.mu.RUnlock()
	f := l.files[localKey{k, s}]
	if f == nil {
		return nil
	}
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	return os.NewFile(uintptr(fd), f.Name())
}

// count is how many tars were written.
func (l *localTars) count() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.written
}

func (l *localTars) put(k view.Key, s int, f *os.File) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		f.Close()
		return
	}
	if l.files == nil {
		l.files = map[localKey]*os.File{}
	}
	if old := l.files[localKey{k, s}]; old != nil {
		old.Close()
	}
	l.files[localKey{k, s}] = f
	l.written++
}

// dropBefore closes the files of k's view (any epoch) of epochs before k's.
func (l *localTars) dropBefore(k view.Key) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for lk, f := range l.files {
		if lk.key.Epoch < k.Epoch && sameView(lk.key, k) {
			f.Close()
			delete(l.files, lk)
		}
	}
}

// closeAll closes every file, and every file put from now on (the mount ends).
func (l *localTars) closeAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	for lk, f := range l.files {
		f.Close()
		delete(l.files, lk)
	}
}

// sameView reports whether a and b are epochs of one record view.
func sameView(a, b view.Key) bool {
	a.Epoch, b.Epoch = 0, 0
	return a == b
}

// openOwn answers an OPEN of t on the record view's own connection. The kernel refuses
// (EIO) an open whose mode differs from that of the inode's opens still open
// (fuse_file_io_open, fs/fuse/iomode.c), so while the tar is open every further open
// gets the mode of the first: passthrough if a local file held the tar then (go-fuse
// shares the first open's backing file among the node's opens), else cached.
func (t *tarFile) openOwn(ctx context.Context) (gofs.FileHandle, uint32, syscall.Errno) {
	f := t.fs
	var file *os.File
	if f.recPassthrough.Load() {
		file = f.local.open(t.sh.Key(), t.sh.K)
	}
	t.mu.Lock()
	if t.opens == 0 {
		t.passed = file != nil
	}
	t.opens++
	passed := t.passed
	t.mu.Unlock()
	f.recordOpened(t)
	if passed {
		if c, ok := fuse.FromContext(ctx); ok {
			f.recordMapper(t, c.Pid)
		}
		f.tarsPassed.Add(1)
		return &tarPassthrough{t: t, f: file}, 0, 0
	}
	if file != nil {
		file.Close()
	}
	return &tarOpen{t: t}, fuse.FOPEN_KEEP_CACHE, 0
}

// closed ends one open of t.
func (t *tarFile) closed() {
	t.mu.Lock()
	t.opens--
	t.mu.Unlock()
	t.fs.recordClosed(t)
}

// tarOpen is an open of a tar read through cassfs (own connection).
type tarOpen struct{ t *tarFile }

// Release implements gofs.FileReleaser.
func (o *tarOpen) Release(ctx context.Context) syscall.Errno {
	o.t.closed()
	return 0
}

// tarPassthrough is an open of a tar held in a local file: go-fuse registers the file with
// the kernel as the open's backing file (gofs.FilePassthroughFder), or shares the backing
// file of the tar's opens still open (then f may be nil). Where the kernel refuses, reads
// come as READs.
type tarPassthrough struct {
	t *tarFile
	f *os.File
}

// PassthroughFd implements gofs.FilePassthroughFder.
func (p *tarPassthrough) PassthroughFd() (int, bool) {
	if p.f == nil {
		return 0, false
	}
	return int(p.f.Fd()), true
}

// Release implements gofs.FileReleaser.
func (p *tarPassthrough) Release(ctx context.Context) syscall.Errno {
	if p.f != nil {
		p.f.Close()
	}
	p.t.closed()
	return 0
}

// writeLocal writes the tars of epoch view k whose every blob is held into local files
// (see above), within what the disk has free and half the memory available.
func (f *FS) writeLocal(k view.Key) {
	dir := f.cfg.RecordsDir
	if dir == "" || f.cfg.Peek == nil || !f.recPassthrough.Load() {
		return
	}
	f.local.dropBefore(k)
	r := f.views.Epoch(k).Records()
	start, wrote, bytes := time.Now(), 0, int64(0)
	defer func() {
		f.log.Debug("record view: tars written to local files", "epoch", k.Epoch, "tars", wrote, "of", r.Len(), "bytes", bytes, "took", time.Since(start))
	}()
	room := tierBudget()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		f.log.Warn("record view: tars not written to local files", "dir", dir, "err", err)
		return
	}
	// A twentieth of the disk stays free for everything else. (Counts are in fragments.)
	unit := st.Frsize
	if unit == 0 {
		unit = st.Bsize
	}
	free := int64(st.Bavail)*unit - int64(st.Blocks)*unit/20
	for s := range r.Len() {
		sh := r.Shard(s)
		if f.local.has(k, s) {
			continue
		}
		n := sh.Size()
		if n > room || n > free {
			f.log.Info("record view: the rest of an epoch's tars not written to local files, for room", "epoch", k.Epoch, "from shard", s, "memory room", room, "disk room", free)
			return
		}
		file, err := f.writeTar(dir, sh)
		if err != nil {
			if !errors.Is(err, errNotHeld) {
				f.log.Warn("record view: a tar not written to a local file", "dir", dir, "epoch", k.Epoch, "shard", s, "err", err)
			}
			continue
		}
		room -= n
		free -= n
		f.local.put(k, s, file)
		wrote, bytes = wrote+1, bytes+n
	}
}

// RecordsDir is where the record view's own connection writes its tars (Config.RecordsDir;
// "" if it writes none: not mounted, or the kernel refuses passthrough).
func (f *FS) RecordsDir() string {
	if !f.recPassthrough.Load() {
		return ""
	}
	return f.cfg.RecordsDir
}

// errNotHeld: a blob of the tar is neither in the cache nor in the disk tier.
var errNotHeld = errors.New("a blob is not held")

// writeTar writes sh whole into an unlinked file in dir, from the blobs held, and returns
// it: headers and small members rendered, the blobs' bytes from the cache's memory,
// through a 4 MiB buffer, so that every write is 4 MiB at a 4 MiB offset (see above).
func (f *FS) writeTar(dir string, sh *view.RecordShard) (*os.File, error) {
	blobs := make([][]byte, sh.Len())
	for j := range sh.Len() {
		i := sh.Sample(j)
		b, ok := f.cfg.Peek(i)
		if !ok {
			if b, ok = f.tierBlob(i, nil); !ok {
				return nil, errNotHeld
			}
		}
		blobs[j] = b
	}
	file, err := tempFile(dir)
	if err != nil {
		return nil, err
	}
	w := bufio.NewWriterSize(file, 4<<20)
	var buf []byte
	render := func(from, to int64) error {
		if from >= to {
			return nil
		}
		if int64(cap(buf)) < to-from {
			buf = make([]byte, to-from)
		}
		buf = buf[:to-from]
		if err := sh.ReadAt(buf, from, func(k int) ([]byte, error) { return blobs[k], nil }); err != nil {
			return err
		}
		_, err := w.Write(buf)
		return err
	}
	for j := range sh.Len() {
		start, d := sh.Start(j), sh.DataStart(j)
		end := sh.Size() // the end blocks go with the last sample
		if j < sh.Len()-1 {
			end = sh.Start(j + 1)
		}
		body := blobs[j][:f.ix.Size(sh.Sample(j))]
		if err = render(start, d); err != nil {
			break
		}
		if _, err = w.Write(body); err != nil {
			break
		}
		if err = render(d+int64(len(body)), end); err != nil {
			break
		}
	}
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		var fi os.FileInfo
		if fi, err = file.Stat(); err == nil && fi.Size() != sh.Size() {
			err = fmt.Errorf("wrote %d bytes of %d", fi.Size(), sh.Size())
		}
	}
	if err != nil {
		file.Close()
		return nil, err
	}
	return file, nil
}

// tempFile makes a file in dir that no name reaches (O_TMPFILE; where the filesystem has
// none, one made and removed at once), so that nothing is left behind however the
// process ends.
func tempFile(dir string) (*os.File, error) {
	fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o400)
	if err == nil {
		return os.NewFile(uintptr(fd), dir+"/(record view tar)"), nil
	}
	file, cerr := os.CreateTemp(dir, ".cassfs-tar-*")
	if cerr != nil {
		return nil, cerr
	}
	os.Remove(file.Name())
	return file, nil
}

// mapsAny reports whether process pid maps a file of inode number in inos (/proc/PID/maps:
// "address perms offset dev inode path", the inode number between spaces); false once it
// is gone.
func mapsAny(pid uint32, inos map[uint64]bool) bool {
	data, err := os.ReadFile("/proc/" + strconv.FormatUint(uint64(pid), 10) + "/maps")
	if err != nil {
		return false
	}
	for ino := range inos {
		if bytes.Contains(data, []byte(" "+strconv.FormatUint(ino, 10)+" ")) {
			return true
		}
	}
	return false
}
