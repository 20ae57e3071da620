package mount

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// PrepareMountpoint checks dir, recovers a mount left by a crashed cassfs, and refuses one
// in use. It returns the absolute path.
func PrepareMountpoint(dir string, log *slog.Logger) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(abs)
	if errors.Is(err, unix.ENOTCONN) || errors.Is(err, unix.ECONNABORTED) {
		// The FUSE server behind it is gone: detach the dead mount.
		if uerr := unix.Unmount(abs, unix.MNT_DETACH); uerr != nil {
			return "", fmt.Errorf("mountpoint %s is a stale mount and unmounting it failed: %w (try: fusermount -u %s)", abs, uerr, abs)
		}
		log.Warn("recovered a stale mount", "at", abs)
		fi, err = os.Stat(abs)
	}
	if err != nil {
		return "", fmt.Errorf("mountpoint: %w", err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("mountpoint %s is not a directory", abs)
	}
	if fstype, ok := MountedAt(abs); ok {
		return "", fmt.Errorf("mountpoint %s is in use (a %s filesystem is mounted there); unmount it first (umount %s) or choose another directory", abs, fstype, abs)
	}
	return abs, nil
}

// MountedAt reports whether a filesystem is mounted at dir, and its type.
func MountedAt(dir string) (string, bool) {
	mounts, err := mountinfo.GetMounts(mountinfo.SingleEntryFilter(dir))
	if err != nil || len(mounts) == 0 {
		return "", false
	}
	return mounts[len(mounts)-1].FSType, true
}

// unmount unmounts cleanly; while files are still open (EBUSY) it retries for a while and
// then detaches the mount lazily, so no mount is left behind.
func unmount(dir string, clean func() error, served <-chan struct{}, log *slog.Logger) error {
	var err error
	for try := 0; try < 20; try++ {
		if err = clean(); err == nil {
			<-served
			return nil
		}
		if errors.Is(err, unix.EPERM) {
			// A mount handed over (ServeFD) to a daemon without the privilege to unmount.
			return fmt.Errorf("%w: the mounter that handed the mount over unmounts it", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	log.Warn("mount busy; detaching it lazily", "at", dir, "err", err)
	if derr := unix.Unmount(dir, unix.MNT_DETACH); derr != nil {
		return fmt.Errorf("unmount %s: %v; detach: %w", dir, err, derr)
	}
	return nil
}
