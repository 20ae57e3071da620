package fs_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	cfs "github.com/cassfs/cassfs/fs"
	"github.com/cassfs/cassfs/internal/testkit"
	"github.com/cassfs/cassfs/prefetch"
	"github.com/cassfs/cassfs/splits"
	"github.com/cassfs/cassfs/store/memstore"
	"github.com/cassfs/cassfs/view"
	"golang.org/x/sys/unix"
)

// TestServeFD: a /dev/fuse descriptor mounted by someone else (as a CSI node plugin
// does) is served: files read through the mountpoint, nothing else mounted (go-fuse given
// "/dev/fd/N" as a direct mount would mount over /dev/fuse itself), and once the
// mountpoint is unmounted nothing is left mounted and serving has ended.
func TestServeFD(t *testing.T) {
	requireFUSE(t)
	f := newFixture(t, 9, classes, memstore.Options{})
	cache := prefetch.NewCache(prefetch.StoreFetch(f.st, f.ix), prefetch.CacheOptions{MaxBytes: 1 << 20})
	defer cache.Close()
	fsys := cfs.New(cfs.Config{Views: view.New(view.Config{Index: f.ix, Splits: []*splits.Split{splits.All(f.ix)}}), Blobs: cache})
	dir := t.TempDir()
	fd := testkit.MountFUSE(t, dir)
	server := testkit.Must(cfs.ServeFD(fd, dir, fsys, cfs.MountOptions{}))(t)
	if got, want := testkit.MountsAt(t, dir, "/dev/fuse"), []string{"fuse.cassfs at " + dir}; !slices.Equal(got, want) {
		// Whatever is mounted over /dev/fuse goes before anything opens it again, and the
		// mount at dir may be served by nobody: nothing may read it.
		if err := unix.Unmount("/dev/fuse", unix.MNT_DETACH); err != nil && err != unix.EINVAL {
			t.Errorf("detach /dev/fuse: %v", err)
		}
		t.Fatalf("serving: mounted %q, want %q", got, want)
	}
	testkit.Check(t, server.WaitMount())
	root := filepath.Join(dir, "all", "epoch-0")
	list := testkit.Must(os.ReadFile(filepath.Join(root, "file_list.txt")))(t)
	lines := strings.Split(strings.TrimSpace(string(list)), "\n")
	if len(lines) != 9 {
		t.Fatalf("file_list.txt lists %d files, want 9:\n%s", len(lines), list)
	}
	for _, line := range lines {
		name, _ := splitLine(line)
		got := testkit.Must(os.ReadFile(filepath.Join(root, name)))(t)
		_, file, _ := strings.Cut(name, "_")
		if want := f.blobs[class(name)+"/"+file]; !bytes.Equal(got, want) {
			t.Errorf("%s: read %d bytes, want the %d of %s/%s", name, len(got), len(want), class(name), file)
		}
	}
	served := make(chan struct{})
	go func() { server.Wait(); close(served) }()
	testkit.Check(t, server.Unmount())
	if got := testkit.MountsAt(t, dir, "/dev/fuse"); len(got) != 0 {
		t.Errorf("after unmounting: mounted %q, want nothing", got)
	}
	select {
	case <-served:
	case <-time.After(10 * time.Second):
		t.Error("serving had not ended 10 s after the unmount")
	}
}

// TestServeFDRefuses what it cannot serve, and closes the descriptor it was given: one not
// on /dev/fuse, or none go-fuse would take as one, and a relative mountpoint.
func TestServeFDRefuses(t *testing.T) {
	fsys := cfs.New(cfs.Config{Views: view.New(view.Config{Index: testkit.Index(t, 3, 1), Splits: nil})})
	null := func() int { return testkit.Must(unix.Open(os.DevNull, unix.O_RDWR|unix.O_CLOEXEC, 0))(t) }
	for _, tc := range []struct {
		name string
		fd   func() int
		dir  string
		want string
	}{
		{"standard input", func() int { return 0 }, "/mnt", "want one above 0"},
		{os.DevNull, null, "/mnt", "not open on /dev/fuse"},
		{"closed", func() int { return 1 << 20 }, "/mnt", "bad file descriptor"},
		{"relative mountpoint", null, "mnt", "not an absolute path"},
	} {
		fd := tc.fd()
		if _, err := cfs.ServeFD(fd, tc.dir, fsys, cfs.MountOptions{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: ServeFD: %v, want an error saying %q", tc.name, err, tc.want)
		}
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); fd > 0 && err != unix.EBADF {
			t.Errorf("%s: descriptor %d still open after ServeFD refused it (%v)", tc.name, fd, err)
		}
	}
}
