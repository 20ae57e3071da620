package csi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cassfs/cassfs/internal/testkit"
	"github.com/cassfs/cassfs/store/storetest"
	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/moby/sys/mountinfo"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// mountsUnder lists the mounts at or below dir.
func mountsUnder(t *testing.T, dir string) []*mountinfo.Info {
	t.Helper()
	return testkit.Must(mountinfo.GetMounts(mountinfo.PrefixFilter(dir)))(t)
}

func stageRequest(id, staging string, attrs map[string]string) *csi.NodeStageVolumeRequest {
	return &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: staging, VolumeCapability: mountCapability,
		VolumeContext: attrs, Secrets: map[string]string{"password": "hunter2"}}
}

func publishRequest(id, staging, target string) *csi.NodePublishVolumeRequest {
	return &csi.NodePublishVolumeRequest{VolumeId: id, StagingTargetPath: staging, TargetPath: target,
		VolumeCapability: mountCapability, Readonly: true}
}

// TestKubeletStandIn does what the kubelet does for three pods using one volume on a
// node: NodeStage once, NodePublish to each pod's target, the pods read the same file at
// once, then Unpublish ×3 and Unstage. One FUSE connection serves the three targets,
// nothing is mounted over /dev/fuse, and nothing the plugin mounted or made is left.
func TestKubeletStandIn(t *testing.T) {
	needFUSE(t)
	d := startDaemon(t, nil)
	_, conn := startPlugin(t, d.socket)
	node := csi.NewNodeClient(conn)
	ctx := context.Background()
	base := t.TempDir()
	staging := filepath.Join(base, "plugins", "globalmount") // the plugin makes it
	attrs := map[string]string{"dataset": "tiles", "seed": "7", "order": "strict"}
	testkit.Must(node.NodeStageVolume(ctx, stageRequest("vol-1", staging, attrs)))(t)
	if got := <-d.served; got.ID != "vol-1" || got.Mountpoint != staging || got.Attributes["seed"] != "7" || got.Secrets["password"] != "hunter2" {
		t.Errorf("the daemon got %+v, want the volume, its attributes and secrets", got)
	}
	var targets []string
	for i := range 3 {
		pod := filepath.Join(base, "pods", fmt.Sprintf("pod-%d", i), "volumes")
		testkit.Check(t, os.MkdirAll(pod, 0o750)) // the kubelet makes the parent
		target := filepath.Join(pod, "tiles")
		targets = append(targets, target)
		testkit.Must(node.NodePublishVolume(ctx, publishRequest("vol-1", staging, target)))(t)
	}

	list := string(testkit.Must(os.ReadFile(filepath.Join(targets[0], "all", "epoch-0", "file_list.txt")))(t))
	name, _, _ := strings.Cut(list, " ")
	var i int
	if _, err := fmt.Sscanf(name[strings.LastIndex(name, "_")+1:], "img%05d.jpg", &i); err != nil {
		t.Fatalf("file_list.txt starts %q: %v", name, err)
	}
	_, want := storetest.MakeSample("tiles", i, i%2, 1000+i)
	var wg sync.WaitGroup
	for _, target := range targets {
		wg.Go(func() {
			got, err := os.ReadFile(filepath.Join(target, "all", "epoch-0", name))
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s through %s: %d bytes (%v), want sample %d's %d", name, target, len(got), err, i, len(want))
			}
		})
	}
	wg.Wait()

	// One superblock behind the staging path and the three targets, each read-only.
	var devs []string
	for _, m := range mountsUnder(t, base) {
		if m.FSType != FSType || m.Source != "cassfs:tiles" {
			t.Errorf("%s: %s %s mounted, want %s cassfs:tiles", m.Mountpoint, m.FSType, m.Source, FSType)
		}
		opts := strings.Split(m.Options, ",")
		for _, o := range []string{"ro", "nosuid", "nodev"} {
			if !slices.Contains(opts, o) {
				t.Errorf("%s is mounted %s, without %s", m.Mountpoint, m.Options, o)
			}
		}
		devs = append(devs, fmt.Sprintf("%d:%d", m.Major, m.Minor))
	}
	if slices.Sort(devs); len(devs) != 4 || len(slices.Compact(devs)) != 1 {
		t.Errorf("superblocks behind the staging path and 3 targets: %v, want one, 4 times", devs)
	}
	if got := testkit.MountsAt(t, "/dev/fuse"); len(got) != 0 {
		t.Errorf("mounted over /dev/fuse: %q", got)
	}

	for _, target := range targets {
		testkit.Must(node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "vol-1", TargetPath: target}))(t)
	}
	testkit.Must(node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: "vol-1", StagingTargetPath: staging}))(t)
	if got := mountsUnder(t, base); len(got) != 0 {
		t.Errorf("after Unpublish and Unstage, still mounted: %v", got[0].Mountpoint)
	}
	for _, p := range append(targets, staging) {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s is left (%v)", p, err)
		}
	}
}

// TestIdempotent: every call repeated succeeds without doing it twice; unpublishing and
// unstaging what is not mounted succeed; a staging path holding another dataset is not
// taken over.
func TestIdempotent(t *testing.T) {
	needFUSE(t)
	d := startDaemon(t, nil)
	_, conn := startPlugin(t, d.socket)
	node := csi.NewNodeClient(conn)
	ctx := context.Background()
	base := t.TempDir()
	staging, target := filepath.Join(base, "staging"), filepath.Join(base, "target")
	testkit.Check(t, os.Mkdir(staging, 0o750)) // the kubelet's: left where it is
	attrs := map[string]string{"dataset": "tiles"}

	for range 2 {
		testkit.Must(node.NodeStageVolume(ctx, stageRequest("vol-1", staging, attrs)))(t)
	}
	for range 2 {
		testkit.Must(node.NodePublishVolume(ctx, publishRequest("vol-1", staging, target)))(t)
	}
	if n := len(mountsUnder(t, base)); n != 2 {
		t.Errorf("after staging and publishing twice: %d mounts, want 2", n)
	}
	if n := len(d.served); n != 1 {
		t.Errorf("the daemon was handed %d connections, want 1", n)
	}
	_, err := node.NodeStageVolume(ctx, stageRequest("vol-2", staging, map[string]string{"dataset": "other"}))
	if status.Code(err) != codes.AlreadyExists {
		t.Errorf("staging another dataset at a staged path: %v, want AlreadyExists", err)
	}
	for range 2 {
		testkit.Must(node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "vol-1", TargetPath: target}))(t)
		testkit.Must(node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: "vol-1", StagingTargetPath: staging}))(t)
	}
	if got := mountsUnder(t, base); len(got) != 0 {
		t.Errorf("still mounted: %s", got[0].Mountpoint)
	}
	if _, err := os.Stat(staging); err != nil {
		t.Errorf("the kubelet's staging directory: %v, want it left", err)
	}
	if _, err := os.Lstat(target); !os.IsNotExist(err) {
		t.Errorf("target left: %v", err)
	}
	testkit.Must(node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "vol-9", TargetPath: filepath.Join(base, "never")}))(t)
	testkit.Must(node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: "vol-9", StagingTargetPath: filepath.Join(base, "never")}))(t)
}

// TestBadAttributes: a bad volume attribute fails NodeStage with InvalidArgument naming
// it, before anything is mounted or made.
func TestBadAttributes(t *testing.T) {
	_, conn := startPlugin(t, filepath.Join(t.TempDir(), "none.sock"))
	node := csi.NewNodeClient(conn)
	base := t.TempDir()
	staging := filepath.Join(base, "staging")
	for _, tc := range []struct {
		attrs map[string]string
		want  string
	}{
		{nil, `"dataset" missing`},
		{map[string]string{"dataset": "tiles", "seed": "seven"}, `"seed"`},
		{map[string]string{"dataset": "tiles", "sede": "7"}, `"sede" unknown`},
		{map[string]string{"dataset": "tiles", "cache-size": "0"}, "cache-size"},
		{map[string]string{"dataset": "no such!"}, `"dataset"`},
	} {
		_, err := node.NodeStageVolume(context.Background(), stageRequest("vol-1", staging, tc.attrs))
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), tc.want) {
			t.Errorf("%v: %v, want InvalidArgument naming %s", tc.attrs, err, tc.want)
		}
	}
	if _, err := os.Lstat(staging); !os.IsNotExist(err) {
		t.Errorf("staging path made: %v", err)
	}
}

// TestFailedHandOver: a daemon that refuses fails NodeStage with its reason; one that
// never answers, with DeadlineExceeded after the hand-over timeout; no daemon, with
// Unavailable. Each time nothing stays mounted and the staging directory made is removed.
func TestFailedHandOver(t *testing.T) {
	needFUSE(t)
	refusing := startDaemon(t, errors.New("keyspace tiles does not exist"))
	silent := filepath.Join(t.TempDir(), "silent.sock")
	raw := testkit.Must(net.ListenUnix("unixpacket", &net.UnixAddr{Name: silent, Net: "unixpacket"}))(t)
	defer raw.Close() // never accepts
	for _, tc := range []struct {
		socket string
		code   codes.Code
		want   string
	}{
		{refusing.socket, codes.FailedPrecondition, "keyspace tiles does not exist"},
		{silent, codes.DeadlineExceeded, "deadline"},
		{filepath.Join(t.TempDir(), "none.sock"), codes.Unavailable, "none.sock"},
	} {
		_, conn := startPluginWith(t, Config{DaemonSocket: tc.socket, HandoverTimeout: 300 * time.Millisecond})
		base := t.TempDir()
		staging := filepath.Join(base, "staging")
		_, err := csi.NewNodeClient(conn).NodeStageVolume(context.Background(), stageRequest("vol-1", staging, map[string]string{"dataset": "tiles"}))
		if status.Code(err) != tc.code || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("handing over to %s: %v, want %v saying %q", tc.socket, err, tc.code, tc.want)
		}
		if got := mountsUnder(t, base); len(got) != 0 {
			t.Errorf("left mounted: %s", got[0].Mountpoint)
		}
		if _, err := os.Lstat(staging); !os.IsNotExist(err) {
			t.Errorf("staging directory left: %v", err)
		}
	}
}
