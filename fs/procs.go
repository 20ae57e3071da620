package fs

import (
	"runtime"
	"sync"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// # Ps for the work, beside go-fuse's waiting readers
//
// go-fuse reads requests in goroutines blocked in read(2) on /dev/fuse, and each keeps its
// P (the Go scheduler's right to run Go code) through the call. As many as maxReaders+1
// wait at once, maxReaders being GOMAXPROCS when the server is made (go-fuse v2.12
// NewServer and fuseFD.readRequest; at least 2). With GOMAXPROCS at the number of cores,
// waiting readers hold every P: a goroutine woken meanwhile (a fetch's answer, the
// prefetcher, a push) runs only after the runtime's monitor (sysmon) takes a P back from a
// reader in its syscall, which sysmon checks every 20 µs for as long as it keeps finding
// such Ps (Go's runtime/proc.go, retake: a P in a syscall is left alone while another P
// is idle): on warm epochs sysmon's wake-ups, waking nothing else, take a large share of
// the daemon's CPU (bench/history/journal.md, "go-fuse's waiting readers no longer hold
// every P").
//
// So every server is made with GOMAXPROCS at 2 (go-fuse's fewest readers: at most 3
// waiting), and GOMAXPROCS is then the process's own plus readersPerServer for each server
// serving (procsFor): the readers waiting never hold the Ps the work needs, and sysmon
// relaxes. Were go-fuse to have more readers wait (another version), GOMAXPROCS would be
// too low again. Setting GOMAXPROCS ends the runtime's own updates of it from the CPU limit of
// the cgroup (Go 1.25+); the base is the value the runtime chose when the first server
// was made.
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
