package fs_test

import (
	"bytes"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	cfs "github.com/cassfs/cassfs/fs"
	"github.com/cassfs/cassfs/store/memstore"
)

// TestWaitingReadersLeaveThePs: go-fuse's goroutines waiting in read(2) on /dev/fuse keep
// their Ps, so GOMAXPROCS is raised while a mount serves, by at least as many as wait, and
// given back when it stops (fs/procs.go).
func TestWaitingReadersLeaveThePs(t *testing.T) {
	noServers(t) // an earlier test's server may still be stopping
	base := runtime.GOMAXPROCS(0)
	t.Run("mounted", func(t *testing.T) {
		f := newFixture(t, 64, []string{"a", "b"}, memstore.Options{})
		mnt := f.mount(t, mountOpts{})
		paths := epochPaths(t, mnt, "0")
		var wg sync.WaitGroup
		for w := range 16 { // requests at once: go-fuse starts more readers
			wg.Add(1)
			go func() {
				defer wg.Done()
				for _, p := range paths[w*4 : w*4+4] {
					if _, err := os.ReadFile(p); err != nil {
						t.Error(err)
					}
				}
			}()
		}
		wg.Wait()
		time.Sleep(100 * time.Millisecond) // the readers back in read(2)
		waiting := waitingReaders()
		if got := runtime.GOMAXPROCS(0); got-base < waiting || got == base {
			t.Errorf("GOMAXPROCS %d with %d go-fuse readers waiting, %d before the mount: waiting readers hold Ps the work needs", got, waiting, base)
		}
		t.Logf("GOMAXPROCS %d, %d readers waiting, %d before", runtime.GOMAXPROCS(0), waiting, base)
	})
	noServers(t)
	if got := runtime.GOMAXPROCS(0); got != base {
		t.Errorf("GOMAXPROCS %d after the unmount, %d before the mount", got, base)
	}
}

// noServers waits until the process serves no mount (a server stops serving a little after
// its unmount returns).
func noServers(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); cfs.ServersServing() != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d servers still serving after 10 s", cfs.ServersServing())
		}
	}
}

// Each server serving adds its waiting readers to GOMAXPROCS, up to four times the base.
func TestProcsFor(t *testing.T) {
	for _, c := range []struct{ base, n, want int }{
		{2, 0, 2}, {2, 1, 5}, {2, 2, 8}, {2, 5, 8}, {1, 1, 4}, {1, 3, 4}, {64, 3, 73},
	} {
		if got := cfs.ProcsFor(c.base, c.n); got != c.want {
			t.Errorf("GOMAXPROCS %d with %d servers: %d, want %d", c.base, c.n, got, c.want)
		}
	}
}

// waitingReaders counts goroutines blocked reading /dev/fuse.
func waitingReaders() int {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		if strings.Contains(string(g), "fuseFD).readRequest") && strings.Contains(string(g), "syscall.Read") {
			n++
		}
	}
	return n
}
