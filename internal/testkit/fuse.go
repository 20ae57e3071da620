package testkit

import (
	"fmt"
	"os"
	"slices"
	"testing"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// MountFUSE does what a privileged mounter (a CSI node plugin) does before it hands a
// FUSE connection to a daemon: it opens /dev/fuse and mounts that descriptor read-only
// at dir, with the options the kernel needs (fd, rootmode, user_id, group_id). It returns
// the descriptor, for the daemon to serve (which closes it). It skips the test without
// root or /dev/fuse; dir is detached at cleanup in case the test ended with it mounted.
//
// The descriptor is opened without O_CLOEXEC, as one received over a Unix socket may be:
// the daemon must not let a process it starts inherit the connection.
func MountFUSE(t testing.TB, dir string) int {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting FUSE needs root")
	}
	fd, err := unix.Open("/dev/fuse", unix.O_RDWR, 0)
	if err != nil {
		t.Skipf("no FUSE: %v", err)
	}
	opts := fmt.Sprintf("fd=%d,rootmode=%o,user_id=%d,group_id=%d", fd, unix.S_IFDIR, os.Geteuid(), os.Getegid())
	if err := unix.Mount("cassfs:test", dir, "fuse.cassfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		unix.Close(fd)
		t.Fatalf("mount /dev/fuse at %s with %s: %v", dir, opts, err)
	}
	t.Cleanup(func() {
		// Lazily: a mount nobody serves any more would not answer a clean unmount's
		// questions. Not mounted any more (EINVAL) is what a passing test leaves.
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil && err != unix.EINVAL {
			t.Errorf("detach %s: %v", dir, err)
		}
	})
	return fd
}

// MountsAt lists the filesystems mounted at any of paths (their types, in mount order).
func MountsAt(t testing.TB, paths ...string) []string {
	t.Helper()
	mounts, err := mountinfo.GetMounts(func(m *mountinfo.Info) (skip, stop bool) {
		return !slices.Contains(paths, m.Mountpoint), false
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range mounts {
		out = append(out, m.FSType+" at "+m.Mountpoint)
	}
	return out
}
