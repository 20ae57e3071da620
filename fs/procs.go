package fs

import (
	"runtime"
	"sync"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// procs is the GOMAXPROCS of the process's servers (see "Ps for the work" in the package
// doc); guarded by its lock.
var procs struct {
	sync.Mutex
	base    int // GOMAXPROCS before the first server
	servers int // serving now
}

// procsFor is GOMAXPROCS with n servers serving: base and readersPerServer for each, at
// most 4 times the base (many servers in one process: the garbage collector runs a
// quarter of GOMAXPROCS workers at once, which must not crowd the cores).
func procsFor(base, n int) int {
	return min(base+readersPerServer*n, max(4*base, base+readersPerServer))
}

// readersPerServer is how many of a server's goroutines may wait in read(2) at once when
// it was made with GOMAXPROCS 2 (go-fuse v2.12: maxReaders+1).
const readersPerServer = 3

// newServer is fuse.NewServer with the Ps set as above; serverDone must follow once the
// server has stopped serving.
func newServer(raw fuse.RawFileSystem, mountpoint string, o *fuse.MountOptions) (*fuse.Server, error) {
	procs.Lock()
	defer procs.Unlock()
	if procs.servers == 0 {
		procs.base = runtime.GOMAXPROCS(0)
	}
	runtime.GOMAXPROCS(2)
	s, err := fuse.NewServer(raw, mountpoint, o)
	if err == nil {
		procs.servers++
	}
	runtime.GOMAXPROCS(procsFor(procs.base, procs.servers))
	return s, err
}

// serverDone gives back the Ps of a server that stopped serving.
func serverDone() {
	procs.Lock()
	defer procs.Unlock()
	procs.servers--
	runtime.GOMAXPROCS(procsFor(procs.base, procs.servers))
}
