package fs

import (
	"fmt"
	"log"
	"os"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// MountOptions are the kernel-facing settings of a mount.
type MountOptions struct {
	// FsName is shown as the source in /proc/mounts (e.g. "cassfs:tiles").
	FsName string
	// AllowOther lets users other than the mounting one access the mount.
	AllowOther bool
	// MaxBackground bounds the kernel's concurrent background requests (reads); the
	// default 128 keeps many reads in flight to a latency-bound backend (go-fuse's default
	// of 12 caps files/s at high latency).
	MaxBackground int
	// Debug logs every FUSE request, to Logger (the standard logger if nil).
	Debug  bool
	Logger *log.Logger
	// NoPassthrough serves samples with a backing file (Config.Backing) by READs spliced
	// from it even where the kernel could pass their opens through (to compare the two).
	NoPassthrough bool
	// Push: blobs are pushed into the kernel's page cache ahead of their readers (FS.Push),
	// which needs OPEN answered ENOSYS, so samples with a backing file are never passed
	// through but spliced where a READ still comes.
	Push bool
}

// Mount mounts f at dir and serves it in the background. Unmount the returned server to
// stop; Wait returns when it is unmounted.
func Mount(dir string, f *FS, o MountOptions) (*fuse.Server, error) {
	server, err := serve(dir, f, o, true)
	if err != nil {
		return nil, fmt.Errorf("mount %s: %w", dir, err)
	}
	return server, nil
}

// serve serves f in the background at mountpoint: a directory it mounts (direct), or
// go-fuse's "/dev/fd/N", a descriptor mounted already (not direct: see ServeFD).
func serve(mountpoint string, f *FS, o MountOptions, direct bool) (*fuse.Server, error) {
	server, err := serveRoot(mountpoint, f, f.Root(), 0, o, direct)
	if err != nil {
		return nil, err
	}
	f.server.Store(server)
	// Decided before the mount is announced: once an OPEN is answered ENOSYS the kernel
	// sends none again, so the choice holds for the mount's life.
	if f.cfg.Backing != nil {
		var why string
		switch {
		case f.ix.HasTargets():
			why = "samples have targets: a file holds the sample and its target"
		case o.Push:
			why = "files are pushed into the page cache, which needs OPEN unanswered"
		case o.NoPassthrough:
			why = "asked for"
		default:
			why = canPassThrough(server)
		}
		if why != "" {
			f.passthrough.Store(false)
			f.log.Info("cache directory files served by reads spliced from them, not passed through", "why", why)
		}
	}
	return server, nil
}

// MountRecords mounts f's record view at dir on a connection of its own, where OPEN is
// answered and tars held in local files are passed through (records_local.go), and serves
// it in the background. Mount f first; unmount this one first.
func MountRecords(dir string, f *FS, o MountOptions) (*fuse.Server, error) {
	server, err := serveRoot(dir, f, &rootDir{dirNode: dirNode{fs: f}, records: true}, recordsIno, o, true)
	if err != nil {
		return nil, fmt.Errorf("mount the record view at %s: %w", dir, err)
	}
	f.recServer.Store(server)
	why := canPassThrough(server)
	if why == "" && f.cfg.RecordsDir == "" {
		why = "no directory for them"
	}
	f.recPassthrough.Store(why == "")
	if why != "" {
		f.log.Info("record view: tars read through cassfs, not passed through to local files", "why", why)
	}
	go func() {
		server.Wait()
		f.recPassthrough.Store(false) // no tar is written any more (writeLocal)
		f.local.closeAll()
	}()
	return server, nil
}

// serveRoot serves root in the background at mountpoint (see serve), numbering nodes from
// firstIno (0: go-fuse's 2^63).
func serveRoot(mountpoint string, f *FS, root gofs.InodeEmbedder, firstIno uint64, o MountOptions, direct bool) (*fuse.Server, error) {
	if o.MaxBackground <= 0 {
		o.MaxBackground = 128
	}
	// Content never changes under a name, so the kernel may cache names, attributes and
	// misses for as long as it likes.
	long := 24 * time.Hour
	opts := &gofs.Options{
		// A node's FUSE id is its inode number, so FS.Push addresses a sample's inode
		// without holding its go-fuse node; every inode number is unique (fs.go).
		ExternalNodeID:    true,
		EntryTimeout:      &long,
		AttrTimeout:       &long,
		NegativeTimeout:   &long,
		FirstAutomaticIno: firstIno,
		MountOptions: fuse.MountOptions{
			FsName:        o.FsName,
			Name:          "cassfs",
			AllowOther:    o.AllowOther,
			MaxBackground: o.MaxBackground,
			// Read-only at the VFS: writes fail with EROFS before reaching us, and reads do
			// not cost an atime GETATTR. (With a passed descriptor these, FsName and
			// AllowOther are the mounter's: ServeFD.)
			DirectMount:      direct,
			DirectMountFlags: syscall.MS_RDONLY | syscall.MS_NOSUID | syscall.MS_NODEV,
			Options:          []string{"ro"},
			// Extended attributes are on: samples carry their metadata (sampleFile.Getxattr).
			// Readers pay nothing for it: open and read send no GETXATTR (checked with
			// go-fuse's debug log: cat and Python's open().read() send none; ls -l asks
			// for security.selinux and an ACL per file, answered ENODATA from memory).
			// Attributes never change, so the kernel need not drop cached pages when they
			// are refreshed.
			ExplicitDataCacheControl: true,
			// READDIRPLUS for every listing (not readdirplus_auto): each listing decides
			// per entry whether it carries a node (class directories: classListing; by-uuid
			// never, so a listing of a million entries creates no inodes), and an entry
			// without one is a plain entry to the kernel.

			// Whole 128 KiB+ reads: fewer READs per file.
			MaxReadAhead: 1 << 20,
			// Requests up to 1 MiB (max_pages 256): a READDIRPLUS carries up to 1 MiB of
			// entries, ~6,000 names, so the helper's listing of a class directory is one
			// request (bench/history/journal.md, "a class directory listed in one request").
			MaxWrite: 1 << 20,
			Debug:    o.Debug,
			Logger:   o.Logger,
		},
	}
	// Not gofs.Mount: its WaitMount opens a file on the new mount (go-fuse's poll hack) from
	// this process. A process killed while one of its threads waits on its own mount cannot
	// die: the thread waits uninterruptibly for an answer no other thread is left to give,
	// and it keeps /dev/fuse open, so the kernel never aborts the connection (the process
	// and the mount hang until someone writes to /sys/fs/fuse/connections/N/abort). So the
	// daemon never touches its own mount. The hack is only for Go programs that read their
	// own mount (tests: call the server's WaitMount first); other processes' POLLs are
	// answered ENOSYS like any request. NewServer has already answered INIT (go-fuse
	// v2.12: handleInit), so the kernel settings are known below.
	raw := countingFS{RawFileSystem: gofs.NewNodeFS(root, opts), c: &f.requests}
	server, err := newServer(raw, mountpoint, &opts.MountOptions)
	if err != nil {
		return nil, err
	}
	go func() {
		server.Serve()
		serverDone()
	}()
	return server, nil
}

// canPassThrough tells why the kernel would refuse to pass opens through to local files
// on this mount ("" if it would not): it needs Linux 6.9+ (CAP_PASSTHROUGH offered at
// INIT) and CAP_SYS_ADMIN to register a backing file, which is tried on this executable.
func canPassThrough(s *fuse.Server) string {
	if s.KernelSettings().Flags64()&fuse.CAP_PASSTHROUGH == 0 {
		return "the kernel does not offer FUSE passthrough (Linux 6.9+)"
	}
	exe, err := os.Open("/proc/self/exe")
	if err != nil {
		return err.Error()
	}
	defer exe.Close()
	id, errno := s.RegisterBackingFd(&fuse.BackingMap{Fd: int32(exe.Fd())})
	if errno != 0 {
		return "registering a backing file: " + errno.Error() + " (it needs CAP_SYS_ADMIN)"
	}
	s.UnregisterBackingFd(id)
	return ""
}
