package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/cassfs/cassfs/mount"
	"github.com/spf13/cobra"
)

// mountFlags are cassfs mount's flags: the mount's options (declared, with their defaults,
// help and parsing, in mount.OptionsInfo) and what only the command knows.
type mountFlags struct {
	db          dbFlags
	o           mount.Options
	metricsAddr string
	logLevel    string
	daemon      bool
	logFile     string
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
  MOUNTPOINT/<split>/epoch-<N>.wds/shard-<K>.tar      the epoch as WebDataset shards (+ .idx)
  DIR/<split>/epoch-<N>.wds/shard-<K>.tar             the same with --records-at DIR, warm ones passed through
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

Distributed training: one mount serves every rank of a node. MOUNTPOINT/<split>/
shard-<R>-of-<W>/ holds rank R of W's part of every epoch (positions R, R+W, ... of the
epoch's order, as PyTorch's DistributedSampler takes them), with the same epoch
directories (epoch-N, epoch-N@K, .targets, .wds) as the split itself; it is not listed, and any
R < W resolves. Over all ranks, on every node, every sample is read exactly once per
epoch; --shard-pad evens the ranks' sizes by repeating the first samples. The ranks of a
node share the mount's cache, disk tier and prefetching. Nothing is coordinated but the
seed. A mount can also show one rank's part as the split's own epoch directories
(--shard RANK/RANKS), for fstab or systemd mounts of one rank.

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
of an epoch along its order ahead of the readers, over samples already fetched (or held
in --cache-dir), so that the kernel knows them, and their bytes are pushed then (a class
directory wholly held is listed instead, one request for many names; a reader's own
listing of one, as ImageFolder's, binds its names too): readers walking an epoch in order
send no request for most files (one name in 32 is left to them, one in 128 in an epoch
bound between epochs: their lookups are how the prefetcher follows them). Pushed pages
are page cache, which the kernel may reclaim; a reclaimed one is read as unpushed (many
at once make cassfs push again the files it had pushed or read whole, which it skips).
--cache-size bounds what the daemon holds, not the page cache: files the page cache still
has from an earlier epoch are neither fetched again nor (with --cache-dir) read from the
directory, so a dataset that fits in the page cache but not in --cache-size reads its
later epochs from memory and costs the database nothing. Pushed pages are charged to the
daemon's memory cgroup (Kubernetes, systemd MemoryMax=), while a READ's are charged to
its reader: under a limit cassfs pushes only within what the limit leaves and lets READs
bring the rest (cassfs stats shows the limit, the usage and the page cache of it).

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

Several datasets: --dataset a,b serves each at MOUNTPOINT/<dataset>/ (made if missing,
removed at unmount), each the tree a mount of it alone shows, from one process: one
database session, one memory limit, --cache-size and --cache-dir-size split evenly, one
--cache-dir; cassfs stats takes MOUNTPOINT/<dataset>, --metrics-addr serves
/metrics/<dataset>.

A mountpoint left behind by a crashed cassfs ("transport endpoint is not connected") is
recovered; a mountpoint in use is refused.`,
		Example: `  cassfs mount --dataset tiles /mnt/tiles &
  ls /mnt/tiles/all/epoch-0
  python train.py --data /mnt/tiles/train/epoch-0
  ls /mnt/tiles/train/shard-$RANK-of-$WORLD_SIZE/epoch-0   # torchrun sets both
  cassfs mount --dataset tiles --shard 2/8 --seed 7 /mnt/tiles   # rank 2 of 8 only`,
		Args: exactlyOne("mount", "MOUNTPOINT"),
		RunE: func(c *cobra.Command, args []string) error {
			return runMount(c.Context(), &f, args[0])
		},
	}
	f.db.maxInFlight = mount.MaxInFlight
	f.db.register(c)
	f.o = mount.Defaults()
	mount.AddFlags(c.Flags(), &f.o)
	fl := c.Flags()
	fl.StringVar(&f.metricsAddr, "metrics-addr", "", "serve Prometheus metrics on this address, e.g. :9108 (loopback only) or 0.0.0.0:9108 (every interface); default off. cassfs stats needs none of it")
	fl.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fl.BoolVar(&f.daemon, "daemon", false, "serve in the background: return once the mount is up (logs go to --log-file)")
	fl.StringVar(&f.logFile, "log-file", "", "append logs to this file instead of standard error (default with --daemon: beside the control socket, e.g. /run/cassfs/<id>.log)")
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
	if err := f.check(); err != nil {
		return err
	}
	if dir, err = mount.PrepareMountpoint(dir, log); err != nil {
		return err
	}
	if f.daemon && os.Getenv(daemonChild) == "" {
		logFile := f.logFile
		if logFile == "" {
			logFile = defaultLogFile(dir)
		}
		wait := dir // the mount that tells it serves: the last dataset's
		if names, _ := f.db.datasets(); len(names) > 1 {
			wait = filepath.Join(dir, names[len(names)-1])
		}
		return daemonize(wait, logFile)
	}
	stores, closeStores, err := f.db.openStores(ctx, log)
	if err != nil {
		return err
	}
	defer closeStores()
	if exe, err := os.Executable(); err == nil {
		f.o.LookaheadHelper = []string{exe, "lookahead-helper"}
	}
	restore := mount.TightGC()
	ms, err := mount.OpenSeveral(ctx, stores, f.o, log)
	restore()
	if err != nil {
		return err
	}
	defer ms.Close()
	go mount.KeepMemoryLimit(ctx, func() []*mount.Mount { return ms.Mounts })
	if f.metricsAddr != "" {
		if err := ms.ServeMetrics(ctx, f.metricsAddr); err != nil {
			return err
		}
	}
	if err := ms.Serve(ctx, dir); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		log.Info("unmounting", "at", dir)
	case <-ms.Done():
		log.Info("unmounted from outside", "at", dir)
	}
	return ms.Unmount()
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
func (f *mountFlags) check() error {
	if err := f.o.Check(); err != nil {
		return usageError{err}
	}
	if _, err := f.db.datasets(); err != nil {
		return err
	}
	return nil
}
