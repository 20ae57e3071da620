//go:build e2e

package e2e

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cassfs/cassfs/internal/testkit"
)

// publicDir is a new directory other users can enter (t.TempDir's parents are private).
func publicDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "cassfs-mnt-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	t.Cleanup(func() {
		if isMounted(dir) {
			syscall.Unmount(dir, syscall.MNT_DETACH)
		}
		os.Remove(dir)
	})
	return dir
}

// waitExit waits for a process that is not our child to end.
func waitExit(t *testing.T, pid int, within time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(within); syscall.Kill(pid, 0) == nil; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("process %d still runs %v after its mount was unmounted", pid, within)
		}
	}
}

func umount(t *testing.T, dir string) {
	t.Helper()
	if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
		t.Fatalf("umount %s: %v\n%s", dir, err, out)
	}
}

// TestDaemonAndMountHelper: --daemon returns once the mount serves and the background mount
// ends when unmounted; mount(8) mounts through the helper, from an fstab line with a
// configuration file and from -t fuse.cassfs.
func TestDaemonAndMountHelper(t *testing.T) {
	d := sharedDataset(t)
	dir := publicDir(t)
	r := cassfs(t, "mount", "--daemon", "-d", d.name, dir)
	m := regexp.MustCompile(`serving .* in the background \(pid (\d+), log (\S+)\)`).FindStringSubmatch(r.stderr)
	if r.code != 0 || m == nil || !isMounted(dir) {
		t.Fatalf("mount --daemon: %s", r)
	}
	pid := testkit.Must(strconv.Atoi(m[1]))(t)
	if r := cassfs(t, "stats", "--interval", "10ms", dir); r.code != 0 {
		t.Errorf("stats of the background mount: %s", r)
	}
	umount(t, dir)
	waitExit(t, pid, 10*time.Second)
	if log := testkit.Must(os.ReadFile(m[2]))(t); !strings.Contains(string(log), "unmounted from outside") {
		t.Errorf("the background mount's log %s does not say it was unmounted:\n%s", m[2], log)
	}

	// mount(8) finds helpers at /sbin/mount.<type>: install this build's there for the
	// test, and put back whatever was there before (an installed cassfs, say).
	installHelper(t, "/sbin/mount.fuse.cassfs")
	cfg := filepath.Join(t.TempDir(), "shared.yaml")
	if err := os.WriteFile(cfg, []byte("seed: 11\norder: strict\ncache-size: 64MiB\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fstab := filepath.Join(t.TempDir(), "fstab")
	line := d.name + " " + dir + " fuse.cassfs ro,noauto,_netdev,hosts=" + strings.Join(hosts, ":") + ",config=" + cfg + " 0 0\n"
	if err := os.WriteFile(fstab, []byte("# cassfs test\n"+line), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-T", fstab, dir).CombinedOutput(); err != nil {
		t.Fatalf("mount -T fstab %s: %v\n%s", dir, err, out)
	}
	paths, _ := fileList(t, filepath.Join(dir, "all", "epoch-0"))
	want := expectedOrder(d, 11, 0) // seed and strict order from the configuration file
	for k := range 5 {
		if origName(paths[k]) != want[k] {
			t.Fatalf("the fstab mount's epoch 0 is not the order of seed 11 (position %d: %s, want %s)", k, paths[k], want[k])
		}
	}
	if data, err := os.ReadFile(filepath.Join(dir, "all", "epoch-0", paths[0])); err != nil || sha(data) != d.sha[want[0]] {
		t.Errorf("read through the fstab mount: %v", err)
	}
	umount(t, dir)

	if out, err := exec.Command("mount", "-t", "fuse.cassfs", "-o", "hosts="+strings.Join(hosts, ":")+",epochs_listed=3", d.name, dir).CombinedOutput(); err != nil {
		t.Fatalf("mount -t fuse.cassfs: %v\n%s", err, out)
	}
	entries, err := os.ReadDir(filepath.Join(dir, "all"))
	epochs := 0
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "epoch-") && !strings.Contains(e.Name(), ".") { // not epoch-N.wds
			epochs++
		}
	}
	if err != nil || epochs != 3 {
		t.Errorf("mount -t fuse.cassfs -o epochs_listed=3: %d epochs listed, %v", epochs, err)
	}
	umount(t, dir)
	if out, err := exec.Command("mount", "-t", "fuse.cassfs", "-o", "no_such_option=1", d.name, dir).CombinedOutput(); err == nil || !strings.Contains(string(out), "no-such-option") {
		t.Errorf("mount with an unknown option: %v\n%s", err, out)
	}
}

// TestOtherUsers: only the mounting user may enter the mount, unless --allow-other.
func TestOtherUsers(t *testing.T) {
	d := sharedDataset(t)
	asNobody := func(dir string) error {
		cmd := exec.Command("ls", filepath.Join(dir, "all"))
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.CombinedOutput()
		if err != nil {
			return errors.New(strings.TrimSpace(string(out)))
		}
		return nil
	}
	private := startMountAt(t, publicDir(t), d.name)
	if err := asNobody(private.dir); err == nil || !strings.Contains(err.Error(), "Permission denied") {
		t.Errorf("another user listed a mount without --allow-other: %v", err)
	}
	shared := startMountAt(t, publicDir(t), d.name, "--allow-other")
	if err := asNobody(shared.dir); err != nil {
		t.Errorf("another user could not list a mount with --allow-other: %v", err)
	}
}

// installHelper makes path a symbolic link to the binary under test until the test ends,
// moving what was there aside and restoring it afterwards.
func installHelper(t *testing.T, path string) {
	t.Helper()
	saved := ""
	if _, err := os.Lstat(path); err == nil {
		saved = path + ".cassfs-test-saved"
		if err := os.Rename(path, saved); err != nil {
			t.Fatalf("move the installed mount helper %s aside: %v", path, err)
		}
	}
	if err := os.Symlink(cassfsBin, path); err != nil {
		t.Fatalf("install the mount helper %s: %v", path, err)
	}
	t.Cleanup(func() {
		if err := os.Remove(path); err != nil {
			t.Errorf("remove the test's mount helper: %v", err)
		}
		if saved != "" {
			if err := os.Rename(saved, path); err != nil {
				t.Errorf("restore the mount helper %s: %v", path, err)
			}
		}
	})
}
