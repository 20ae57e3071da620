package fs_test

import (
	"log"
	"os"
	"regexp"
	"testing"

	cfs "github.com/cassfs/cassfs/fs"
	"github.com/cassfs/cassfs/internal/testkit"
	"github.com/cassfs/cassfs/prefetch"
	"github.com/cassfs/cassfs/splits"
	"github.com/cassfs/cassfs/store/memstore"
	"github.com/cassfs/cassfs/view"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// requireFUSE skips a test that mounts where it cannot.
func requireFUSE(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting with DirectMount needs root")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("no FUSE: %v", err)
	}
}

// mountSelf mounts fsys at dir for a test or benchmark that reads the mount from its own
// process. It runs go-fuse's poll hack, which cfs.Mount leaves out. Without it, this
// process's first opens of files on the mount register them with the Go runtime's epoll,
// which sends the mount a POLL while holding a P; with every P held that way, no goroutine
// is left to answer.
func mountSelf(t testing.TB, dir string, fsys *cfs.FS, o cfs.MountOptions) *fuse.Server {
	t.Helper()
	server, err := cfs.Mount(dir, fsys, o)
	if err != nil {
		t.Fatal(err)
	}
	if err := server.WaitMount(); err != nil {
		server.Unmount()
		t.Fatal(err)
	}
	return server
}

// TestMountMakesNoRequestOfItsOwn: Mount sends its new mount no request but the kernel's
// INIT. A daemon that waits on its own mount cannot be killed: a thread waiting for an
// answer the dead threads will never give holds /dev/fuse open, so the kernel never aborts
// the connection, and process and mount hang until someone aborts it by hand.
func TestMountMakesNoRequestOfItsOwn(t *testing.T) {
	requireFUSE(t)
	f := newFixture(t, 3, classes, memstore.Options{})
	cache := prefetch.NewCache(prefetch.StoreFetch(f.st, f.ix), prefetch.CacheOptions{MaxBytes: 1 << 20})
	defer cache.Close()
	fsys := cfs.New(cfs.Config{Views: view.New(view.Config{Index: f.ix, Splits: []*splits.Split{splits.All(f.ix)}}), Blobs: cache})
	var debug testkit.SyncBuffer
	dir := t.TempDir()
	server, err := cfs.Mount(dir, fsys, cfs.MountOptions{FsName: "cassfs:test", Debug: true, Logger: log.New(&debug, "", 0)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := server.Unmount(); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	}()
	request := regexp.MustCompile(`(?m)^rx \d+: (\w+)`)
	atMount := debug.String()
	if len(request.FindAllString(atMount, -1)) == 0 {
		t.Fatalf("the debug log shows no INIT; it cannot show requests:\n%s", atMount)
	}
	for _, m := range request.FindAllStringSubmatch(atMount, -1) {
		if m[1] != "INIT" {
			t.Errorf("Mount sent its own mount a %s:\n%s", m[1], atMount)
		}
	}
	// What the check above would see: a file of the mount opened by this process.
	if err := server.WaitMount(); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^rx \d+: OPEN`).MatchString(debug.String()) {
		t.Errorf("an open from this process is not in the debug log:\n%s", debug.String())
	}
}
