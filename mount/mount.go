// Package mount opens a dataset as a cassfs mount: the one place where the index, the
// memory cache, the disk tier, the prefetcher, the views and the filesystem are made to
// agree, and where a mount is served, watched (metrics, the control socket, `cassfs stats`)
// and unmounted. `cassfs mount` is flags → Options → Open → Serve; tests and benchmarks
// open mounts the same way. ServeFD serves instead a /dev/fuse descriptor another process
// mounted and handed over (a privileged CSI node plugin, for an unprivileged daemon). The
// collector's target while indexes load and the heap limit are the process's, set once for
// all its mounts (TightGC, SetMemoryLimit); the one setting a mount changes itself is
// GOMAXPROCS, which package fs raises while the mount's server serves (fs/procs.go).
//
// # The read chain
//
// One file, from the reader's READ down to the database; each link is a named type, and
// each arrow a call into the next package down (what calls back up, with no lock held, is
// the arrival callback and, with pushing, the Cache's push into fs: below):
//
//	READ                        fs        sampleFile.Read: the sample's node
//	  → fs.BlobSource           prefetch  *prefetch.Cache: from memory, joining the fetch in
//	                                      flight, or fetching (deduplicated, byte-bounded)
//	  → prefetch.Fetcher        mount     *timedFetcher: the fetch latency and errors metrics
//	                                      (under the disk tier, so it times the database)
//	  … with --cache-dir, above it:
//	  → prefetch.Fetcher        disktier  *disktier.Fetcher: the entry's file if it verifies,
//	                                      else the next link, then written to disk
//	  → prefetch.Fetcher        prefetch  *prefetch.StoreFetcher: one point read, verified
//	                                      against the index (size, label, CRC32C)
//	  → store.BlobReader        store/hedge: on a cluster, *hedge.Reader sends a read not
//	                                      answered within Options.HedgeAfter once more
//	  → store.BlobReader        store/cassandra: the blob, handed over without a copy
//
// A sample the disk tier holds may instead be opened from its file (fs.Backing, here
// diskBacking): passed through to the kernel, or spliced by fs. With pushing, blobs reach
// the kernel's page cache before any READ: the Cache calls fs.FS.Push as each prefetch
// arrives. LOOKUP reaches the prefetcher through view.Set (Prefetcher.Access), which
// moves the window and issues prefetches into the Cache.
//
// # Locks taken across packages
//
// A prefetch stream's lock may be held while taking prefetch.Cache.mu (issuing a
// prefetch), never the other way round. Under Cache.mu only lock-free calls leave the
// package: the Local predicate (disktier.Tier.Holds, a bitset read), the eviction future
// (Prefetcher.Next, atomics) and the push predicate's bitset reads. Pushes into the page
// cache (fs.FS.Push) and arrival callbacks run after Cache.mu is released. view.Set reports
// accesses to the prefetcher with none of its locks held; arrival binding holds its
// epoch's lock while it asks the cache whether samples arrived (Cache.Has, a bitset read
// here since the cache knows the sample count); the prefetcher asks a stream's epoch order
// (view.Stream.Order, which takes view.Set.mu) with no lock of its own held.
// disktier.Tier.mu and fs's locks are leaves: nothing is taken while they are held (fs's
// lookahead asks Cache.Has under its lock, a bitset read).
//
// # The memory cgroup the daemon is charged to
//
// Kubernetes (the node plugin's container, contrib/kubernetes) and systemd (MemoryMax=)
// run cassfs in a memory cgroup with a limit. Pages the daemon pushes into the page cache
// (fs.FS.Push) are charged to the cgroup of the process that writes them, the daemon's,
// while pages a READ brings in are charged to the reader's; once the daemon's cgroup is at
// its limit, the kernel reclaims the daemon's own page cache to make room, pushed pages
// not yet read among them. So the daemon pushes within what its limit leaves (pushRoom),
// and lets READs carry the rest.
//
// Both cgroup versions are read: v1's memory controller (memory.limit_in_bytes,
// memory.usage_in_bytes, memory.stat's total_cache) and v2's (memory.max,
// memory.current, memory.stat's file), found through /proc/self/cgroup and
// /proc/self/mountinfo, and for a limit set on an ancestor (a pod's, a slice's) each level
// up to the hierarchy's root: the level with the least room is the one that reclaims.
//
// A kernel may also reclaim with memory to spare: a DAMON pageout scheme takes file pages
// it finds cold, which includes files read once an epoch, from the mount and from local
// disk alike. Local disk reads them again from its disk; the mount fetches them from the
// database, unless a disk tier holds them. So a mount that pushes a dataset larger than
// --cache-size, without --cache-dir, on such a kernel says so once as it starts
// (reclaimHint).
package mount

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/cassfs/cassfs/disktier"
	cfs "github.com/cassfs/cassfs/fs"
	"github.com/cassfs/cassfs/index"
	"github.com/cassfs/cassfs/internal/inflight"
	"github.com/cassfs/cassfs/prefetch"
	"github.com/cassfs/cassfs/splits"
	"github.com/cassfs/cassfs/store"
	"github.com/cassfs/cassfs/store/cassandra"
	"github.com/cassfs/cassfs/store/hedge"
	"github.com/cassfs/cassfs/view"
	"golang.org/x/sys/unix"
)

// MemOverhead is a mount's heap beyond its cache and index: Go runtime, FUSE buffers,
// requests in flight, gocql frames; MemoryLimit counts it once per mount. Measured, for a
// daemon of one mount, in the latency lab (bench/history/journal.md).
const MemOverhead = 128 << 20

// The resident memory `cassfs mount --help` promises: the cache, RSSPerSample bytes per
// sample (the index at ~85 bytes, four epoch orders and the "all" split at 36, the known
// future of the split read at 8) and RSSOverhead (MemOverhead, and what the heap limit does
// not count: the binary, thread stacks, the runtime's free pages). The e2e tests read
// these numbers from --help and hold the mount to them.
const (
	RSSPerSample = 150
	RSSOverhead  = 160 << 20
)

// Mount is a dataset opened for serving: its index, the splits it shows, and the read path
// from the filesystem down to the store.
type Mount struct {
	Index *index.Index
	Shown []*splits.Split // the splits shown, "all" first
	FS    *cfs.FS

	opts       Options
	dataset    string
	log        *slog.Logger
	cache      *prefetch.Cache
	disk       *disktier.Tier       // nil: no cache directory
	prefetcher *prefetch.Prefetcher // nil: no prefetching
	metrics    *metrics
	heap       int64 // bytes of heap the mount holds at most, but for MemOverhead
	// roundTrip is the store's shortest query answer (store/cassandra: Store.RoundTrip),
	// nil where the store does not measure one.
	roundTrip func() time.Duration
}

// Open loads the dataset's index and splits from st and wires the read path: filesystem →
// views → prefetcher → cache → (disk tier →) store. st stays the caller's: close it after
// the Mount. Errors in o are *OptionError. Everything the mount logs names its dataset.
func Open(ctx context.Context, st store.Store, o Options, log *slog.Logger) (*Mount, error) {
	log = log.With("dataset", st.Dataset())
	if err := o.Check(); err != nil {
		return nil, err
	}
	start := time.Now()
	// The stored splits need no index to be read: at long round trips that overlaps.
	var stored *splits.Stored
	var storedErr error
	fetched := make(chan struct{})
	go func() {
		defer close(fetched)
		stored, storedErr = splits.FetchStored(ctx, st, o.Splits, log)
	}()
	ix, loaded, err := index.Read(ctx, st, !o.ScanIndex, log)
	<-fetched
	if errors.Is(storedErr, splits.ErrUnknownSplit) {
		return nil, &OptionError{fmt.Errorf("--splits: %w", storedErr)}
	}
	if err != nil {
		return nil, err
	}
	if storedErr != nil {
		return nil, storedErr
	}
	from := "snapshot"
	if !loaded.FromSnapshot() {
		from = fmt.Sprintf("scan (no snapshot: %v)", loaded.NoSnapshot)
	}
	log.Info("index loaded", "samples", ix.Len(), "classes", len(ix.Labels()), "from", from, "took", time.Since(start).Round(time.Millisecond))
	reclaimHint(o, ix.TotalSize(), damonAdmin, log)
	if sc, ok := st.(interface{ LastScan() cassandra.ScanStats }); ok && !loaded.FromSnapshot() {
		s := sc.LastScan()
		log.Debug("metadata scan", "took", s.Took.Round(time.Millisecond), "pages", s.Pages, "failed", s.Failures, "peak_in_flight", s.PeakInFlight, "limit", s.Limit)
	}
	shown := stored.Resolve(ix, log)
	members := 0
	for _, s := range shown {
		members += len(s.Members)
	}
	m := &Mount{Index: ix, Shown: shown, opts: o, dataset: st.Dataset(), log: log, metrics: newMetrics()}
	if rt, ok := st.(interface{ RoundTrip() time.Duration }); ok {
		m.roundTrip = rt.RoundTrip
	}
	// What the mount holds, for the process's heap limit (MemoryLimit): the cache, the index
	// and the epoch orders.
	m.heap = int64(min(o.CacheBytes, 1<<50)) + int64(ix.Len())*(100+8*int64(len(shown))) + int64(members)*(4+8*int64(o.EpochViews))
	m.metrics.pprof = o.Pprof
	blobs, hedges := hedgedReads(st, o.HedgeAfter)
	var fetch prefetch.Fetcher = m.metrics.timed(prefetch.StoreFetch(blobs, ix))
	if o.CacheDir != "" {
		if m.disk, err = disktier.Open(o.CacheDir, st.Dataset(), ix, o.CacheDirBytes, log); err != nil {
			return nil, &OptionError{fmt.Errorf("--cache-dir: %w", err)}
		}
		m.disk.OnCorrupt = m.metrics.corruptCacheFile
		m.metrics.watchDisk(m.disk)
		ds := m.disk.Stats()
		log.Info("cache directory", "dir", o.CacheDir, "entries", ds.Entries, "bytes", ds.Bytes, "bound", ds.MaxBytes)
		fetch = m.disk.Over(fetch)
	}
	co := prefetch.CacheOptions{MaxBytes: int64(min(o.CacheBytes, 1<<62)), Samples: ix.Len(),
		Block: prefetch.BlockOptions{Samples: o.BlockSamples, HedgeAfter: o.HedgeAfter}}
	if o.HedgeAfter == 0 {
		co.Block.HedgeAfter = -1 // --speculative-after 0: never
	}
	if m.disk != nil {
		co.Block.Alone = m.disk.Holds // read from its file: no request to save
	}
	if b, ok := st.(interface{ PrefetchBound() *inflight.Bound }); ok {
		// The session's prefetches, of every mount reading through it, stay below its
		// bound together: demand reads never wait behind another volume's prefetches.
		co.Shared = b.PrefetchBound()
	}
	switch {
	case o.pushes():
		// Prefetched blobs, from the database or the disk tier alike, go into the page
		// cache ahead of their readers (m.FS is made below; pushes start after the mount).
		co.Push = func(i uint32, data []byte) bool { return m.FS.Push(i, data) }
		co.SkipPush = func(i uint32) bool { return m.FS.SkipPush(i) }
		// A file the page cache has whole from an earlier epoch is neither fetched (from
		// the database or the disk tier) nor pushed again (counted as a push skipped,
		// resident): its readers read it from the kernel. Should its pages be gone by
		// then, its READs are answered from the tier's file, or fetched on demand; READs
		// of resident files in numbers make the prefetcher look again (Config.PagesGone).
		// A later epoch of a dataset the page cache holds then costs the database
		// nothing, whatever --cache-size holds of it (bench/history/journal.md).
		co.Local = func(i uint32) bool { return m.FS.SkipPush(i) } // m.FS is made below
		if m.disk != nil {
			co.Local = func(i uint32) bool { return m.disk.Holds(i) && m.FS.SkipPush(i) }
		}
	case m.disk != nil:
		// Read from their files (passed through, or spliced), not this cache.
		co.Local = m.disk.Holds
	}
	m.cache = prefetch.NewCache(fetch, co)
	vc := view.Config{
		Index:      ix,
		Splits:     shown,
		Seed:       o.Seed,
		Shard:      o.Shard,
		EpochViews: o.EpochViews,
		Mode:       o.Order,
		Arrived:    m.cache.Has,
		ShardBytes: o.RecordShardBytes,
	}
	switch {
	case co.Push != nil:
		// What a reader can be given without waiting: a cached blob, a tier's file, or
		// pages the page cache has (which the prefetcher passes over: co.Local).
		vc.Arrived = func(i uint32) bool {
			return m.cache.Has(i) || m.FS.Resident(i) || (m.disk != nil && m.disk.Holds(i))
		}
	case m.disk != nil:
		vc.Arrived = func(i uint32) bool { return m.cache.Has(i) || m.disk.Holds(i) }
	}
	if o.Prefetch > 0 {
		// Samples: the cache evicts the blob the known epoch orders read farthest ahead;
		// so does the disk tier once full.
		m.prefetcher = prefetch.NewPrefetcher(m.cache, prefetch.Options{Size: ix.BlobSize, MaxWindow: o.Prefetch, MaxInFlight: o.PrefetchInFlight, Samples: ix.Len()})
		if m.disk != nil {
			m.disk.UseFuture(m.prefetcher)
		}
		vc.Progress = m.prefetcher
	}
	m.metrics.watch(m.cache, m.prefetcher)
	fc := cfs.Config{Views: view.New(vc), EpochsListed: o.EpochsListed, Blobs: m.cache, Logger: log, Peek: m.cache.Peek}
	if co.Push != nil {
		// Names are looked up (and class directories listed) ahead of the readers over
		// every sample at hand (vc.Arrived): a file the page cache has needs no push
		// (co.Local), and one of the disk tier's is pushed as the prefetcher brings it,
		// the kernel knowing its inode by then. Fewer LOOKUPs, less daemon CPU
		// (bench/history/journal.md).
		fc.Looked, fc.Held, fc.LookedAhead = m.cache.Looked, vc.Arrived, func(i uint32) { m.cache.PushHeld(i) }
		if m.prefetcher != nil {
			fc.PagesGone = m.prefetcher.Rewind
		}
	}
	if m.disk != nil {
		fc.Backing = diskBacking{m.disk, m.cache}
	}
	if co.Push != nil {
		if r := processPushRoom(); r != nil {
			// Pushes stay within the memory cgroup's limit (cgroup.go).
			fc.PushRoom = r.take
		}
	}
	if o.RecordsAt != "" {
		fc.RecordsDir = o.CacheDir
		if fc.RecordsDir == "" {
			fc.RecordsDir = os.TempDir()
		}
	}
	m.FS = cfs.New(fc)
	m.metrics.served(m.FS, hedges)
	return m, nil
}

// hedgedReads is the blob read of a mount's prefetcher: st's own, or with after > 0
// (--speculative-after) on a cluster of more than one node st's hedged (store/hedge), since
// only there can the second attempt reach another replica. hedges counts the reads sent a
// second time (cassfs_fetch_hedges_total).
func hedgedReads(st store.Store, after time.Duration) (r store.BlobReader, hedges func() int64) {
	if c, ok := st.(interface{ Nodes() int }); ok && after > 0 && c.Nodes() > 1 {
		h := hedge.New(st, after)
		return h, h.Hedges
	}
	return st, func() int64 { return 0 }
}

// diskBacking opens samples held by the disk tier for the filesystem: fs.Backing.
type diskBacking struct {
	disk  *disktier.Tier
	cache *prefetch.Cache
}

// Backing implements fs.Backing: a sample opened from its file is dropped from the memory
// cache, since it is read from its file from now on.
func (b diskBacking) Backing(i uint32) (*os.File, bool) {
	f, ok := b.disk.Backing(i)
	if ok {
		b.cache.Drop(i)
	}
	return f, ok
}

// looksAhead reports whether the mount has names looked up ahead of its readers: with
// pushing, a helper command, and without targets (two names per position).
func (m *Mount) looksAhead() bool {
	return m.opts.pushes() && m.opts.LookAhead > 0 && len(m.opts.LookaheadHelper) > 0 && !m.Index.HasTargets()
}

// ServeMetrics answers /metrics (and /debug/pprof/ with Options.Pprof) on addr until ctx
// ends; a bare ":port" is the loopback interface.
func (m *Mount) ServeMetrics(ctx context.Context, addr string) error {
	return m.metrics.serve(ctx, addr, m.log)
}

// fuseServer is what Serve keeps of fs.Mount's server (go-fuse's; only fs and the command
// import go-fuse), or ServeFD of fs.ServeFD's.
type fuseServer interface {
	Wait()
	WaitMount() error
	Unmount() error
}

// Server is a mount being served at a directory.
type Server struct {
	Dir    string
	m      *Mount
	server fuseServer
	helper *lookaheadHelper
	served chan struct{}
	close  []func()
	// records serves the record view at RecordsDir (Options.RecordsAt), until
	// recordsServed is closed.
	records       fuseServer
	RecordsDir    string
	recordsServed chan struct{}
}

// Serve mounts m at dir (an absolute path, see PrepareMountpoint) and serves it in the
// background, with its control socket for `cassfs stats`, until Unmount or an unmount
// from outside (Done).
func (m *Mount) Serve(ctx context.Context, dir string) (*Server, error) {
	if m.opts.RecordsAt == "" {
		return m.serve(ctx, dir, func(o cfs.MountOptions) (fuseServer, error) { return cfs.Mount(dir, m.FS, o) })
	}
	// The record view's mount first: whoever waits for the main mount (--daemon, scripts)
	// finds both.
	var rs fuseServer
	var at string
	recServed := make(chan struct{})
	s, err := m.serve(ctx, dir, func(o cfs.MountOptions) (fuseServer, error) {
		var err error
		if at, err = PrepareMountpoint(m.opts.RecordsAt, m.log); err != nil {
			return nil, fmt.Errorf("--records-at: %w", err)
		}
		ro := o
		ro.FsName += ".wds"
		if rs, err = cfs.MountRecords(at, m.FS, ro); err != nil {
			return nil, fmt.Errorf("--records-at: %w", err)
		}
		go func() { rs.Wait(); close(recServed) }()
		main, err := cfs.Mount(dir, m.FS, o)
		if err != nil {
			unmount(at, rs.Unmount, recServed, m.log)
			return nil, err
		}
		return main, nil
	})
	if err != nil {
		return nil, err
	}
	s.records, s.RecordsDir, s.recordsServed = rs, at, recServed
	m.log.Info("record view mounted", "at", at, "tars in", m.FS.RecordsDir())
	return s, nil
}

// ServeFD serves m on fd, an open /dev/fuse descriptor that a privileged mounter (a CSI
// node plugin) has already mounted at mountpoint (an absolute path) and handed over, in
// the background, with its control socket for `cassfs stats`, until Unmount or an unmount
// from outside (Done). The daemon then mounts nothing and needs no privilege. The
// mount-time settings are the mounter's (fs.ServeFD says which), Options.AllowOther
// among them. ServeFD takes fd: it is closed once serving ends, or at once if ServeFD
// fails. Unmount needs the privilege to unmount; without it, the mounter unmounts.
func (m *Mount) ServeFD(ctx context.Context, fd int, mountpoint string) (*Server, error) {
	if m.opts.RecordsAt != "" {
		m.log.Warn("--records-at is not served on a mount handed over: it needs cassfs to mount", "records-at", m.opts.RecordsAt)
	}
	if fd > 0 {
		// A descriptor handed over may be inherited by the processes the daemon starts
		// (the lookahead helper), which would keep the connection alive after the daemon.
		unix.CloseOnExec(fd)
	}
	return m.serve(ctx, mountpoint, func(mo cfs.MountOptions) (fuseServer, error) { return cfs.ServeFD(fd, mountpoint, m.FS, mo) })
}

// streamBelow is the fetch latency below which the class directories of a cold epoch are
// read ahead of the readers a chunk at a time (fs.LookaheadOptions.Stream), their names
// bound then, in the order the prefetcher fetches. Where fetches come back that fast, the
// daemon's CPU per sample is what a cold epoch waits for, and names known ahead save a
// LOOKUP and most READs per file; over a long link a reader waits for its fetch instead,
// and arrival binding, which gives a name whatever sample came first, hides the slow ones
// (DALI read a cold epoch 11–20% slower at 150 ms with names streamed:
// bench/history/journal.md, "a cold epoch's names known ahead"). Not 20 ms: with it DALI
// sent 0.96 requests per image over a 0.1 ms link, 0.14 with 50 ms; the estimate, 1.5–7.7
// ms at the end of such epochs, starts from fetches that queued behind each other. A
// streamed name's reader waits for its own sample's fetch, a frozen replica's too, where
// arrival binding hands it one that came: the hedge (--speculative-after) bounds that wait
// only because its second attempt asks another replica (store.Attempts); picked at random,
// it asked the frozen one again one time in three, and a read waited out a 6 s freeze (e2e
// TestClusterNodeFailure). --stream-names=false keeps arrival binding whole.
const streamBelow = 50 * time.Millisecond

// nextEpochQuiet is how long readers at the end of an epoch must have looked nothing up
// before the next epoch's warm class directories are listed ahead of them
// (fs.LookaheadOptions.NextEpoch). Readers walking an epoch look a name up every few
// milliseconds (a probe in 32 files); ones that go straight on to the next epoch bind its
// names themselves, as before, and the listing is not made twice.
const nextEpochQuiet = 50 * time.Millisecond

// streamNames reports whether class directories are streamed now (--stream-names, and
// streamBelow: the smaller of the prefetcher's latency estimate and the store's shortest
// query answer, once there is one). The store's counts because the prefetcher's can be its
// own queue's for seconds: a cold epoch starts with a burst of prefetches, at a busy node
// even the fastest of them can come back after 50 ms, and the estimate stays there until
// the next probe, 10 s on (prefetch: linkDelay).
func (m *Mount) streamNames() bool {
	if !m.opts.StreamNames || m.prefetcher == nil {
		return false
	}
	var rt time.Duration
	if m.roundTrip != nil {
		rt = m.roundTrip()
	}
	return streamsAt(m.prefetcher.Latency(), rt)
}

// streamsAt reports whether names are streamed at a prefetch latency estimate and a
// store's shortest answer (0: none yet).
func streamsAt(estimate, roundTrip time.Duration) bool {
	d := estimate
	if roundTrip > 0 && (d == 0 || roundTrip < d) {
		d = roundTrip
	}
	return d > 0 && d < streamBelow
}

// serve serves m at dir with the server start returns, mounted or handed over.
func (m *Mount) serve(ctx context.Context, dir string, start func(cfs.MountOptions) (fuseServer, error)) (*Server, error) {
	s := &Server{Dir: dir, m: m, served: make(chan struct{})}
	// The helper is started before the mount: a process forked while the daemon holds
	// /dev/fuse holds it too until it execs, and a daemon killed meanwhile would leave the
	// connection alive for that moment, its requests then aborted instead of refused.
	if m.looksAhead() {
		h, err := startLookahead(m.FS, m.opts.LookaheadHelper, dir, cfs.LookaheadOptions{Distance: m.opts.LookAhead, Stream: m.streamNames, NextEpoch: nextEpochQuiet}, m.log)
		if err != nil {
			m.log.Warn("names will not be looked up ahead of the readers", "err", err)
		} else {
			s.helper = h
		}
	}
	mo := cfs.MountOptions{
		FsName:        "cassfs:" + m.dataset,
		AllowOther:    m.opts.AllowOther,
		MaxBackground: m.opts.MaxBackground,
		Debug:         m.opts.DebugFUSE,
		Push:          m.opts.pushes(),
	}
	if mo.Debug {
		// go-fuse logs requests to a standard logger: into the mount's own, so --log-file
		// gets them too.
		mo.Logger = slog.NewLogLogger(m.log.Handler(), slog.LevelInfo)
		mo.Logger.SetFlags(0)
		mo.Logger.SetPrefix("fuse: ")
	}
	server, err := start(mo)
	if err != nil {
		if s.helper != nil {
			s.helper.stop(m.log)
		}
		return nil, err
	}
	s.server = server
	go func() { server.Wait(); close(s.served) }()
	m.metrics.info(m.dataset, dir, m.Index.Len())
	if closeControl, err := m.metrics.serveControl(ctx, dir, m.log); err != nil {
		m.log.Warn("cassfs stats will not reach this mount", "err", err)
	} else {
		s.close = append(s.close, closeControl)
	}
	m.log.Info("mounted", "at", dir, "splits", len(m.Shown), "seed", m.opts.Seed, "shard", m.opts.Shard.String(), "order", m.opts.Order, "prefetch", m.opts.Prefetch)
	return s, nil
}

// Done is closed once the mount is gone, unmounted by Unmount or from outside.
func (s *Server) Done() <-chan struct{} { return s.served }

// WaitMount waits until the kernel serves the mount: only for a process that reads its own
// mount (tests), see fs.Mount.
func (s *Server) WaitMount() error { return s.server.WaitMount() }

// Unmount unmounts cleanly; while files are still open (EBUSY) it retries for a while and
// then detaches the mount lazily, so no mount is left behind. The helper looking names up
// ahead and the control socket end first.
func (s *Server) Unmount() error {
	if s.helper != nil {
		s.helper.stop(s.m.log) // it holds the mount's root open
	}
	var errs []error
	if s.records != nil {
		select {
		case <-s.recordsServed:
		default:
			errs = append(errs, unmount(s.RecordsDir, s.records.Unmount, s.recordsServed, s.m.log))
		}
	}
	defer func() {
		for _, c := range s.close {
			c()
		}
	}()
	select {
	case <-s.served:
	default:
		errs = append(errs, unmount(s.Dir, s.server.Unmount, s.served, s.m.log))
	}
	return errors.Join(errs...)
}

// Close stops prefetching, ends the fetches in flight and closes the disk tier. Unmount
// first.
func (m *Mount) Close() {
	if m.prefetcher != nil {
		m.prefetcher.Close()
	}
	m.cache.Close()
	if m.disk != nil {
		m.disk.Close()
	}
}
