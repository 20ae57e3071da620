package serve

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cassfs/cassfs/handover"
	"github.com/cassfs/cassfs/internal/testkit"
	"github.com/cassfs/cassfs/mount"
	"github.com/cassfs/cassfs/store"
	"github.com/cassfs/cassfs/store/cassandra"
	"github.com/cassfs/cassfs/store/memstore"
	"github.com/cassfs/cassfs/store/storetest"
	"golang.org/x/sys/unix"
)

// TestServeHandedOverVolumes: the daemon serves a volume whose /dev/fuse connection was
// mounted elsewhere and handed over, with the volume's attributes and secrets; refuses a
// volume with a bad attribute, naming it; ends a volume when its connection is unmounted;
// and stops when its context ends.
func TestServeHandedOverVolumes(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting /dev/fuse needs root")
	}
	st := memstore.New("tiles", memstore.Options{})
	testkit.Check(t, st.SetLabels(context.Background(), []string{"class0", "class1"}))
	for i := range 20 {
		s, data := storetest.MakeSample("tiles", i, i%2, 500+i)
		testkit.Check(t, st.Put(context.Background(), s, data, nil))
	}
	secrets := make(chan map[string]string, 4)
	sock := filepath.Join(t.TempDir(), "serve.sock")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	d := make(chan *daemon, 1)
	go func() {
		done <- run(ctx, Config{Socket: sock, Log: slog.New(slog.DiscardHandler), Open: func(ctx context.Context, v mount.Volume, s map[string]string) (store.Store, error) {
			secrets <- s
			if v.Dataset != "tiles" {
				return nil, store.ErrNotFound
			}
			return st, nil
		}}, func(x *daemon) { d <- x })
	}()
	// Listening: the socket's file appears at bind, before the daemon listens, and a
	// hand-over then is refused.
	var daemon *daemon
	select {
	case daemon = <-d:
	case err := <-done:
		t.Fatalf("the daemon ended before it listened: %v", err)
	}

	dir := t.TempDir()
	fd := testkit.MountFUSE(t, dir)
	err := handover.Send(ctx, sock, fd, handover.Volume{ID: "v1", Mountpoint: dir,
		Attributes: map[string]string{"dataset": "tiles", "order": "strict"}, Secrets: handover.Secrets{"username": "trainer", "password": "pw"}})
	unix.Close(fd)
	testkit.Check(t, err)
	if s := <-secrets; s["username"] != "trainer" || s["password"] != "pw" {
		t.Errorf("the dataset was opened with secrets %v, want the volume's", len(s))
	}
	// Read by another process: this one serves the mount, and a Go program reading its own
	// mount must first run go-fuse's poll hack, which a handed-over server cannot (see
	// fs.Mount).
	list := string(testkit.Must(exec.Command("cat", filepath.Join(dir, "all", "epoch-0", "file_list.txt")).Output())(t))
	if n := strings.Count(list, "\n"); n != 20 {
		t.Errorf("the volume's epoch 0 lists %d files, want 20", n)
	}

	// A second volume, served by the same process beside the first.
	second := t.TempDir()
	fd = testkit.MountFUSE(t, second)
	err = handover.Send(ctx, sock, fd, handover.Volume{ID: "v3", Mountpoint: second, Attributes: map[string]string{"dataset": "tiles", "seed": "9"}})
	unix.Close(fd)
	testkit.Check(t, err)
	<-secrets
	if n := daemon.served(); n != 2 {
		t.Errorf("%d volumes served, want 2", n)
	}
	other := string(testkit.Must(exec.Command("cat", filepath.Join(second, "all", "epoch-0", "file_list.txt")).Output())(t))
	if other == list || strings.Count(other, "\n") != 20 {
		t.Errorf("the second volume (seed 9) lists the first's order or not 20 files")
	}
	testkit.Check(t, unix.Unmount(second, 0))

	bad := t.TempDir()
	fd = testkit.MountFUSE(t, bad)
	err = handover.Send(ctx, sock, fd, handover.Volume{ID: "v2", Mountpoint: bad, Attributes: map[string]string{"dataset": "tiles", "seed": "x"}})
	unix.Close(fd)
	var refused *handover.RefusedError
	if !errors.As(err, &refused) || !strings.Contains(err.Error(), `"seed"`) {
		t.Errorf("a volume with seed x: %v, want a refusal naming the attribute", err)
	}
	unix.Unmount(bad, unix.MNT_DETACH)

	testkit.Check(t, unix.Unmount(dir, 0)) // the plugin unstages
	for deadline := time.Now().Add(10 * time.Second); daemon.served() != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the volume is still served 10 s after its connection was unmounted")
		}
	}
	cancel()
	select {
	case err := <-done:
		testkit.Check(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return 10 s after its context ended")
	}
}

// TestDemandReadsNeverWaitBehindAnotherVolumesPrefetches: two volumes of one cluster read
// through one database session; while the first's prefetches are in flight (a stream's
// first window, 64, beyond the session's 20 slots), a demand read of the second finds a
// slot at once: the prefetches of every volume together hold no more than the session's
// prefetch share.
func TestDemandReadsNeverWaitBehindAnotherVolumesPrefetches(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting /dev/fuse needs root")
	}
	session := storetest.NewSession(20, cassandra.PrefetchShare(20), 200*time.Millisecond)
	stores := map[string]store.Store{}
	for _, name := range []string{"alpha", "beta"} {
		st := memstore.New(name, memstore.Options{})
		testkit.Check(t, st.SetLabels(context.Background(), []string{"class0", "class1"}))
		for i := range 200 {
			s, data := storetest.MakeSample(name, i, i%2, 100+i)
			testkit.Check(t, st.Put(context.Background(), s, data, nil))
		}
		stores[name] = session.Store(st)
	}
	sock := filepath.Join(t.TempDir(), "serve.sock")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d := make(chan *daemon, 1)
	go run(ctx, Config{Socket: sock, Log: slog.New(slog.DiscardHandler), Open: func(ctx context.Context, v mount.Volume, s map[string]string) (store.Store, error) {
		return stores[v.Dataset], nil
	}}, func(x *daemon) { d <- x })
	<-d
	dirs := map[string]string{}
	for _, name := range []string{"alpha", "beta"} {
		dir := t.TempDir()
		fd := testkit.MountFUSE(t, dir)
		err := handover.Send(ctx, sock, fd, handover.Volume{ID: name, Mountpoint: dir, Attributes: map[string]string{"dataset": name, "order": "strict", "splits": ""}})
		unix.Close(fd)
		testkit.Check(t, err)
		dirs[name] = dir
		t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	}
	// Read by other processes (see TestServeHandedOverVolumes).
	cat := func(p string) ([]byte, error) { return exec.Command("cat", p).Output() }
	storetest.CheckDemandRead(t, session, dirs["alpha"], dirs["beta"], "beta", cat)
}
