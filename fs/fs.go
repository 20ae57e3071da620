// Package fs is the FUSE adapter of cassfs: it shows a mount's views (package view) as a
// read-only filesystem in which splits and epochs are directories. It translates what view
// answers into go-fuse nodes, entries, attributes and errnos, and READs into the prefetch
// cache; it decides nothing about names, orders or bindings itself. It is the only package
// besides cmd/cassfs that imports go-fuse, and it must not know CQL.
//
// # Tree
//
//	MOUNT/
//	  <split>/                 one directory per split
//	    epoch-<N>/             the split in epoch N's order; any N >= 0 resolves on lookup,
//	                           a window of them is listed
//	    epoch-<N>@<K>/         the same from position K on (a resumed job)
//	    epoch-<N>[@<K>].targets/  with targets: the same, each sample's target
//	    epoch-<N>.wds/         the epoch as WebDataset shards (view/records.go, records.go)
//	      shard-<K>.tar        positions K·P .. (K+1)·P-1 of the epoch, as tar members
//	      shard-<K>.idx        its DALI index; tars are pushed as blobs arrive, and the
//	                           next epoch's between epochs (records_ahead.go)
//	      <class>/<pos>_<name> one directory per label; pos is the zero-padded position in
//	                           the epoch, so names sort bytewise in epoch order
//	      file_list.txt        DALI file_list: "<class>/<pos>_<name> <label>" per line, in
//	                           epoch order
//	    samples.csv            every sample of the split with its metadata (view.Table)
//	  by-uuid/<uuid>.<ext>     every sample by id
//
// The shape follows what DALI's fn.readers.file and torchvision's ImageFolder do with a
// directory: an epoch root holds only class directories and one plain file; class names
// sort bytewise into label order; exactly two levels; d_type is set; sizes are exact from
// the first LOOKUP and never change.
//
// # Identity and caching
//
// A sample has one inode number (firstSampleIno + its canonical index) in every epoch, split
// and by-uuid, so the kernel's page cache serves a sample read in an earlier epoch. Content
// is immutable, so entries and attributes are cached by the kernel for a long time, OPEN and
// FLUSH answer ENOSYS (the kernel then stops sending them for the whole mount and keeps the
// page cache: two fewer requests per file), and directories are cached by the kernel
// (FOPEN_CACHE_DIR). With a disk tier (Config.Backing), where the kernel allows FUSE
// passthrough, OPEN is answered instead, and a sample held in a local file is opened in
// passthrough mode: the kernel reads that file and no READ reaches cassfs (see
// sampleFile.Open for how modes are kept consistent). Where it does not, a READ of such a
// sample is answered by splicing from the file (no copy through cassfs's memory).
//
// With pushing (MountOptions.Push, push.go), blobs are written into the page cache of
// their inode ahead of their readers (FUSE_NOTIFY_STORE), once the kernel knows the inode:
// a later epoch's file is then looked up and read with no other request reaching cassfs.
// Pushing keeps OPEN unanswered, so it excludes passthrough. Requests that do reach
// cassfs are counted by operation (requests.go: FS.RequestStats). The record views can be
// mounted a second time, on a connection of their own where OPEN is answered and a warm
// epoch's tars are passed through to local files (MountRecords, records_local.go).
//
// # Past epochs leave the tree
//
// Every name of every epoch read is a link in go-fuse's tree (a class directory's table of
// names, a parent in the sample's node), and the kernel keeps every epoch's entries until
// memory runs short: kept, the daemon grew by 150-200 bytes per sample per epoch (the
// journal's "past epochs leave the tree"), gigabytes over a long training on a large
// dataset. So each split's (or shard directory's) two epochs that got names last keep
// them, and the class directories of older ones in which no name was linked for a while
// (pruneIdle: several readers in epochs of their own each keep theirs) are pruned in the
// background (prune.go): their names leave the tree, they leave their epoch directory,
// and where every sample of one was looked up again since, the kernel is told to drop
// its entry (which drops the entries under it). Its inode forgotten, its node is freed.
// The samples' inodes stay, with their page cache, held by the newer entries.
//
// # The read path
//
//	LOOKUP <class>/<pos>_<name>   fs: the class directory's node
//	  → view.Set.Lookup            view: parse, check, report the access, bind the name
//	      → Prefetcher.Access      prefetch: the window moves; fetches start ahead
//	READ                           fs: the sample's node
//	  → BlobSource (Cache.Get)     prefetch: from memory, joining a fetch, or fetching
//	      → prefetch.Fetcher       disk tier, store: the blob, verified against the index
//
// The whole chain, down to the database, and the locks taken across packages are in
// the package doc of mount.
//
// LOOKUP, GETATTR and READDIR are served from the in-memory index and views and never
// touch the database.
//
// # Errors
//
// Unknown names are ENOENT. Failures of the data path are mapped to an errno in one place
// (errno.go), which logs the cause once per failure.
//
// # Names looked up ahead
//
// With its bytes pushed into the page cache, a file of a later epoch still costs its
// reader one request: the LOOKUP of its name, which is new in every epoch (a name carries
// its position). A reader that opens one file at a time, as DALI's loader threads do, pays
// that round trip through the daemon for every file, in series, and reads a warm epoch at
// a fraction of local disk's speed, which it reaches once the epoch's names were looked up
// before (bench/history/journal.md, "out of the readers' way"). No FUSE notify creates a
// dentry; only a lookup does. So a helper process looks the names up along the epoch's order, ahead of
// the readers: the kernel caches each name and its inode for the entry timeout, the daemon
// pushes the sample's blob into the inode's page cache once the helper's lookup has
// returned (the kernel knows the inode only then), and the reader opens and reads the file
// with no request reaching cassfs at all.
//
// The readers' own lookups are the daemon's only news of their progress, which the
// prefetcher's window follows. So one name in every LookaheadOptions.Every is left for the
// readers to look up themselves (a probe): each probe says how far they got, and the names
// looked up for them since the last one are reported to the prefetcher at once
// (view.Set.Advance). The helper starts once readers have looked up 2·Every names of a view
// themselves (a reader of a few files is never followed by a burst of lookups, which would
// keep an unmount right after busy), and stops for good in a view where a reader looks up
// a name more than Distance behind the furthest (readers that shuffle for themselves).
// It runs at most Distance names ahead of the furthest position a reader looked up, and
// only over names whose sample is held
// (Config.Held): under arrival binding a name it looks up is bound to a sample that has
// arrived, and every name it looks up has a blob to push (or, in the disk tier, pages in
// the page cache already or a blob the prefetcher brings from its file to push).
//
// The helper is another process, never the daemon: a thread waiting on its own mount
// cannot be killed while the daemon holds the request (see Mount). It reads
// "<seq> <path>\n" lines on its standard input, looks each path up (fstatat), and answers
// "<seq>\n" (ServeLookahead). A lookup of a name sent and not yet answered is the helper's
// (or a reader's that caught up with it: either way it is reported with the next probe).
//
// # Whole class directories
//
// A name looked up by the helper costs a LOOKUP each, a round trip through the kernel, the
// helper and the daemon, and CPU of the helper's per file besides the daemon's
// (bench/history/journal.md, "a warm class directory is listed"). Where every sample of a
// class directory is held, the helper lists the directory instead ("L<seq> <path>"): the kernel sends READDIRPLUS, go-fuse asks the
// listing to look each entry up (classListing), and every name of the class is bound and
// cached by the kernel in a few requests (probes excepted: their entries go out without a
// node, so readers still look them up). A listing the kernel answers from its cache of the
// directory sends nothing; the names it left are then sent one by one. A blob
// the listing cannot push yet (its inode unknown to the kernel: every kernel cache dropped
// since its last epoch) is pushed once the helper answers, the kernel having the entries
// then, so that its reader finds it in the page cache instead of sending READs.
//
// # The next epoch's names, bound between epochs
//
// A warm epoch's names are bound in the epoch itself: listing its class directories cost
// the daemon 3–4 µs per name, and its first pass ran at 0.86–1.0× local disk where a
// second pass of the same names, the kernel alone, ran at 1.06–1.2× (bench/history/
// journal.md, "a warm epoch's first pass"). A training loop leaves the mount quiet between
// epochs (validation, a checkpoint, its loader's restart). So once readers reached the end
// of an epoch and looked nothing up for LookaheadOptions.NextEpoch, the next epoch of the
// same split and shard is followed ahead of them (view.Follower.FollowAhead): its class
// directories wholly held are listed then, and its readers find their names bound. Readers
// who go straight on bind them as the epoch goes, as before; nothing is listed twice.
// Requests per file fall by about 40%, DALI (one file at a time) reads faster; a Go reader
// of 16 goroutines read no faster (bench/history/journal.md, "the next epoch's names,
// bound between epochs").
//
// Such an epoch's probes are then all the daemon hears of it, and each costs more than its
// request: the helper's feed, the prefetcher's step and the wake-ups of both processes, on
// the cores the readers share. So a view followed ahead leaves one name in
// view.AheadEvery·Every to its readers, not one in Every (view.Follower.IsProbe): a
// quarter of the probes (bench/history/journal.md, "fewer probes in an epoch bound
// ahead"). A reader slower than AheadEvery·Every files per NextEpoch may have the epoch
// after it listed while it reads the last of them.
//
// Names bound ahead may be forgotten by the kernel before their readers come (its inode
// and dentry caches dropped or shrunk): their blobs' pushes would be refused, and each
// file READ from where the blob came from after being read from there once already (from
// the disk tier, an epoch at half local disk's speed: bench/history/journal.md, "epochs
// from the disk tier with the database gone"). So a name whose sample's inode the kernel
// no longer knows is looked up again as the helper reaches it (view.FollowOptions.Bound).
//
// # Readers' listings
//
// Readers list directories too: torchvision's ImageFolder lists every class directory of
// an epoch, then reads class by class, not in the epoch's order, so the helper looks
// nothing up for it and every file cost a LOOKUP in every warm epoch. The mount asks the
// kernel for READDIRPLUS always, and a reader's listing of a class directory binds its
// names as the helper's would where the binding is the same as a lookup's: under strict
// binding always, under arrival binding where every sample of the class is held
// (classListing.wholeHeld). Such names count as looked up ahead (view.Follower.
// ReaderListed), not as read: the probes go out without a node, and the readers' lookups
// of them report the reads (bench/history/journal.md, "a reader's listing of a held class
// binds its names"). Without the helper a listing binds nothing: the prefetcher then
// follows the readers by their own lookups.
//
// # Streamed class directories
//
// A cold epoch has few samples held ahead of its readers: the prefetcher's blobs arrive
// just before they are read, so names waiting for their samples were looked up by the
// readers themselves, one LOOKUP each, and a blob that arrived before its name had nowhere
// to be pushed and came by READs (1.00 LOOKUP and 0.6–1.2 READs a file;
// bench/history/journal.md, "a cold epoch's names known ahead"). With
// LookaheadOptions.Stream (the mount's by default, --stream-names: where fetches come back
// within 50 ms, see mount.streamBelow), a class directory not wholly held is read a chunk
// at a time instead ("S<seq>@<offset> <path>": the helper reads one getdents buffer,
// streamChunk, of the directory from the offset per request, keeping it open between
// chunks and closing it once idle, see dirStreams; the kernel asks for a READDIRPLUS of
// that size from Linux 6.13 on, a page before), as its names come within Distance of the
// readers, each chunk from where the last ended or past the readers, if they got ahead
// of it.
// Each entry is bound and gets its node as in a whole listing, so every blob that arrives
// after can be pushed, and the reader opens and reads it with no request. The binding
// rule is view.Follower's: a streamed name is bound when its chunk is read, to a sample of
// its class that has arrived if any (arrival binding), or else to the next the prefetcher
// brings, which walks the same order; readers that leave the order are not followed, and
// bind their names on lookup as before. A chunk answered from the kernel's cache of the
// directory binds nothing; the readers look those names up themselves. Every chunk is a
// READDIRPLUS: the mount asks for no plain READDIR (see Mount; with readdirplus_auto the
// chunks after the first came as plain READDIRs unless a name in the directory had been
// looked up since, and DALI looked up 0.4–0.6 of a cold epoch's names itself,
// TestColdEpochNamesKnownAhead, e2e).
//
// What is looked up ahead, and when (the start after 2·Every names, the probes, the stop
// for readers that shuffle, which class directories are listed), is decided by a
// view.Follower, FUSE-free and tested by itself; this file feeds the helper, reads its
// answers, pushes and reports.
//
// lookahead.mu is a leaf: under it nothing is called but Config.Held (the cache's presence
// bitset, lock-free), the Follower and the views' pure functions; go-fuse's tree, the
// views' bindings, the prefetcher and the cache's pushes are all reached with it released.
//
// # Pushing into the page cache
//
// OPEN and FLUSH are answered ENOSYS, so the kernel keeps a file's page cache across
// opens and sends neither OPEN nor RELEASE (fc->no_open, fs/fuse/file.c): a sample whose
// pages are cached is opened, read and closed by a reader with no request reaching cassfs.
// Push fills those pages before the reader asks: it writes a blob into its inode's page
// cache with FUSE_NOTIFY_STORE (fuse_notify_store, fs/fuse/dev.c), which the kernel accepts
// only for an inode it knows (ENOENT otherwise). A sample is one inode in every epoch and in
// by-uuid, so once any of its names was looked up, every later arrival of it can be pushed.
// The mount uses go-fuse's ExternalNodeID, so an inode's FUSE node id is its inode number
// and Push needs no go-fuse node to address it.
//
// Pushed pages are the kernel's: it may reclaim them like any file data, and a READ then
// reaches cassfs, which answers it as it would without pushing.
//
// A push is a copy of the whole file into the page cache (NOTIFY_STORE overwrites pages
// already there): a held blob pushed again each epoch would cost a warm epoch much of the
// daemon's CPU (memcpy and get_user_pages). So the filesystem remembers which
// samples it pushed whole, or answered READs for to their end, which leaves the file in the
// page cache just as well (resident), and pushes those no more. The kernel never says when
// it reclaims pages; a READ says it: with OPEN unanswered, a READ of a file whose pages
// are all cached never comes, so a READ of a resident sample means the kernel dropped
// pages of that file (it is unmarked), and many at once may mean a reclaim (memory
// pressure, drop_caches): every mark is then forgotten and every file is pushed again until
// each is made again (reading). What that costs: a READ for each file whose pages went,
// answered as without pushing, as many as it takes to tell a reclaim from strays. The
// daemon cannot look at the page cache itself (mincore or cachestat need a file of its
// own mount open, which it never does, see Mount); the lookahead helper can, and is asked
// first where it runs (residency.go). An inode the kernel forgets loses its mark.
//
// # Looking at the page cache before forgetting it
//
// reclaimAfter READs of resident files within reclaimWithin look like a reclaim
// (FS.reading), and forgetting every mark costs the next warm epoch a push of every file.
// Reclaims are not all whole: a kernel's proactive reclaim (DAMON's pageout scheme,
// memory.reclaim of a cgroup) pages out some regions of memory and leaves the rest, with
// plenty free (bench/history/journal.md, "a partial reclaim no longer costs a whole epoch
// of pushes").
//
// So where the lookahead helper runs (another process, which may open files of the mount:
// see Mount), the filesystem asks before it forgets: the helper opens each resident file
// the readers are about to read, among the names it looked up already (so the open sends
// nothing, and binds nothing under arrival binding), and cachestat(2) (Linux 6.5+) says
// whether all its pages are cached. The files found short are unmarked (and pushed again as
// their reader nears, or read by READs); if most are short, the page cache was dropped as a
// whole and every mark is forgotten. One check is made at a time; one not
// answered within reclaimWithin counts as a reclaim.
//
// # Files nearing the readers
//
// A proactive reclaim pages out single pages of files read whole a while ago, a few at a
// time: too few for the READs they cost to look like a reclaim, each a wait for the
// database where the blob has left the memory cache (bench/history/journal.md, "later
// epochs beyond --cache-size"), and the prefetcher passes a resident file over. So the
// helper also looks at each resident file as it comes within the lookahead's Distance of
// the readers (view.Follower.Nearing), among the names looked up ahead: one found short is
// unmarked and the prefetcher rewound (Config.PagesGone), which brings it back and pushes
// it before its reader gets there. A look is an open, a cachestat and a close in the
// helper, no request to the daemon (the kernel has the name, and OPEN is answered ENOSYS).
// More than half of a batch of looks (nearBatch) finding files short is a page cache
// dropped as a whole, and every mark is forgotten as for a reclaim: the READs that would
// tell one no longer come, the files nearing the readers being unmarked before they are
// read. Where the helper cannot tell (no cachestat), files are not looked at. Looks cost
// the helper's CPU beside the readers', and a proactive reclaim takes a file in a thousand
// or so: once nearQuiet files in a row were found whole, one in nearSparse is looked at,
// every one again for a while after pages are found gone (a look finds a file short, or a
// resident file is READ); the files missed come by READs. Looks go to the helper nearSend
// or more at a time (sendNearing): one at a time, every probe of a warm epoch cost both
// processes a round of wake-ups for one look.
//
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
package fs

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cassfs/cassfs/index"
	"github.com/cassfs/cassfs/internal/bitset"
	"github.com/cassfs/cassfs/view"
	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// BlobSource is where READs find a sample's content: *prefetch.Cache, from memory, joining
// the fetch in flight or fetching.
type BlobSource interface {
	// Get returns sample i's content (canonical index). It must honour ctx and bound its
	// own time; the returned slice is not modified by the filesystem.
	Get(ctx context.Context, i uint32) ([]byte, error)
}

// Backing is where samples held in local files are opened from: the disk tier.
type Backing interface {
	// Backing opens a local file holding sample i's verified content (a sample's target
	// follows its blob in the same file), or reports false.
	Backing(i uint32) (*os.File, bool)
}

// Config describes a mount.
type Config struct {
	// Views is what the mount shows: splits, epochs, names and their binding.
	Views *view.Set
	// EpochsListed is how many epoch directories (epoch-0 ...) a split directory lists
	// (default 10); any epoch resolves on lookup.
	EpochsListed int
	Blobs        BlobSource
	// Backing, if set, holds samples in local files (the disk tier). Such samples are served from their files: where the kernel allows it (FUSE passthrough,
	// Linux 6.9+ and root, and no targets), the mount answers OPEN and passes opens of
	// them through, so the kernel reads the file with no request to cassfs; elsewhere
	// OPEN stays unanswered as without a disk tier and each READ of one is answered by
	// splicing from its file (Mount decides, see MountOptions.NoPassthrough).
	Backing Backing
	// Looked, if set, is told of every lookup of sample i (in an epoch or by-uuid): its
	// reader is about to read it, from the page cache if its bytes were pushed there
	// (FS.Push), so no READ may come to say it was read.
	Looked func(i uint32)
	// Held reports whether sample i is at hand for its readers: its blob is cached, to
	// push, or a local file holds it (Backing), whose pages are in the page cache or are
	// pushed as the prefetcher brings its blob. Names are looked up ahead of the readers
	// (StartLookahead) only over held samples.
	Held func(i uint32) bool
	// PagesGone, if set, is told (on a goroutine of its own) when files marked resident
	// were found to have lost their pages: a reclaim, or a residency check that found some
	// short. Whoever passed such samples over as in the page cache should look again.
	PagesGone func()
	// LookedAhead is told when a name of sample i was looked up ahead of its reader: the
	// kernel knows the inode now, so its blob can be pushed (and counts as read: the
	// reader's open and read will not reach cassfs).
	LookedAhead func(i uint32)
	// PushRoom, if set, is asked before a push writes n bytes into the page cache: pushed
	// pages are charged to the daemon's memory cgroup, and past its limit the kernel would
	// reclaim pages pushed before, unread ones among them. On false the push is not made
	// (counted as OverLimit) and the sample's READs carry it, their pages charged to the
	// reader.
	PushRoom func(n int64) bool
	Logger   *slog.Logger
	// Peek, if set, returns sample i's blob if it is at hand without fetching: a blob
	// pushed into a record file completes the pages it shares with its neighbours when
	// those are held (records.go).
	Peek func(i uint32) ([]byte, bool)
	// RecordsDir is where the record view's own connection (MountRecords) writes the next
	// epoch's tars, as files no name reaches, to pass its opens through to them
	// (records_local.go); none written if empty.
	RecordsDir string
}

// FS is the filesystem; Root returns its root node for mounting.
type FS struct {
	cfg        Config
	views      *view.Set
	ix         *index.Index
	log        *slog.Logger
	errLog     errorLog
	mtime      uint64 // every entry's times: when the views were made (view.Set.ModTime, also the record files' members')
	totalBytes uint64 // sum of all samples' sizes, for statfs

	reads, readBytes, filesRead atomic.Int64 // what readers were served
	lookups                     atomic.Int64 // lookups of samples' names (epochs, by-uuid)
	passedThrough               atomic.Int64 // opens passed through to a backing file
	tarsPassed                  atomic.Int64 // opens of tars passed through to local files
	fromFiles                   atomic.Int64 // READs answered from a backing file
	// passthrough: OPEN is answered and samples with a backing file are passed through;
	// otherwise their READs are spliced from the file. Mount clears it where the kernel
	// refuses passthrough, and for datasets with targets.
	passthrough atomic.Bool

	openMu sync.Mutex
	opens  map[uint32]*openMode // guarded by openMu: samples open now, and how (with Backing)

	requests requestCounters             // requests that reached the daemon, by operation
	server   atomic.Pointer[fuse.Server] // set by Mount; Push writes through it
	// known has bit i set while the kernel knows sample i's inode (set at its lookup,
	// cleared when the kernel forgets it), knownTargets the same for targets: pushing into
	// an inode the kernel does not know is refused (ENOENT), so it is not tried.
	known, knownTargets bitset.Set
	// resident has bit i set while sample i's pages (and its target's) are in the page
	// cache as far as cassfs knows: pushed or read whole, and no READ of it since (push.go).
	resident bitset.Set
	push     pushCounters
	// helper is the lookahead helper's feed while the helper runs (StartLookahead; nil once
	// it is gone), lastHelper the last one, kept for its counters.
	helper, lastHelper atomic.Pointer[lookahead]
	past               pastEpochs   // past epochs' names leave go-fuse's tree (prune.go)
	tars               tarSet       // the record files the kernel knows (records.go)
	recAhead           recordsAhead // the next epoch's tars, pushed between epochs (records_ahead.go)
	root               *rootDir     // the tree's root, once Root made it
	// recServer is the record view's own connection (MountRecords), recPassthrough whether
	// the kernel passes its opens through to local files, local the tars written to them
	// (records_local.go).
	recServer      atomic.Pointer[fuse.Server]
	recPassthrough atomic.Bool
	local          localTars
}

// ServeStats counts what readers were served.
type ServeStats struct {
	Reads int64 // READ requests answered with data
	Bytes int64 // bytes returned by them
	Files int64 // reads from offset 0: about one per file read
	// PassedThrough counts opens passed through to a backing file (their reads never
	// reach cassfs).
	PassedThrough int64
	// FromFiles counts READs answered from a backing file where opens are not passed
	// through (included in Reads).
	FromFiles int64
	// Lookups counts lookups of samples' names: one per file a reader opens (the kernel
	// caches the name after; a name looked up ahead of its reader counts once, for it),
	// whether its bytes then come from cassfs or the page cache.
	Lookups int64
	// LocalTars counts the record view's tars written to local files (records_local.go),
	// TarsPassedThrough the opens of tars passed through to them.
	LocalTars, TarsPassedThrough int64
}

// Stats returns what readers were served so far.
func (f *FS) Stats() ServeStats {
	return ServeStats{Reads: f.reads.Load(), Bytes: f.readBytes.Load(), Files: f.filesRead.Load(), PassedThrough: f.passedThrough.Load(), FromFiles: f.fromFiles.Load(), Lookups: f.lookups.Load(),
		LocalTars: f.local.count(), TarsPassedThrough: f.tarsPassed.Load()}
}

// served counts a READ answered with bytes off..end of a file.
func (f *FS) served(off, end int64) {
	f.reads.Add(1)
	f.readBytes.Add(end - off)
	if off == 0 {
		f.filesRead.Add(1)
	}
}

// firstSampleIno is the inode number of canonical sample 0, firstTargetIno that of its
// target. Directory and file_list inodes are numbered automatically by go-fuse from 2^63
// on, so they never collide.
const (
	firstSampleIno = 1 << 20
	firstTargetIno = firstSampleIno + 1<<32
)

// New builds the filesystem.
func New(cfg Config) *FS {
	if cfg.EpochsListed <= 0 {
		cfg.EpochsListed = 10
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	ix := cfg.Views.Index()
	f := &FS{cfg: cfg, views: cfg.Views, ix: ix, log: cfg.Logger, mtime: uint64(cfg.Views.ModTime().Unix()), opens: map[uint32]*openMode{},
		known: bitset.New(ix.Len()), knownTargets: bitset.New(ix.Len()), resident: bitset.New(ix.Len())}
	f.passthrough.Store(cfg.Backing != nil) // until Mount finds otherwise
	f.errLog = errorLog{log: cfg.Logger, window: 10 * time.Second}
	for i := range uint32(ix.Len()) {
		f.totalBytes += uint64(ix.Size(i))
	}
	return f
}

// Root returns the root directory node.
func (f *FS) Root() gofs.InodeEmbedder {
	f.root = &rootDir{dirNode: dirNode{fs: f}}
	return f.root
}

// sampleAttr fills the attributes of sample i.
func (f *FS) sampleAttr(i uint32, a *fuse.Attr) {
	size := uint64(f.ix.Size(i))
	a.Ino = firstSampleIno + uint64(i)
	a.Mode = syscall.S_IFREG | 0o444
	a.Size = size
	a.Blocks = (size + 511) / 512
	a.Blksize = 1 << 17
	a.Nlink = 1
	f.times(a)
}

// sampleNode returns the (shared) inode of sample i under parent.
func (f *FS) sampleNode(ctx context.Context, parent *gofs.Inode, i uint32, out *fuse.EntryOut) *gofs.Inode {
	f.sampleAttr(i, &out.Attr)
	if f.cfg.Looked != nil {
		f.cfg.Looked(i)
	}
	return f.sampleInode(ctx, parent, i)
}

// sampleInode returns the (shared) inode of sample i under parent, counted as a lookup;
// sampleNode also tells Config.Looked, which a name looked up ahead of its reader does not.
func (f *FS) sampleInode(ctx context.Context, parent *gofs.Inode, i uint32) *gofs.Inode {
	f.lookups.Add(1)
	f.known.Put(i, true)
	f.linking(parent)
	return parent.NewInode(ctx, &sampleFile{fs: f, i: i}, gofs.StableAttr{Mode: syscall.S_IFREG, Ino: firstSampleIno + uint64(i)})
}

// targetAttr fills the attributes of sample i's target.
func (f *FS) targetAttr(i uint32, a *fuse.Attr) {
	f.sampleAttr(i, a)
	size := uint64(f.ix.TargetSize(i))
	a.Ino = firstTargetIno + uint64(i)
	a.Size = size
	a.Blocks = (size + 511) / 512
}

// targetNode returns the (shared) inode of sample i's target under parent.
func (f *FS) targetNode(ctx context.Context, parent *gofs.Inode, i uint32, out *fuse.EntryOut) *gofs.Inode {
	f.targetAttr(i, &out.Attr)
	f.knownTargets.Put(i, true)
	f.linking(parent)
	return parent.NewInode(ctx, &sampleFile{fs: f, i: i, target: true}, gofs.StableAttr{Mode: syscall.S_IFREG, Ino: firstTargetIno + uint64(i)})
}

func (f *FS) dirAttr(a *fuse.Attr) {
	a.Mode = syscall.S_IFDIR | 0o555
	a.Nlink = 2
	f.times(a)
}

func (f *FS) times(a *fuse.Attr) {
	a.Mtime, a.Ctime, a.Atime = f.mtime, f.mtime, f.mtime
}
