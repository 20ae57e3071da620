//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// TestCSIKubeletStandIn: the CSI node plugin (cassfs csi, root) and the serving daemon
// (cassfs serve, uid 65534 with no capabilities) of a node, driven as a kubelet would: a
// volume staged once and published to three targets, read through all three at once by
// DALI, torchvision and the Go reader, every byte checked; one FUSE connection behind the
// three; nothing mounted over /dev/fuse. Killing the daemon makes reads fail at once, never
// hang; a daemon started again serves the staged volume again, at every target. Unpublish
// and unstage leave no mount and no directory.
func TestCSIKubeletStandIn(t *testing.T) {
	d := sharedDataset(t)
	bin := unprivilegedCopy(t)
	run := openDir(t, 0o777)
	sock, endpoint := filepath.Join(run, "serve.sock"), filepath.Join(run, "csi.sock")
	serve := startServe(t, bin, sock)
	plugin := exec.Command(cassfsBin, "csi", "--endpoint", endpoint, "--node-id", "node-1", "--serve-socket", sock)
	pluginLog := &syncBuf{}
	plugin.Stderr = pluginLog
	okErr(t, plugin.Start())
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("cassfs csi's log:\n%s", pluginLog.String())
		}
	})
	t.Cleanup(func() { plugin.Process.Signal(syscall.SIGTERM); plugin.Wait() })
	waitFor(t, "the plugin's socket", func() bool { _, err := os.Stat(endpoint); return err == nil })
	conn, err := grpc.NewClient("unix://"+endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	okErr(t, err)
	defer conn.Close()
	node := csi.NewNodeClient(conn)
	ctx := context.Background()

	// The daemon: not root, no capabilities.
	status := string(must(os.ReadFile(fmt.Sprintf("/proc/%d/status", serve.Process.Pid))))
	if !strings.Contains(status, "\nUid:\t65534\t65534\t65534\t65534\n") || !strings.Contains(status, "\nCapEff:\t0000000000000000\n") {
		t.Errorf("cassfs serve runs with\n%s\nwant uid 65534 and no effective capability", grepLines(status, "Uid:", "CapEff:"))
	}

	pods := t.TempDir()
	staging := filepath.Join(pods, "staging")
	t.Cleanup(func() { // what a failed run left mounted (a passing one unmounts all)
		for _, p := range []string{"pod-0/volume", "pod-1/volume", "pod-2/volume", "staging"} {
			syscall.Unmount(filepath.Join(pods, p), syscall.MNT_DETACH)
		}
	})
	capability := &csi.VolumeCapability{AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY}}
	attrs := map[string]string{"dataset": d.name, "hosts": strings.Join(hosts, ","), "order": "strict", "seed": "4"}
	_, err = node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "tiles", StagingTargetPath: staging, VolumeCapability: capability, VolumeContext: attrs})
	okErr(t, err)
	var targets []string
	for k := range 3 {
		target := filepath.Join(pods, fmt.Sprintf("pod-%d", k), "volume")
		_, err := node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "tiles", StagingTargetPath: staging, TargetPath: target,
			VolumeCapability: capability, VolumeContext: attrs, Readonly: true})
		okErr(t, err)
		targets = append(targets, target)
	}
	if n := fuseConnections(t, append([]string{staging}, targets...)); n != 1 {
		t.Errorf("%d FUSE connections behind the staging path and three targets, want one", n)
	}
	if m := fuseConnections(t, []string{"/dev/fuse"}); m != 0 {
		t.Error("something is mounted over /dev/fuse")
	}

	// Three readers at once, one per target.
	epoch := func(k int) string { return filepath.Join(targets[k], "all", "epoch-1") }
	var wg sync.WaitGroup
	wg.Go(func() {
		_, items := readDALI(t, d, "--file-list", filepath.Join(epoch(0), "file_list.txt"))
		expectEachOnce(t, d, "DALI", items)
	})
	wg.Go(func() {
		_, items := readTorchvision(t, d, epoch(1))
		expectEachOnce(t, d, "torchvision", items)
	})
	wg.Go(func() { goReadsEpoch(t, d, epoch(2)) })
	wg.Wait()

	// The daemon dies: readers get errors, at once.
	serve.Process.Kill()
	serve.Wait()
	start := time.Now()
	if _, err := os.Stat(filepath.Join(targets[0], "all", "epoch-77")); err == nil || errors.Is(err, os.ErrNotExist) {
		t.Errorf("a lookup through a volume whose daemon is dead: %v, want a failed connection", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("a read through a volume whose daemon is dead took %v to fail", took)
	}
	// Back: the plugin serves the staged volume again, at every target (names never looked
	// up before: the page cache holds what was read, which a dead connection still shows).
	startServe(t, bin, sock)
	for k, target := range targets {
		p := filepath.Join(target, "all", fmt.Sprintf("epoch-%d", 5+k), "file_list.txt")
		waitFor(t, p+" readable again", func() bool { _, err := os.ReadFile(p); return err == nil })
	}
	goReadsEpoch(t, d, filepath.Join(targets[2], "all", "epoch-9"))

	for _, target := range targets {
		_, err := node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "tiles", TargetPath: target})
		okErr(t, err)
	}
	_, err = node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: "tiles", StagingTargetPath: staging})
	okErr(t, err)
	if n := fuseConnections(t, append([]string{staging}, targets...)); n != 0 {
		t.Errorf("%d mounts left after unpublish and unstage", n)
	}
	for _, p := range append([]string{staging}, targets...) {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left after unpublish and unstage: %v", p, err)
		}
	}
}

// unprivilegedCopy is the cassfs binary where uid 65534 may run it.
func unprivilegedCopy(t *testing.T) string {
	dir := openDir(t, 0o755)
	bin := filepath.Join(dir, "cassfs")
	okErr(t, os.WriteFile(bin, must(os.ReadFile(cassfsBin)), 0o755))
	return bin
}

// openDir is a new directory of mode perm that other users can reach (t.TempDir's parent is
// its user's alone), removed at the end of the test.
func openDir(t *testing.T, perm os.FileMode) string {
	dir, err := os.MkdirTemp("", "cassfs-e2e-")
	okErr(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	okErr(t, os.Chmod(dir, perm))
	return dir
}

// startServe starts cassfs serve on sock as uid 65534, with no capabilities.
func startServe(t *testing.T, bin, sock string) *exec.Cmd {
	os.Remove(sock) // a dead daemon's: a new one makes its own
	c := exec.Command(bin, "serve", "--socket", sock, "--hosts", strings.Join(hosts, ","))
	c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "XDG_RUNTIME_DIR=") && !strings.HasPrefix(e, "HOME=") {
			env = append(env, e)
		}
	}
	c.Env = append(env, "HOME=/tmp")
	c.Stderr = &syncBuf{}
	okErr(t, c.Start())
	t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	// Listening, not just bound: the socket's file appears before the daemon listens.
	waitFor(t, "cassfs serve listening", func() bool { return strings.Contains(c.Stderr.(*syncBuf).String(), "serving volumes") })
	return c
}

// goReadsEpoch reads every file of the epoch directory in file_list order and checks each
// is a sample of d, once.
func goReadsEpoch(t *testing.T, d *srcDataset, dir string) {
	names, _ := fileList(t, dir)
	seen := map[string]bool{}
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join(dir, n))
		rel := d.byHash[sha(data)]
		if err != nil || rel == "" || seen[rel] {
			t.Errorf("Go reader: %s: %d bytes (%v), sample %q", n, len(data), err, rel)
			return
		}
		seen[rel] = true
	}
	if len(seen) != len(d.sha) {
		t.Errorf("Go reader read %d samples, the dataset has %d", len(seen), len(d.sha))
	}
}

// fuseConnections counts the distinct FUSE connections (device numbers) mounted at paths.
func fuseConnections(t *testing.T, paths []string) int {
	f := must(os.Open("/proc/self/mountinfo"))
	defer f.Close()
	devs := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && strings.Contains(sc.Text(), " - fuse") {
			for _, p := range paths {
				if fields[4] == p {
					devs[fields[2]] = true
				}
			}
		}
	}
	return len(devs)
}

func grepLines(s string, prefixes ...string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		for _, p := range prefixes {
			if strings.HasPrefix(l, p) {
				out = append(out, l)
			}
		}
	}
	return strings.Join(out, "\n")
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !ok(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after 30 s", what)
		}
	}
}

func okErr(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
