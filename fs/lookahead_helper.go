package fs

// The lookahead helper's side: a process of its own (cassfs lookahead-helper) that looks
// names up, lists and streams class directories, and looks at files' pages under the
// mount for the daemon (lookahead.go), so that the kernel learns the names from requests
// that are not the readers'.

import (
	"bufio"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ServeLookahead is the helper process's loop: it reads "<seq> <path>\n" requests from in,
// looks each path up under root with workers threads (one lookup at a time each), and
// writes "<seq>\n" to out once the lookup returned, found or not; "L<seq> <dir>" lists dir
// to its end, "S<seq>@<from> <dir>" reads one chunk of dir from offset from (answered
// "S<seq> <offset after it>", or "S<seq> 0" at its end), "C<seq> <path>" looks at path's
// pages (answered "C<seq> 1", "0" or "?"). It returns when in ends.
func ServeLookahead(root string, in io.Reader, out io.Writer, workers int) error {
	// Paths are resolved from the mountpoint's parent: a descriptor of the mount's own root
	// would keep it busy, and an unmount from outside (umount, fusermount -u) would fail.
	root = path.Clean(root)
	dir, err := unix.Open(path.Dir(root), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", path.Dir(root), err)
	}
	defer unix.Close(dir)
	base := path.Base(root) + "/"
	reqs := make(chan string, 1024)
	streams := newDirStreams()
	defer streams.closeAll()
	var wmu sync.Mutex
	w := bufio.NewWriter(out)
	var wg sync.WaitGroup
	for range max(workers, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var st unix.Stat_t
			buf := make([]byte, 1<<20)
			for line := range reqs {
				seq, p, ok := strings.Cut(line, " ")
				if !ok {
					continue
				}
				if list, ok := strings.CutPrefix(seq, "L"); ok {
					seq = list
					listDir(dir, base+p, buf)
				} else if c, ok := strings.CutPrefix(seq, "S"); ok {
					n, from, _ := strings.Cut(c, "@")
					off, err := strconv.ParseInt(from, 10, 64)
					if err != nil {
						off = -1 // read nothing: the stream ends
					}
					seq = "S" + n + " " + strconv.FormatInt(streams.next(dir, base+p, off, buf[:streamChunk]), 10)
				} else if strings.HasPrefix(seq, "C") {
					seq += " " + cachedWhole(dir, base+p)
				} else {
					for {
						err := unix.Fstatat(dir, base+p, &st, unix.AT_SYMLINK_NOFOLLOW)
						if err != syscall.EINTR {
							break
						}
					}
				}
				wmu.Lock()
				w.WriteString(seq + "\n")
				if len(reqs) == 0 {
					w.Flush()
				}
				wmu.Unlock()
			}
		}()
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		reqs <- sc.Text()
	}
	close(reqs)
	wg.Wait()
	wmu.Lock()
	defer wmu.Unlock()
	if err := w.Flush(); err != nil {
		return err
	}
	return sc.Err()
}

// streamChunk is how much of a streamed directory one request reads: the kernel asks the
// daemon for a READDIRPLUS of the reader's buffer size (Linux 6.13+; a page before), so
// about 80 entries of names some tens of bytes long.
const streamChunk = 16 << 10

// dirStreams are the directories the helper reads a chunk at a time: each kept open
// between its chunks while they come, and closed once idle for streamLinger. An open
// directory keeps the mount busy: an unmount from outside (umount, fusermount -u) would
// fail for as long as a stream that stopped short of its directory's end stayed open
// (readers that stopped before the epoch's end, or a class whose last chunk ended at its
// last name). Reopened, a stream seeks to where it stood.
type dirStreams struct {
	mu    sync.Mutex
	at    map[string]*dirStream // by path; guarded by mu
	sweep *time.Timer           // set while a stream is open; guarded by mu
}

type dirStream struct {
	fd   int
	pos  int64     // the directory's position (the next chunk's offset if asked on)
	busy bool      // a chunk is being read: not closed meanwhile
	used time.Time // when its last chunk was read
}

// streamLinger is how long a stream's directory stays open after a chunk. Readers
// walking an epoch ask for a class's next chunk sooner (80 names of a class are some
// hundreds of files of the epoch, under a second at the rates streams run at: mount's
// streamBelow); one reopened costs an OPENDIR and a RELEASEDIR beside its READDIRPLUS.
const streamLinger = 200 * time.Millisecond

func newDirStreams() *dirStreams { return &dirStreams{at: map[string]*dirStream{}} }

// next reads one chunk of directory p under dir, from offset off (a directory's position:
// for a class directory the index of an entry of its listing), into buf (one getdents,
// one READDIRPLUS): the offset after it, or 0 where nothing was read (its end, or an
// error), when the directory is closed. One chunk of a directory is asked for at a time;
// chunks of different directories are read at once.
func (d *dirStreams) next(dir int, p string, off int64, buf []byte) int64 {
	if off < 0 {
		return 0
	}
	d.mu.Lock()
	s, ok := d.at[p]
	if !ok {
		if len(d.at) >= 4096 {
			d.closeLocked(func(*dirStream) bool { return true }) // views left behind
		}
		fd, err := unix.Openat(dir, p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			d.mu.Unlock()
			return 0
		}
		s = &dirStream{fd: fd}
		d.at[p] = s
	}
	if s.busy {
		d.mu.Unlock()
		return off // asked again before the last chunk was read: nothing read now
	}
	s.busy = true
	d.mu.Unlock()
	pos, err := s.pos, error(nil)
	if pos != off {
		pos, err = unix.Seek(s.fd, off, io.SeekStart)
	}
	var n int
	if err == nil {
		n, err = unix.Getdents(s.fd, buf)
		for err == syscall.EINTR {
			n, err = unix.Getdents(s.fd, buf)
		}
	}
	if err == nil && n > 0 {
		pos, err = unix.Seek(s.fd, 0, io.SeekCurrent)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	s.busy = false
	if err != nil || n <= 0 {
		delete(d.at, p)
		unix.Close(s.fd)
		return 0
	}
	s.pos, s.used = pos, time.Now()
	if d.sweep == nil {
		d.sweep = time.AfterFunc(streamLinger, d.closeIdle)
	}
	return pos
}

// closeIdle closes the streams idle for streamLinger, and comes back while any stays open.
func (d *dirStreams) closeIdle() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.sweep = nil
	d.closeLocked(func(s *dirStream) bool { return time.Since(s.used) >= streamLinger })
	if len(d.at) > 0 {
		d.sweep = time.AfterFunc(streamLinger, d.closeIdle)
	}
}

// closeAll closes every stream, as the helper ends.
func (d *dirStreams) closeAll() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.sweep != nil {
		d.sweep.Stop()
	}
	d.closeLocked(func(*dirStream) bool { return true })
}

// closeLocked closes the streams not being read that close says to.
func (d *dirStreams) closeLocked(close func(*dirStream) bool) {
	for p, s := range d.at {
		if !s.busy && close(s) {
			unix.Close(s.fd)
			delete(d.at, p)
		}
	}
}

// listDir lists directory p under dir to its end, with buf for the entries: under
// READDIRPLUS the kernel caches every name the daemon looks up on the way.
func listDir(dir int, p string, buf []byte) {
	fd, err := unix.Openat(dir, p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	for {
		n, err := unix.Getdents(fd, buf)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || n <= 0 {
			return
		}
	}
}
