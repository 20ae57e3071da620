package csi

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/cassfs/cassfs/handover"
	"github.com/cassfs/cassfs/mount"
	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// FSType is the type of the filesystems the plugin mounts.
const FSType = "fuse.cassfs"

// flags are a volume's mount flags, at staging and on every bind.
const flags = unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV

// checkCapability refuses what a read-only filesystem cannot be: a block device.
func checkCapability(c *csi.VolumeCapability) error {
	switch {
	case c == nil:
		return status.Error(codes.InvalidArgument, "no volume capability")
	case c.GetBlock() != nil:
		return status.Error(codes.InvalidArgument, "a dataset is a filesystem, not a block device")
	case c.GetMount() == nil:
		return status.Error(codes.InvalidArgument, "the volume capability has no access type (want mount)")
	}
	return nil
}

// path checks that p is given and absolute, and returns it clean.
func path(what, p string) (string, error) {
	if p == "" {
		return "", status.Errorf(codes.InvalidArgument, "no %s", what)
	}
	if !filepath.IsAbs(p) {
		return "", status.Errorf(codes.InvalidArgument, "%s %q is not an absolute path", what, p)
	}
	return filepath.Clean(p), nil
}

// nodeRequest is any of the node service's requests: each names its volume, and carries
// some of a staging path, a target path and a volume capability.
type nodeRequest interface{ GetVolumeId() string }

// checkRequest checks what a node request carries before anything is done with it: a
// volume id; a target path and a staging path, if the request has them, absolute
// (returned clean); a capability, if it has one, that a read-only filesystem can be
// (checkCapability). The first missing or malformed field is an InvalidArgument error.
func checkRequest(req nodeRequest) (staging, target string, err error) {
	if req.GetVolumeId() == "" {
		return "", "", status.Error(codes.InvalidArgument, "no volume id")
	}
	if r, ok := req.(interface{ GetTargetPath() string }); ok {
		if target, err = path("target path", r.GetTargetPath()); err != nil {
			return "", "", err
		}
	}
	if r, ok := req.(interface{ GetStagingTargetPath() string }); ok {
		if staging, err = path("staging target path", r.GetStagingTargetPath()); err != nil {
			return "", "", err
		}
	}
	if r, ok := req.(interface{ GetVolumeCapability() *csi.VolumeCapability }); ok {
		if err := checkCapability(r.GetVolumeCapability()); err != nil {
			return "", "", err
		}
	}
	return staging, target, nil
}

func (d *driver) NodeStageVolume(ctx context.Context, req *csi.NodeStageVolumeRequest) (*csi.NodeStageVolumeResponse, error) {
	staging, _, err := checkRequest(req)
	if err != nil {
		return nil, err
	}
	vol, err := mount.VolumeFromAttributes(req.GetVolumeContext())
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "volume %s: %v", req.GetVolumeId(), err)
	}
	release, err := d.hold(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	defer release()
	source := "cassfs:" + vol.Dataset
	if m, ok, err := mountedAt(staging); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	} else if ok {
		if m.FSType != FSType || m.Source != source {
			return nil, status.Errorf(codes.AlreadyExists, "%s: %s is mounted there, not %s", staging, m.Source, source)
		}
		var fs unix.Statfs_t // statfs always asks the server; a stat may be answered from cache
		if err := unix.Statfs(staging, &fs); !errors.Is(err, unix.ENOTCONN) && !errors.Is(err, unix.ECONNABORTED) {
			d.remember(req.GetVolumeId(), &staged{req: req, staging: staging, source: source, targets: map[string]bool{}})
			return &csi.NodeStageVolumeResponse{}, nil // staged and served
		}
		d.log.Warn("the daemon serving a staged volume is gone: staging it anew", "volume", req.GetVolumeId(), "path", staging)
		if err := unmount(staging); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
	}
	made, err := mkdir(staging)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if err := d.stage(ctx, req, staging, source); err != nil {
		if made {
			os.Remove(staging)
		}
		return nil, err
	}
	if made {
		d.mu.Lock()
		d.made[staging] = true
		d.mu.Unlock()
	}
	d.remember(req.GetVolumeId(), &staged{req: req, staging: staging, source: source, targets: map[string]bool{}})
	return &csi.NodeStageVolumeResponse{}, nil
}

// stage mounts a new FUSE connection at staging and hands it over to the daemon.
func (d *driver) stage(ctx context.Context, req *csi.NodeStageVolumeRequest, staging, source string) error {
	// The daemon's user owns its socket (handover.Listen): it is whom the mount is for.
	var sock unix.Stat_t
	if err := unix.Stat(d.cfg.DaemonSocket, &sock); err != nil {
		err = &os.PathError{Op: "stat", Path: d.cfg.DaemonSocket, Err: err}
		return status.Errorf(codes.Unavailable, "no serving daemon: %v", err) // err names the socket
	}
	fd, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return status.Errorf(codes.Internal, "open /dev/fuse: %v", err)
	}
	// Closed whatever happens: the daemon's copy must be the only one (see the package doc).
	closeFD := sync.OnceFunc(func() { unix.Close(fd) })
	defer closeFD()
	opts := fmt.Sprintf("fd=%d,rootmode=%o,user_id=%d,group_id=%d,allow_other,default_permissions,max_read=131072",
		fd, unix.S_IFDIR, sock.Uid, sock.Gid)
	if err := unix.Mount(source, staging, FSType, flags, opts); err != nil {
		return status.Errorf(codes.Internal, "mount /dev/fuse at %s: %v", staging, err)
	}
	timeout := d.cfg.HandoverTimeout
	if timeout <= 0 {
		timeout = handover.DefaultTimeout
	}
	hctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err = handover.Send(hctx, d.cfg.DaemonSocket, fd, handover.Volume{
		ID: req.GetVolumeId(), Mountpoint: staging, Attributes: req.GetVolumeContext(), Secrets: req.GetSecrets(),
	})
	if err == nil {
		return nil
	}
	// Our descriptor is closed first: the daemon then holds the connection's only copy, if
	// it holds one, and a plain unmount does not wait on a connection nobody serves.
	closeFD()
	if uerr := unmount(staging); uerr != nil {
		d.log.Error("undo a failed hand-over", "volume", req.GetVolumeId(), "err", uerr)
	}
	var refused *handover.RefusedError
	switch {
	case errors.As(err, &refused):
		return status.Errorf(codes.FailedPrecondition, "volume %s: %s", req.GetVolumeId(), refused.Message)
	case errors.Is(err, context.DeadlineExceeded):
		return status.Errorf(codes.DeadlineExceeded, "volume %s: %v", req.GetVolumeId(), err)
	default:
		return status.Errorf(codes.Unavailable, "volume %s: %v", req.GetVolumeId(), err)
	}
}

func (d *driver) NodeUnstageVolume(_ context.Context, req *csi.NodeUnstageVolumeRequest) (*csi.NodeUnstageVolumeResponse, error) {
	staging, _, err := checkRequest(req)
	if err != nil {
		return nil, err
	}
	release, err := d.hold(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	defer release()
	if err := unmountAll(staging); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	d.forget(req.GetVolumeId())
	d.mu.Lock()
	made := d.made[staging]
	delete(d.made, staging)
	d.mu.Unlock()
	if made {
		if err := os.Remove(staging); err != nil && !os.IsNotExist(err) {
			return nil, status.Error(codes.Internal, err.Error())
		}
	}
	return &csi.NodeUnstageVolumeResponse{}, nil
}

func (d *driver) NodePublishVolume(_ context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	staging, target, err := checkRequest(req)
	if err != nil {
		return nil, err
	}
	release, err := d.hold(target)
	if err != nil {
		return nil, err
	}
	defer release()
	staged, ok, err := mountedAt(staging)
	switch {
	case err != nil:
		return nil, status.Error(codes.Internal, err.Error())
	case !ok || staged.FSType != FSType:
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is not staged at %s", req.GetVolumeId(), staging)
	}
	if m, ok, err := mountedAt(target); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	} else if ok {
		if m.Major != staged.Major || m.Minor != staged.Minor || m.Root != staged.Root {
			return nil, status.Errorf(codes.AlreadyExists, "%s: %s is mounted there, not volume %s", target, m.Source, req.GetVolumeId())
		}
		return &csi.NodePublishVolumeResponse{}, nil
	}
	made, err := mkdir(target)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if err := bind(staging, target); err != nil {
		if made {
			os.Remove(target)
		}
		return nil, status.Error(codes.Internal, err.Error())
	}
	d.published(req.GetVolumeId(), target, true)
	return &csi.NodePublishVolumeResponse{}, nil
}

// bind mounts staging at target read-only: a bind mount takes the flags given with its
// remount, not the source's.
func bind(staging, target string) error {
	if err := unix.Mount(staging, target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s at %s: %w", staging, target, err)
	}
	if err := unix.Mount("", target, "", unix.MS_REMOUNT|unix.MS_BIND|flags, ""); err != nil {
		unix.Unmount(target, unix.MNT_DETACH)
		return fmt.Errorf("remount %s read-only: %w", target, err)
	}
	return nil
}

// NodeUnpublishVolume unmounts target and removes it: the plugin made it (the CSI spec
// has the plugin make target paths and remove them).
func (d *driver) NodeUnpublishVolume(_ context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	_, target, err := checkRequest(req)
	if err != nil {
		return nil, err
	}
	release, err := d.hold(target)
	if err != nil {
		return nil, err
	}
	defer release()
	if err := unmountAll(target); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	d.published(req.GetVolumeId(), target, false)
	if err := os.Remove(target); err != nil && !os.IsNotExist(err) {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// mountedAt returns the topmost mount at dir, if any.
func mountedAt(dir string) (*mountinfo.Info, bool, error) {
	ms, err := mountinfo.GetMounts(mountinfo.SingleEntryFilter(dir))
	if err != nil || len(ms) == 0 {
		return nil, false, err
	}
	return ms[len(ms)-1], true, nil
}

// unmountAll unmounts every mount at dir, the topmost first.
func unmountAll(dir string) error {
	for range 16 {
		_, ok, err := mountedAt(dir)
		if err != nil || !ok {
			return err
		}
		if err := unmount(dir); err != nil {
			return err
		}
	}
	return fmt.Errorf("%s: still mounted after 16 unmounts", dir)
}

// unmount unmounts dir; one still in use (a pod's process holding a file) is detached,
// to go once it is no longer used.
func unmount(dir string) error {
	err := unix.Unmount(dir, 0)
	for try := 0; errors.Is(err, syscall.EBUSY) && try < 3; try++ {
		time.Sleep(100 * time.Millisecond)
		err = unix.Unmount(dir, 0)
	}
	if errors.Is(err, syscall.EBUSY) {
		err = unix.Unmount(dir, unix.MNT_DETACH)
	}
	if err != nil && !errors.Is(err, syscall.EINVAL) { // EINVAL: not mounted any more
		return fmt.Errorf("unmount %s: %w", dir, err)
	}
	return nil
}

// mkdir makes dir if it is missing, and says whether it did.
func mkdir(dir string) (bool, error) {
	if _, err := os.Stat(dir); err == nil {
		return false, nil
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return false, err
	}
	return true, nil
}
