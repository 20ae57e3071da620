package mount

import (
	"context"
	"os"
	"runtime/debug"
	"time"
)

// A Mount sets none of the process's runtime settings: a process serving several mounts
// decides the garbage collector's target and the heap limit once, for all of them, with
// the functions below. cassfs mount, serving one:
//
//	restore := mount.TightGC()
//	m, err := mount.Open(ctx, st, o, log)
//	restore()
//	...
//	mount.SetMemoryLimit(m)

// TightGC sets the collector's target to GOGC=25 while indexes load, unless GOGC is set in
// the environment (the user's choice wins), and returns the function that restores the
// previous target: call it once around opening every mount the process serves, not per
// mount (two mounts opened at once would otherwise restore each other's 25).
//
// Loading an index makes garbage at the rate the scan decodes rows (a row, its metadata,
// its strings), and the runtime's default lets the heap grow to twice what is live before
// it collects: at a million samples that peak would be the daemon's largest. A tighter
// target while the index loads costs some CPU and keeps the peak near what the index
// holds.
func TightGC() (restore func()) {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	old := debug.SetGCPercent(25)
	return func() { debug.SetGCPercent(old) }
}

// MemoryLimit is the heap limit of a process serving mounts: for each, what it holds (its
// cache, its index and epoch orders: Mount.heap) and MemOverhead. The overhead is counted
// per mount since most of it is: each has its requests in flight, its FUSE buffers and, with
// a store of its own, its driver's frame buffers; only the runtime's share is the
// process's, and a limit a little high costs nothing but headroom.
//
// A mount's heap counts one prefetch stream per split it shows; each stream beyond those
// (shard directories and resumed views being read) holds the future of its epochs, 8
// bytes per sample of the dataset, and is counted as it is now: KeepMemoryLimit follows.
func MemoryLimit(mounts ...*Mount) int64 {
	var limit int64
	for _, m := range mounts {
		limit += m.heap + MemOverhead
		if m.prefetcher != nil {
			limit += int64(max(m.prefetcher.Streams()-len(m.Shown), 0)) * 8 * int64(m.Index.Len())
		}
	}
	return limit
}

// KeepMemoryLimit sets the process's heap limit as SetMemoryLimit does for the mounts
// served now (mounts; none: left as it is), and again every few seconds until ctx ends, as
// the streams read and the mounts served come and go.
func KeepMemoryLimit(ctx context.Context, mounts func() []*Mount) {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		if ms := mounts(); len(ms) > 0 {
			SetMemoryLimit(ms...)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// SetMemoryLimit bounds the process's heap to MemoryLimit(mounts...), unless GOMEMLIMIT is
// set in the environment (the user's choice wins). Go's collector otherwise lets the heap
// grow to twice what is live. Call it once, with every mount the process serves.
func SetMemoryLimit(mounts ...*Mount) {
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(MemoryLimit(mounts...))
	}
}
