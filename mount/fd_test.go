package mount

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cassfs/cassfs/internal/testkit"
	"github.com/cassfs/cassfs/view"
	"golang.org/x/sys/unix"
)

// TestServeFD: a dataset served on a /dev/fuse descriptor mounted by someone else (as a
// CSI node plugin does) reads through the mountpoint; the lookahead helper the mount starts
// does not inherit the connection (the descriptor was handed over inheritable); nothing
// but the mountpoint is mounted; and Unmount leaves nothing mounted, no control socket
// and the mount Done.
func TestServeFD(t *testing.T) {
	o := Defaults()
	o.LookaheadHelper = []string{"sh", "-c", "exec cat >/dev/null", "sh"}
	// Strict: the name read is its own sample's (under arrival binding it is bound to
	// whichever sample of its class arrived first, another when prefetches are quick).
	o.Order = view.Strict
	m := testkit.Must(Open(context.Background(), smallStore(t, 30), o, slog.New(slog.DiscardHandler)))(t)
	defer m.Close()
	dir := t.TempDir()
	fd := testkit.MountFUSE(t, dir)
	srv := testkit.Must(m.ServeFD(context.Background(), fd, dir))(t)
	if got, want := testkit.MountsAt(t, dir, "/dev/fuse"), []string{"fuse.cassfs at " + dir}; !slices.Equal(got, want) {
		t.Fatalf("serving: mounted %q, want %q", got, want)
	}
	testkit.Check(t, srv.WaitMount())
	list := string(testkit.Must(os.ReadFile(filepath.Join(dir, "all", "epoch-0", "file_list.txt")))(t))
	name, _, _ := strings.Cut(list, " ")
	got := testkit.Must(os.ReadFile(filepath.Join(dir, "all", "epoch-0", name)))(t)
	_, file, _ := strings.Cut(name, "_")
	var size int
	if _, err := fmt.Sscanf(file, "img%d.jpg", &size); err != nil || len(got) != 1000+size {
		t.Errorf("%s: read %d bytes (%v), want sample %d's 1000+%d", name, len(got), err, size, size)
	}

	if srv.helper == nil {
		t.Fatal("no lookahead helper started")
	}
	fds := testkit.Must(os.ReadDir(fmt.Sprintf("/proc/%d/fd", srv.helper.cmd.Process.Pid)))(t)
	for _, e := range fds {
		if target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", srv.helper.cmd.Process.Pid, e.Name())); err == nil && target == "/dev/fuse" {
			t.Errorf("the lookahead helper holds the FUSE connection (its descriptor %s)", e.Name())
		}
	}

	testkit.Check(t, srv.Unmount())
	select {
	case <-srv.Done():
	default:
		t.Error("not Done after Unmount")
	}
	if got := testkit.MountsAt(t, dir, "/dev/fuse"); len(got) != 0 {
		t.Errorf("after Unmount: mounted %q, want nothing", got)
	}
	if _, err := os.Stat(ControlSocket(dir)); !os.IsNotExist(err) {
		t.Errorf("control socket after Unmount: %v, want none", err)
	}
}

// TestUnmountWithoutPrivilege: a daemon that may not unmount (a mount handed over to an
// unprivileged one) says so at once, naming who unmounts, instead of retrying and then
// failing to detach.
func TestUnmountWithoutPrivilege(t *testing.T) {
	tries := 0
	err := unmount("/mnt/x", func() error { tries++; return fmt.Errorf("unmount /mnt/x: %w", unix.EPERM) }, nil, slog.New(slog.DiscardHandler))
	if tries != 1 || !errors.Is(err, unix.EPERM) || !strings.Contains(err.Error(), "mounter") {
		t.Errorf("after %d tries: %v, want one try and an error saying the mounter unmounts", tries, err)
	}
}
