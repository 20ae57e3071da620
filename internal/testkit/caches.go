package testkit

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// held counts this process's exclusive holds: a test that holds the caches exclusively
// may then mount as a test that counts on them does (a second flock of this process's
// would wait for its own).
var held struct {
	sync.Mutex
	exclusive int
}

// LockCaches holds the machine's kernel caches for the rest of test t: exclusively for a
// test that drops them (drop_caches is the whole machine's, and go test runs the packages'
// tests at once), shared for one whose assertions count on what they hold. The lock is an
// flock on a file in the temporary directory, so it holds across test processes.
func LockCaches(t testing.TB, exclusive bool) {
	t.Helper()
	held.Lock()
	defer held.Unlock()
	if held.exclusive > 0 {
		if exclusive {
			t.Fatal("the kernel caches are held exclusively already")
		}
		return
	}
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "cassfs-test-kernel-caches.lock"), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		t.Fatal(err)
	}
	how := unix.LOCK_SH
	if exclusive {
		how = unix.LOCK_EX
	}
	for {
		err = unix.Flock(int(f.Fd()), how)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		t.Fatalf("lock the kernel caches: %v", err)
	}
	if exclusive {
		held.exclusive++
	}
	t.Cleanup(func() {
		held.Lock()
		defer held.Unlock()
		if exclusive {
			held.exclusive--
		}
		f.Close() // closing releases the lock
	})
}
