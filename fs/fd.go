package fs

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// ServeFD serves f in the background on fd, an open /dev/fuse descriptor that another
// process, a privileged mounter (a CSI node plugin), has already mounted at mountpoint and
// handed over: the daemon serving it then needs no privilege and mounts nothing.
//
// The mount-time settings are the mounter's, given to mount(2), and o's FsName and
// AllowOther are not used: source "cassfs:<dataset>", type "fuse.cassfs", flags
// MS_RDONLY|MS_NOSUID|MS_NODEV (what Mount uses), and the options
// "fd=N,rootmode=40000,user_id=U,group_id=G", with "allow_other" to let other users in
// (pods) and "max_read=131072" as go-fuse mounts (READs are held to 128 KiB by what INIT
// agrees anyway). What INIT agrees (MaxBackground, read-ahead, capabilities) is as with
// Mount.
//
// ServeFD takes fd: the server closes it once serving ends, when the mountpoint is
// unmounted (Wait returns), and ServeFD at once if it fails (go-fuse does once it has
// it). mountpoint is only where the mount is, for WaitMount and Unmount.
func ServeFD(fd int, mountpoint string, f *FS, o MountOptions) (*FDServer, error) {
	refuse := func(err error) (*FDServer, error) {
		if fd > 0 {
			unix.Close(fd)
		}
		return nil, fmt.Errorf("serve descriptor %d: %w", fd, err)
	}
	if !filepath.IsAbs(mountpoint) {
		return refuse(fmt.Errorf("mountpoint %q is not an absolute path", mountpoint))
	}
	if err := isFUSEDevice(fd); err != nil {
		return refuse(err)
	}
	// Not a direct mount: go-fuse would try mount(2) on "/dev/fd/N" before it recognised
	// the form, and as root mount a new FUSE filesystem over /dev/fuse itself.
	server, err := serve("/dev/fd/"+strconv.Itoa(fd), f, o, false)
	if err != nil {
		return nil, fmt.Errorf("serve descriptor %d mounted at %s: %w", fd, mountpoint, err)
	}
	return &FDServer{Server: server, mountpoint: mountpoint}, nil
}

// isFUSEDevice checks that fd is open on /dev/fuse (the misc device 10:229). go-fuse
// takes only N > 0 in "/dev/fd/N": fd 0 would be taken for a directory to mount at.
func isFUSEDevice(fd int) error {
	if fd <= 0 {
		return errors.New("not a /dev/fuse descriptor (want one above 0)")
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFCHR || unix.Major(st.Rdev) != 10 || unix.Minor(st.Rdev) != 229 {
		return errors.New("not open on /dev/fuse")
	}
	return nil
}

// FDServer is a connection served on a descriptor another process mounted (ServeFD).
// Wait returns once the mountpoint is unmounted, by Unmount or by the mounter.
type FDServer struct {
	*fuse.Server
	mountpoint string
}

// WaitMount is for a process that reads its own mount (tests), as with Mount: the kernel
// serves the mount already, and this runs go-fuse's poll hack at the mountpoint, which
// go-fuse cannot, knowing only "/dev/fd/N". Without it, this process's first open of a
// file on the mount registers it with the Go runtime's epoll, which sends the mount a POLL
// while holding a P; with every P held that way, no goroutine is left to answer. go-fuse
// answers a lookup of the name below in the root, and the POLL on it, itself (ENOSYS, after
// which the kernel sends no POLL again).
func (s *FDServer) WaitMount() error {
	if err := s.Server.WaitMount(); err != nil {
		return err
	}
	fd, err := unix.Open(filepath.Join(s.mountpoint, ".go-fuse-epoll-hack"), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("wait for the mount at %s: %w", s.mountpoint, err)
	}
	defer unix.Close(fd)
	_, err = unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN | unix.POLLPRI | unix.POLLOUT}}, 0)
	if err != nil {
		return fmt.Errorf("wait for the mount at %s: %w", s.mountpoint, err)
	}
	return nil
}

// Unmount unmounts the mountpoint and waits until serving has ended. It needs the
// privilege to unmount (CAP_SYS_ADMIN), which the mounter has and an unprivileged daemon
// does not: then the mounter unmounts, and Wait returns. (go-fuse's own Unmount refuses a
// "/dev/fd/N" mount.)
func (s *FDServer) Unmount() error {
	if err := unix.Unmount(s.mountpoint, 0); err != nil {
		return fmt.Errorf("unmount %s: %w", s.mountpoint, err)
	}
	s.Wait()
	return nil
}
