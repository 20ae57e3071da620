package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/cassfs/cassfs/disktier"
	cfs "github.com/cassfs/cassfs/fs"
	"github.com/cassfs/cassfs/index"
	"github.com/cassfs/cassfs/prefetch"
	"github.com/cassfs/cassfs/splits"
	"github.com/cassfs/cassfs/store"
	"github.com/cassfs/cassfs/store/cassandra"
	"github.com/cassfs/cassfs/view"
	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"
)

// memOverhead is the daemon's heap beyond the cache and the index: Go runtime, FUSE
// buffers, requests in flight, gocql frames. Measured in the latency lab (bench/README.md).
const memOverhead = 128 << 20

// The resident memory --help promises: the cache, rssPerSample bytes per sample (the index
// at ~85 bytes, four epoch orders and the "all" split at 36, the known future of the split
// read at 8) and rssOverhead (memOverhead,
// and what the heap limit does not count: the binary, thread stacks, the runtime's free
// pages). The e2e tests read these numbers from --help and hold the mount to them.
const (
	rssPerSample = 150
	rssOverhead  = 160 << 20
)

type mountFlags struct {
	db            dbFlags
	seed          uint64
	epochsListed  int
	epochViews    int
	cacheSize     string
	cacheDir      string
	cacheDirSize  string
	cacheDirBytes int64 // parsed from cacheDirSize by check
	prefetch      int
	order         view.Mode
	prefetchIO    int
	maxBackground int
	allowOther    bool
	metricsAddr   string
	pprof         bool
	debugFUSE     bool
	logLevel      string
	splits        string
	shard         string
	shardPad      bool
	push          bool
	lookahead     int
	speculative   time.Duration
	daemon        bool
	logFile       string
}

func newMountCmd() *cobra.Command {
	var f mountFlags
	c := &cobra.Command{
		Use:   "mount --dataset NAME MOUNTPOINT",
		Short: "Mount a dataset read-only, with splits and epochs as directories",
		Long: `mount shows a dataset as a read-only filesystem and serves it until interrupted
(SIGINT or SIGTERM unmount it cleanly):

  MOUNTPOINT/<split>/epoch-<N>/<class>/<pos>_<name>   the split in epoch N's order
  MOUNTPOINT/<split>/epoch-<N>/file_list.txt          DALI file_list, in epoch order
  MOUNTPOINT/<split>/epoch-<N>@<K>/...                the same from position K on (resume)
  MOUNTPOINT/<split>/epoch-<N>.targets/...            with targets: each sample's target
  MOUNTPOINT/<split>/samples.csv                      every sample with its metadata
  MOUNTPOINT/by-uuid/<uuid>.<ext>                     every sample by id

Every file carries its sample's metadata as extended attributes (getfattr -d FILE):
user.cassfs.uuid, .label, .class, .name (its path at ingest), .sha256, and
user.<column> for each metadata column; under arrival binding, of the sample the name
was bound to. A dataset ingested with --targets shows epoch-<N>.targets/ (and
epoch-<N>@<K>.targets/) beside each epoch view: the same classes, positions and order,
each sample's target (e.g. its mask) under the same position prefix, with its own
file_list.txt; a position shows the same sample in both.

The split "all" holds every sample; every split stored with "cassfs split create" (or
those named by --splits) has a directory too. Epoch N's order is a pure function of the
split, --seed and N (see docs/epoch-order.md): the same on every machine and every mount.
Names sort bytewise in epoch order, so DALI's file_root and torchvision's ImageFolder read
them in that order too; any epoch-N resolves, a window of them is listed.

Distributed training: each rank mounts with --shard RANK/RANKS and the same --seed; its
epoch directories then hold only its part of every epoch (positions RANK, RANK+RANKS, ...
of the epoch's order, as PyTorch's DistributedSampler takes them). Over all ranks every
sample is read exactly once per epoch; --shard-pad evens the ranks' sizes by repeating
the first samples. Nothing is coordinated but the seed.

Resuming: a job restarted after consuming K samples of epoch N (in file_list order) reads
epoch-N@K: exactly the samples from position K on, under the same names as in epoch-N.
Exact with --order strict; under arrival binding the first K names may have been served
with samples from a little further on, so a few may be read twice and as many skipped.

At start the dataset's metadata is loaded once; listings never touch the database again.
File contents are fetched whole, once however many readers ask, and kept in a cache of
--cache-size bytes. As readers look up names of an epoch, the samples that follow in the
epoch's order are prefetched, many at once, into the cache as they arrive. The requests
in flight size themselves: twice what the readers' measured rate needs at the measured
fetch latency (so a LAN and a 300 ms link both need no tuning), within
--prefetch-in-flight; the latency is the fastest fetch with the queue drained (every 10 s
the prefetches in flight fall to 4 for a few round trips; after 1 s the first time on a
fast link), so a busy database's queue is never taken for the link. The window reaches
four times that ahead, within --prefetch samples and what the cache holds, and runs a
little into the next epoch.

With --push (the default), each prefetched file whose inode the kernel already knows (a
sample is one inode in every epoch, so from its first read on) is written into the
kernel's page cache as it arrives: its reader then opens and reads it with no request to
cassfs beyond the lookup of its name. A helper process (--look-ahead) looks up the names
of an epoch along its order ahead of the readers, over samples already fetched, so that
the kernel knows them, and their bytes are pushed then: readers walking an epoch in order
send no request at all for most files (one name in 32 is left to them: their lookups are
how the prefetcher follows them). Pushed pages are ordinary page cache, which the kernel
may reclaim; a read of one that was reclaimed is served as without pushing. --cache-size
bounds what the daemon holds, not the page cache.

--order arrival (the default) binds each name, on its first lookup, to a sample of the
same class that has already arrived, so no reader waits behind a slow fetch and readers
that shuffle on their own (torchvision's DataLoader) read what was prefetched; every
sample still appears exactly once per epoch, and a name keeps its content once bound.
--order strict keeps every name bound to the sample at its position (file_list.txt then
lists the documented permutation exactly): choose it for reproducible runs.

A fetch that finds no connection, or loses its connection mid-answer (a reset link, a
restarting node), waits for the reconnect (nodes are dialled again every 250 ms) and is
sent again within --timeout, so a disturbance shorter than --timeout costs readers time,
not errors. A read whose fetch fails or exceeds --timeout gets EIO (the cause is logged
once; a failure is remembered for a second, so the kernel's immediate retry fails at
once); readers never hang on a dead database or a silent link.

A mountpoint left behind by a crashed cassfs ("transport endpoint is not connected") is
recovered; a mountpoint in use is refused.`,
		Example: `  cassfs mount --dataset tiles /mnt/tiles &
  ls /mnt/tiles/all/epoch-0
  python train.py --data /mnt/tiles/train/epoch-0
  cassfs mount --dataset tiles --shard 2/8 --seed 7 /mnt/tiles   # rank 2 of 8`,
		Args: exactlyOne("mount", "MOUNTPOINT"),
		RunE: func(c *cobra.Command, args []string) error {
			return runMount(c.Context(), &f, args[0])
		},
	}
	// Room for the prefetches a long link needs (--prefetch-in-flight) and demand reads.
	f.db.maxInFlight = 1280
	f.db.register(c)
	fl := c.Flags()
	fl.Uint64Var(&f.seed, "seed", 0, "seed of the epoch permutations (same seed, same orders everywhere)")
	fl.IntVar(&f.epochsListed, "epochs-listed", 10, "epoch directories a split lists (any epoch-N resolves)")
	fl.IntVar(&f.epochViews, "epoch-views", 4, "epoch orders kept in memory (8 bytes per sample each)")
	fl.StringVar(&f.cacheSize, "cache-size", "1GiB", fmt.Sprintf("bytes of file content cached in memory (e.g. 512MiB, 4GiB); the daemon's resident memory stays under this plus ~%d bytes per sample plus %d MiB (more with stored splits and --epoch-views: 8 bytes per member per view; with metadata columns: ~4 bytes per column and each distinct value once)", rssPerSample, rssOverhead>>20))
	fl.StringVar(&f.cacheDir, "cache-dir", "", "also keep fetched files in this directory (e.g. on local NVMe), for later epochs and later mounts; bounded by --cache-dir-size; one mount of a dataset at a time per directory (default: off)")
	fl.StringVar(&f.cacheDirSize, "cache-dir-size", "", "bytes --cache-dir may hold (e.g. 200GiB); once full, files no known epoch order reads make room for ones read again")
	fl.IntVar(&f.prefetch, "prefetch", 8192, "largest read-ahead window, in samples, along each epoch's order; the window sizes itself below it (0: no prefetching)")
	f.order = view.Arrival
	fl.Var(&f.order, "order", "arrival: a name is bound on first lookup to an already fetched sample of its class, so no reader waits behind a slow fetch; strict: a name always means the same sample (reproducible)")
	fl.IntVar(&f.prefetchIO, "prefetch-in-flight", 1024, "most prefetch requests in flight; the window sizes itself below it (keep below --max-in-flight so demand reads find room)")
	fl.IntVar(&f.maxBackground, "max-background", 128, "kernel's limit on concurrent reads to cassfs")
	fl.StringVar(&f.metricsAddr, "metrics-addr", "", "serve Prometheus metrics on this address, e.g. :9108 (loopback only) or 0.0.0.0:9108 (every interface); default off. cassfs stats needs none of it")
	fl.BoolVar(&f.pprof, "pprof", false, "also serve Go's profiler at /debug/pprof/ on --metrics-addr and the control socket (e.g. go tool pprof http://127.0.0.1:9108/debug/pprof/profile?seconds=10)")
	fl.BoolVar(&f.allowOther, "allow-other", false, "let users other than the mounting one access the mount")
	fl.BoolVar(&f.debugFUSE, "debug-fuse", false, "log every FUSE request")
	fl.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fl.StringVar(&f.splits, "splits", "*", "comma-separated stored splits to show beside \"all\" (* for every stored split, empty for none)")
	fl.StringVar(&f.shard, "shard", "", "show only rank I of N's part of every epoch, as I/N (e.g. 0/4); every rank mounts with the same --seed")
	fl.DurationVar(&f.speculative, "speculative-after", time.Second, "on a cluster of several nodes, send a read not answered after this long once more, to a replica picked anew, and take the first answer (0: never)")
	fl.BoolVar(&f.daemon, "daemon", false, "serve in the background: return once the mount is up (logs go to --log-file)")
	fl.StringVar(&f.logFile, "log-file", "", "append logs to this file instead of standard error (default with --daemon: beside the control socket, e.g. /run/cassfs/<id>.log)")
	fl.BoolVar(&f.shardPad, "shard-pad", false, "with --shard, repeat the epoch's first samples so that every rank gets the same number")
	fl.IntVar(&f.lookahead, "look-ahead", 512, "with --push, have a helper process look up this many names of each epoch ahead of the readers, along its order, over samples already fetched, so that the kernel knows them and their pushed bytes before the readers open them; it starts once readers have looked up 64 names of an epoch in order, and one name in 32 is left to them (their lookups show how far they got); 0: off")
	fl.BoolVar(&f.push, "push", true, "write prefetched files into the kernel's page cache ahead of their readers (samples whose inode the kernel knows: read before, under any name), so reading them sends no request to cassfs; --cache-size still bounds what the daemon holds (pushed pages are the kernel's, reclaimed like any file data). With --cache-dir, files are then read from it ahead and pushed instead of passed through (false: opens of its files are passed through where the kernel allows it)")
	return c
}

func newLogger(level string, w io.Writer) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, usageError{fmt.Errorf("--log-level %q: use debug, info, warn or error", level)}
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}

func runMount(ctx context.Context, f *mountFlags, dir string) error {
	log, closeLog, err := f.logger()
	if err != nil {
		return err
	}
	defer closeLog()
	cacheBytes, shard, err := f.check()
	if err != nil {
		return err
	}
	if dir, err = prepareMountpoint(dir, log); err != nil {
		return err
	}
	if f.daemon && os.Getenv(daemonChild) == "" {
		logFile := f.logFile
		if logFile == "" {
			logFile = defaultLogFile(dir)
		}
		return daemonize(dir, logFile)
	}
	st, err := f.db.openStore(ctx, storeOpts{log: log})
	if err != nil {
		return err
	}
	defer st.Close()
	m, err := newMount(ctx, st, f, cacheBytes, shard, log)
	if err != nil {
		return err
	}
	defer m.close()
	if f.metricsAddr != "" {
		if err := m.metrics.serve(ctx, f.metricsAddr, log); err != nil {
			return err
		}
	}
	// The helper is started before the mount: a process forked while the daemon holds
	// /dev/fuse holds it too until it execs, and a daemon killed meanwhile would leave the
	// connection alive for that moment, its requests then aborted instead of refused.
	var helper *lookaheadHelper
	if f.looksAhead(m.ix) {
		if helper, err = startLookahead(m.fs, dir, cfs.LookaheadOptions{Distance: f.lookahead}, log); err != nil {
			log.Warn("names will not be looked up ahead of the readers", "err", err)
		} else {
			defer helper.stop(log)
		}
	}
	server, err := cfs.Mount(dir, m.fs, cfs.MountOptions{
		FsName:        "cassfs:" + st.Dataset(),
		AllowOther:    f.allowOther,
		MaxBackground: f.maxBackground,
		Debug:         f.debugFUSE,
		Push:          f.push && f.prefetch > 0,
	})
	if err != nil {
		return err
	}
	m.metrics.info(st.Dataset(), dir, m.ix.Len())
	if closeControl, err := m.metrics.serveControl(ctx, dir, log); err != nil {
		log.Warn("cassfs stats will not reach this mount", "err", err)
	} else {
		defer closeControl()
	}
	log.Info("mounted", "dataset", st.Dataset(), "at", dir, "splits", len(m.shown), "seed", f.seed, "shard", shard.String(), "order", f.order, "prefetch", f.prefetch)

	served := make(chan struct{})
	go func() { server.Wait(); close(served) }()
	select {
	case <-ctx.Done():
		log.Info("unmounting", "at", dir)
		if helper != nil {
			helper.stop(log) // it holds the mount's root open
		}
	case <-served:
		log.Info("unmounted from outside", "at", dir)
		return nil
	}
	return unmount(dir, server.Unmount, served, log)
}

// logger is the mount's logger: to --log-file if given (the daemon's child inherits the
// file as its standard error), else standard error. close closes the file.
func (f *mountFlags) logger() (log *slog.Logger, close func(), err error) {
	log, err = newLogger(f.logLevel, os.Stderr)
	if err != nil || f.logFile == "" || os.Getenv(daemonChild) != "" {
		return log, func() {}, err
	}
	out, err := os.OpenFile(f.logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("--log-file: %w", err)
	}
	if log, err = newLogger(f.logLevel, out); err != nil {
		out.Close()
		return nil, nil, err
	}
	return log, func() { out.Close() }, nil
}

// check validates the mount's flags before anything is mounted or connected.
func (f *mountFlags) check() (cacheBytes uint64, shard splits.Shard, err error) {
	cacheBytes, err = humanize.ParseBytes(f.cacheSize)
	if err != nil || cacheBytes == 0 {
		return 0, shard, usageError{fmt.Errorf("--cache-size %q: want a positive size such as 512MiB or 4GiB", f.cacheSize)}
	}
	if f.epochsListed < 0 || f.epochViews <= 0 || f.maxBackground <= 0 || f.prefetch < 0 || f.prefetchIO <= 0 || f.lookahead < 0 {
		return 0, shard, usageError{errors.New("--epochs-listed, --prefetch and --look-ahead must be >= 0; --epoch-views, --max-background and --prefetch-in-flight positive")}
	}
	if f.shard != "" {
		if shard, err = splits.ParseShard(f.shard); err != nil {
			return 0, shard, usageError{fmt.Errorf("--shard: %w", err)}
		}
		shard.Pad = f.shardPad
	} else if f.shardPad {
		return 0, shard, usageError{errors.New("--shard-pad needs --shard")}
	}
	if _, err := f.db.config(); err != nil {
		return 0, shard, err
	}
	switch {
	case f.cacheDir == "" && f.cacheDirSize != "":
		return 0, shard, usageError{errors.New("--cache-dir-size needs --cache-dir")}
	case f.cacheDir != "":
		n, err := humanize.ParseBytes(f.cacheDirSize)
		if err != nil || n == 0 || n > 1<<62 {
			return 0, shard, usageError{fmt.Errorf("--cache-dir needs --cache-dir-size, a positive size such as 200GiB (got %q)", f.cacheDirSize)}
		}
		f.cacheDirBytes = int64(n)
	}
	if f.speculative < 0 {
		return 0, shard, usageError{fmt.Errorf("--speculative-after must be 0 (off) or positive, got %v", f.speculative)}
	}
	return cacheBytes, shard, nil
}

// looksAhead reports whether the mount has names looked up ahead of its readers: with
// pushing and prefetching, and without targets (two names per position).
func (f *mountFlags) looksAhead(ix *index.Index) bool {
	return f.push && f.prefetch > 0 && f.lookahead > 0 && !ix.HasTargets()
}

// mount is what serves a mount: the index and splits, the cache and prefetcher, the views,
// the filesystem and its metrics.
type mount struct {
	ix         *index.Index
	shown      []*splits.Split
	cache      *prefetch.Cache
	disk       *disktier.Tier       // nil: no --cache-dir
	prefetcher *prefetch.Prefetcher // nil: no prefetching
	fs         *cfs.FS
	metrics    *metrics
}

// newMount loads the dataset's index and splits from st and wires the read path:
// filesystem → views → prefetcher → cache → store.
func newMount(ctx context.Context, st store.Store, f *mountFlags, cacheBytes uint64, shard splits.Shard, log *slog.Logger) (*mount, error) {
	start := time.Now()
	// Loading the index makes garbage at the rate the scan decodes rows (a row, its
	// metadata, its strings), and the runtime's default lets the heap grow to twice what is
	// live before it collects: at a million samples that peak would be the daemon's
	// largest. A tighter target while the index loads costs some CPU and keeps the peak
	// near what the index holds.
	if os.Getenv("GOGC") == "" {
		defer debug.SetGCPercent(debug.SetGCPercent(25))
	}
	// The stored splits need no index to be read: at long round trips that overlaps.
	var stored *splits.Stored
	var storedErr error
	fetched := make(chan struct{})
	go func() {
		defer close(fetched)
		stored, storedErr = splits.FetchStored(ctx, st, f.splits, log)
	}()
	ix, err := index.Load(ctx, st)
	<-fetched
	if errors.Is(storedErr, splits.ErrUnknownSplit) {
		return nil, usageError{fmt.Errorf("--splits: %w", storedErr)}
	}
	if err != nil {
		return nil, err
	}
	if storedErr != nil {
		return nil, storedErr
	}
	log.Info("index loaded", "dataset", st.Dataset(), "samples", ix.Len(), "classes", len(ix.Labels()), "took", time.Since(start).Round(time.Millisecond))
	if sc, ok := st.(interface{ LastScan() cassandra.ScanStats }); ok {
		s := sc.LastScan()
		log.Debug("metadata scan", "took", s.Took.Round(time.Millisecond), "pages", s.Pages, "failed", s.Failures, "peak_in_flight", s.PeakInFlight, "limit", s.Limit)
	}
	shown := stored.Resolve(ix, log)
	members := 0
	for _, s := range shown {
		members += len(s.Members)
	}
	// Bound the daemon's memory: the cache, the index and epoch orders, and a fixed
	// allowance for the runtime, requests in flight and the driver's frame buffers. Go's
	// collector otherwise lets the heap grow to twice what is live. A GOMEMLIMIT set by the
	// user wins.
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(int64(min(cacheBytes, 1<<50)) + int64(ix.Len())*(100+8*int64(len(shown))) + int64(members)*(4+8*int64(f.epochViews)) + memOverhead)
	}
	m := &mount{ix: ix, shown: shown, metrics: newMetrics()}
	m.metrics.pprof = f.pprof
	blobs, hedges := hedgedReads(st, f.speculative)
	var fetch prefetch.Fetcher = m.metrics.timed(prefetch.StoreFetch(blobs, ix))
	if f.cacheDir != "" {
		if m.disk, err = disktier.Open(f.cacheDir, st.Dataset(), ix, f.cacheDirBytes, log); err != nil {
			return nil, usageError{fmt.Errorf("--cache-dir: %w", err)}
		}
		m.disk.OnCorrupt = m.metrics.corruptCacheFile
		m.metrics.watchDisk(m.disk)
		ds := m.disk.Stats()
		log.Info("cache directory", "dir", f.cacheDir, "entries", ds.Entries, "bytes", ds.Bytes, "bound", ds.MaxBytes)
		fetch = m.disk.Over(fetch)
	}
	co := prefetch.CacheOptions{MaxBytes: int64(min(cacheBytes, 1<<62)), Samples: ix.Len()}
	switch {
	case f.push && f.prefetch > 0:
		// Prefetched blobs, from the database or the disk tier alike, go into the page
		// cache ahead of their readers (m.fs is made below; pushes start after the mount).
		co.Push = func(i uint32, data []byte) bool { return m.fs.Push(i, data) }
	case m.disk != nil:
		// Read from their files (passed through, or spliced), not this cache.
		co.Local = m.disk.Holds
	}
	m.cache = prefetch.NewCache(fetch, co)
	vc := view.Config{
		Index:      ix,
		Splits:     shown,
		Seed:       f.seed,
		Shard:      shard,
		EpochViews: f.epochViews,
		Mode:       f.order,
		Arrived:    m.cache.Has,
	}
	if m.disk != nil {
		vc.Arrived = func(i uint32) bool { return m.cache.Has(i) || m.disk.Holds(i) }
	}
	if f.prefetch > 0 {
		// Samples: the cache evicts the blob the known epoch orders read farthest ahead;
		// so does the disk tier once full.
		m.prefetcher = prefetch.NewPrefetcher(m.cache, prefetch.Options{Size: ix.BlobSize, MaxWindow: f.prefetch, MaxInFlight: f.prefetchIO, Samples: ix.Len()})
		if m.disk != nil {
			m.disk.UseFuture(m.prefetcher)
		}
		vc.Progress = m.prefetcher
	}
	m.metrics.watch(m.cache, m.prefetcher)
	fc := cfs.Config{Views: view.New(vc), EpochsListed: f.epochsListed, Blobs: m.cache, Logger: log}
	if co.Push != nil {
		fc.Looked, fc.Held, fc.LookedAhead = m.cache.Looked, m.cache.Has, func(i uint32) { m.cache.PushHeld(i) }
	}
	if m.disk != nil {
		fc.Backing = diskBacking{m.disk, m.cache}
	}
	m.fs = cfs.New(fc)
	m.metrics.served(m.fs, hedges)
	return m, nil
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

// close stops prefetching and ends the fetches in flight.
func (m *mount) close() {
	if m.prefetcher != nil {
		m.prefetcher.Close()
	}
	m.cache.Close()
	if m.disk != nil {
		m.disk.Close()
	}
}

// unmount unmounts cleanly; while files are still open (EBUSY) it retries for a while and
// then detaches the mount lazily, so no mount is left behind.
func unmount(dir string, clean func() error, served <-chan struct{}, log *slog.Logger) error {
	var err error
	for try := 0; try < 20; try++ {
		if err = clean(); err == nil {
			<-served
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	log.Warn("mount busy; detaching it lazily", "at", dir, "err", err)
	if derr := syscall.Unmount(dir, syscall.MNT_DETACH); derr != nil {
		return fmt.Errorf("unmount %s: %v; detach: %w", dir, err, derr)
	}
	return nil
}

// prepareMountpoint checks dir, recovers a mount left by a crashed cassfs, and refuses one
// in use. It returns the absolute path.
func prepareMountpoint(dir string, log *slog.Logger) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(abs)
	if errors.Is(err, syscall.ENOTCONN) || errors.Is(err, syscall.ECONNABORTED) {
		// The FUSE server behind it is gone: detach the dead mount.
		if uerr := syscall.Unmount(abs, syscall.MNT_DETACH); uerr != nil {
			return "", fmt.Errorf("mountpoint %s is a stale mount and unmounting it failed: %w (try: fusermount -u %s)", abs, uerr, abs)
		}
		log.Warn("recovered a stale mount", "at", abs)
		fi, err = os.Stat(abs)
	}
	if err != nil {
		return "", fmt.Errorf("mountpoint: %w", err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("mountpoint %s is not a directory", abs)
	}
	if fstype, ok := mountedAt(abs); ok {
		return "", fmt.Errorf("mountpoint %s is in use (a %s filesystem is mounted there); unmount it first (umount %s) or choose another directory", abs, fstype, abs)
	}
	return abs, nil
}

// mountedAt reports whether a filesystem is mounted at dir, and its type.
func mountedAt(dir string) (string, bool) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// mountinfo: id parent major:minor root mountpoint options ... - fstype source super
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 || unescapeMountinfo(fields[4]) != dir {
			continue
		}
		for k, fld := range fields {
			if fld == "-" && k+1 < len(fields) {
				return fields[k+1], true
			}
		}
		return "unknown", true
	}
	return "", false
}

// unescapeMountinfo undoes the octal escapes (\040 for space, ...) of /proc/self/mountinfo.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v byte
			ok := true
			for _, c := range []byte(s[i+1 : i+4]) {
				if c < '0' || c > '7' {
					ok = false
					break
				}
				v = v*8 + c - '0'
			}
			if ok {
				b.WriteByte(v)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
