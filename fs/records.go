package fs

import (
	"context"
	"os"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/cassfs/cassfs/internal/bitset"
	"github.com/cassfs/cassfs/view"
	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// The record view's files (view/records.go lays them out): epoch-N.wds/ holds each shard's
// tar and DALI index. An index is generated like file_list.txt. A tar's READ is rendered
// from the blobs of the samples it covers, fetched together through the cache. Its bytes
// are also pushed into the tar's page cache as blobs arrive (with MountOptions.Push): a
// prefetched blob's whole pages go at once, and a page two samples share goes with
// whichever of them arrives second (the kernel takes a stored page as up to date only when
// the notification covers it whole: fuse_notify_store, fs/fuse/dev.c), so a reader that
// keeps behind the prefetcher reads from the page cache.
//
// Readers then send nothing, and the prefetcher, which follows each shard's readers,
// would hear nothing: so the page where every probeEvery-th sample of a shard starts is
// never pushed. Its READ (a page, the rest of the readahead around it being cached) says
// how far the readers got; it counts the samples before it as read (Config.Looked: their
// pushed blobs count as read by the cache) and moves the shard's stream on.

// probeEvery is how often a shard's sample leaves its first page to a READ: one READ per
// probeEvery samples tells the prefetcher where the readers are (see above). A reader
// about a window ahead of the prefetcher at every probe is never starved. A tar pushed
// between epochs (records_ahead.go) holds every blob the cache held: there a probe is the
// reader's only request, a synchronous round trip through the daemon on cores the reader
// shares, and the prefetcher has little left to follow; such a tar leaves one sample in
// view.AheadEvery·probeEvery, as an epoch's names bound between epochs do (FS doc); so
// does every tar of an epoch after the one readers are in (tarSet.every), whichever
// push reaches it first.
const probeEvery = 32

// recordsDir is an epoch's record view: epoch-N.wds/.
type recordsDir struct {
	dirNode
	key view.Key
	// path is the directory's path in the mount, kept from its making (as classDir's):
	// the next epoch's tars are looked up beside it (records_ahead.go).
	path string
	own  bool // on the record view's own connection (MountRecords)
}

var (
	_ gofs.NodeLookuper       = (*recordsDir)(nil)
	_ gofs.NodeOpendirHandler = (*recordsDir)(nil)
	_ gofs.NodeGetattrer      = (*recordsDir)(nil)
)

func (d *recordsDir) records() *view.Records { return d.fs.views.Epoch(d.key).Records() }

func (d *recordsDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	r := d.records()
	k, index, ok := view.ParseShardFileName(name, r.Len())
	if !ok {
		return nil, syscall.ENOENT
	}
	sh := r.Shard(k)
	if index {
		return d.fs.lookupGen(ctx, d.EmbeddedInode(), name, out, func() *genFile {
			return &genFile{fs: d.fs, size: func() int64 { return int64(len(sh.Index())) },
				read: func(off int64, n int) []byte { return sliceAt(sh.Index(), off, n) }, answer: d.own}
		}), 0
	}
	return d.fs.lookupTar(ctx, d, name, sh, out), 0
}

// sliceAt is b's bytes [off, off+n), clamped to b.
func sliceAt(b []byte, off int64, n int) []byte {
	if off >= int64(len(b)) {
		return nil
	}
	return b[off:min(off+int64(n), int64(len(b)))]
}

func (d *recordsDir) OpendirHandle(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	n := d.records().Len()
	// shard-K.idx sorts before shard-K.tar.
	return openListing(2*n, func(e int) fuse.DirEntry {
		return fuse.DirEntry{Name: view.ShardFileName(e/2, n, e%2 == 0), Mode: syscall.S_IFREG}
	})
}

// tarFile is one shard's tar.
type tarFile struct {
	gofs.Inode
	fs   *FS
	sh   *view.RecordShard
	dir  string // its directory's path in the mount
	ino  uint64
	pos  map[uint32]int // sample → its index in the shard, for pushes
	read atomic.Bool    // a READ came (tarSet.reading)
	// done has bit j set once sample j's pages were pushed, or a READ covering them whole
	// began (claim): a later push of it (the prefetcher's, after the tar was pushed
	// between epochs, or as its blob comes for that READ) is skipped.
	done bitset.Set
	own  bool // on the record view's own connection: OPEN is answered (records_local.go)
	// opens is how many opens of the tar are open, passed whether they are in passthrough
	// mode (guarded by mu; own connection only).
	mu     sync.Mutex
	opens  int
	passed bool
}

var (
	_ gofs.NodeGetattrer   = (*tarFile)(nil)
	_ gofs.NodeOpener      = (*tarFile)(nil)
	_ gofs.NodeReader      = (*tarFile)(nil)
	_ gofs.NodeOnForgetter = (*tarFile)(nil)
)

// lookupTar returns d's tar file called name, showing sh, made on first lookup. The
// kernel knows it from then on, until it forgets it: pushes go to the tars it knows.
func (f *FS) lookupTar(ctx context.Context, d *recordsDir, name string, sh *view.RecordShard, out *fuse.EntryOut) *gofs.Inode {
	parent := d.EmbeddedInode()
	if ch := parent.GetChild(name); ch != nil {
		ch.Operations().(*tarFile).attr(&out.Attr)
		out.Ino = ch.StableAttr().Ino
		return ch
	}
	t := &tarFile{fs: f, sh: sh, dir: d.path, pos: make(map[uint32]int, sh.Len()), done: bitset.New(sh.Len()), own: d.own}
	for j := range sh.Len() {
		t.pos[sh.Sample(j)] = j
	}
	ch := parent.NewInode(ctx, t, gofs.StableAttr{Mode: syscall.S_IFREG})
	t.ino = ch.StableAttr().Ino
	t.attr(&out.Attr)
	out.Ino = t.ino
	f.tars.add(t)
	return ch
}

func (t *tarFile) attr(a *fuse.Attr) { t.fs.fileAttr(a, t.sh.Size()) }

func (t *tarFile) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	t.attr(&out.Attr)
	out.Ino = t.ino
	return 0
}

// Open answers as a generated file does (genFile.Open): ENOSYS, so the kernel keeps the
// tar's page cache across opens, pushed pages included. On the record view's own
// connection it is answered, in passthrough mode where a local file holds the tar
// (openOwn).
func (t *tarFile) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if t.own {
		return t.openOwn(ctx)
	}
	return t.fs.openGenerated()
}

// OnForget: the kernel forgot the tar, and pushes to it would be refused.
func (t *tarFile) OnForget() { t.fs.tars.remove(t) }

func (t *tarFile) Read(ctx context.Context, fh gofs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	sh := t.sh
	if old := t.fs.tars.reading(t); len(old) > 0 {
		go t.fs.dropPages(old)
	}
	t.fs.recordRead(t)
	size := sh.Size()
	if off >= size {
		return fuse.ReadResultData(nil), 0
	}
	end := min(off+int64(len(dest)), size)
	first, at := sh.Find(off), sh.Find(end-1)
	t.looked(sh.ReadBegins(first))
	last := min(at, sh.Len()-1)
	claimed := t.claim(off, end, first, last)
	blobs, failed, err := t.fs.recordBlobs(ctx, sh, first, last)
	if err != nil {
		t.unclaim(claimed)
		t.looked(sh.ReadEnds(first, at, false))
		return nil, t.fs.errno("read", sh.Sample(failed), err)
	}
	buf := dest[:end-off]
	err = sh.ReadAt(buf, off, func(j int) ([]byte, error) { return blobs[j-first], nil })
	t.looked(sh.ReadEnds(first, at, err == nil))
	if err != nil {
		t.unclaim(claimed)
		return nil, t.fs.errno("read", sh.Sample(first), err)
	}
	t.fs.served(off, end)
	return fuse.ReadResultData(buf), 0
}

// claim marks the samples of first..last whose bytes lie wholly in [off, end) as done
// (tarFile.done): this READ fills their pages, and a push of their blobs as they arrive
// would copy the same bytes again, into pages the READ holds locked until it is answered
// (a reader at the prefetcher's frontier READs a tenth to a sixth of a cold epoch's bytes
// at a fast link). It returns the samples it marked, for unclaim if the READ fails.
func (t *tarFile) claim(off, end int64, first, last int) (claimed []uint32) {
	sh := t.sh
	for j := first; j <= last; j++ {
		to := sh.Start(j + 1)
		if j == sh.Len()-1 {
			to = sh.Size()
		}
		if sh.Start(j) >= off && to <= end && t.done.Add(uint32(j)) {
			claimed = append(claimed, uint32(j))
		}
	}
	return claimed
}

// unclaim: the READ that claimed the samples failed, and their blobs' pushes may come.
func (t *tarFile) unclaim(claimed []uint32) {
	for _, j := range claimed {
		t.done.Put(j, false)
	}
}

// looked counts samples from..to-1 of the shard as read by the cache (Config.Looked):
// readers passed them, reading their pushed pages or READing them.
func (t *tarFile) looked(from, to int) {
	if looked := t.fs.cfg.Looked; looked != nil {
		for j := from; j < to; j++ {
			looked(t.sh.Sample(j))
		}
	}
}

// recordBlobs gets the blobs of samples first..last of sh (none if last < first), all at
// once: a READ that spans several samples waits for the slowest, not for their sum. On
// failure it returns the index of a sample that failed.
func (f *FS) recordBlobs(ctx context.Context, sh *view.RecordShard, first, last int) ([][]byte, int, error) {
	if last < first {
		return nil, 0, nil
	}
	blobs := make([][]byte, last-first+1)
	errs := make([]error, len(blobs))
	if len(blobs) == 1 {
		blobs[0], errs[0] = f.cfg.Blobs.Get(ctx, sh.Sample(first))
	} else {
		var wg sync.WaitGroup
		for k := range blobs {
			wg.Go(func() { blobs[k], errs[k] = f.cfg.Blobs.Get(ctx, sh.Sample(first+k)) })
		}
		wg.Wait()
	}
	for k, err := range errs {
		if err != nil {
			return nil, first + k, err
		}
	}
	return blobs, 0, nil
}

// tarSet is the tars the kernel knows: where arriving blobs are pushed.
type tarSet struct {
	n     atomic.Int32 // len(byIno), read without mu
	mu    sync.Mutex
	byIno map[uint64]*tarFile // guarded by mu
	// newest is the latest epoch whose tar of each shard's stream was read (guarded by mu).
	newest map[string]uint64
	// past holds the tars that left the set for a later epoch's, whose pages the kernel
	// still has (guarded by mu; FS.dropPages).
	past []*tarFile
	// epoch is the latest epoch of each record view (its key with epoch 0) whose tars
	// were read (guarded by mu): a tar of a later one is pushed ahead of its readers.
	epoch map[view.Key]uint64
}

func (s *tarSet) add(t *tarFile) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byIno == nil {
		s.byIno = map[uint64]*tarFile{}
	}
	s.byIno[t.ino] = t
	s.n.Store(int32(len(s.byIno)))
}

func (s *tarSet) remove(t *tarFile) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byIno, t.ino)
	s.n.Store(int32(len(s.byIno)))
}

// reading records that t's shard is being read: the same shard of earlier epochs is
// not, and leaves the set (pushing a sample into each cost a warm epoch a copy per past
// epoch); their pages are let go in the next quiet time (takePast). It returns the past
// tars two epochs or more before t's, for readers that leave no quiet time: those the
// caller lets go at once (dropPages).
func (s *tarSet) reading(t *tarFile) (old []*tarFile) {
	if t.read.Load() {
		return nil
	}
	t.read.Store(true)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.newest == nil {
		s.newest, s.epoch = map[string]uint64{}, map[view.Key]uint64{}
	}
	k := t.sh.Key()
	k.Epoch = 0
	s.epoch[k] = max(s.epoch[k], t.sh.Epoch())
	if e, ok := s.newest[t.sh.Stream()]; !ok || e < t.sh.Epoch() {
		s.newest[t.sh.Stream()] = t.sh.Epoch()
		for ino, o := range s.byIno {
			if o.sh.Stream() == t.sh.Stream() && o.sh.Epoch() < t.sh.Epoch() {
				delete(s.byIno, ino)
				s.past = append(s.past, o)
			}
		}
		s.n.Store(int32(len(s.byIno)))
	}
	kept := s.past[:0]
	for _, o := range s.past {
		if o.sh.Stream() == t.sh.Stream() && o.sh.Epoch()+2 <= t.sh.Epoch() {
			old = append(old, o)
		} else {
			kept = append(kept, o)
		}
	}
	s.past = kept
	return old
}

// every is how often t's samples leave their first page to a READ: one in probeEvery
// in an epoch readers are in (or none read yet), one in view.AheadEvery·probeEvery in a
// later one, whose pushes go ahead of its readers (see probeEvery).
func (s *tarSet) every(t *tarFile) int {
	k := t.sh.Key()
	k.Epoch = 0
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.epoch[k]; ok && t.sh.Epoch() > e {
		return view.AheadEvery * probeEvery
	}
	return probeEvery
}

// takePast returns the tars that left the set and empties the list.
func (s *tarSet) takePast() []*tarFile {
	s.mu.Lock()
	defer s.mu.Unlock()
	past := s.past
	s.past = nil
	return past
}

// dropPages has the kernel let go of the page cache of tars readers moved on from. Nobody
// reads a past epoch's tars again, and the kernel would keep them until memory ran short:
// an epoch's worth of pages each, which a long training run would stack up, pressing on
// everything else the machine caches (the database's files among them); and the pushes
// of later epochs then fill fresh memory (without this, a warm epoch's daemon CPU grew
// threefold from the fourth epoch on, nearly all of it the kernel's copy: the journal,
// "past epochs' tars let go"). A tar read again after all is rendered from the blobs.
// Letting go of pages costs CPU too (the kernel locks and frees each page:
// invalidate_inode_pages2_range), so it is done in the quiet time between epochs, before
// the next epoch's pushes (recordsQuiet), not while readers read; and never on a READ's
// own goroutine: the kernel waits for each page's lock, which a READ of the old tar may
// hold.
func (f *FS) dropPages(tars []*tarFile) {
	for _, t := range tars {
		s := f.serverOf(t)
		if s == nil {
			continue
		}
		// Offset 0, length 0: every page (fuse_reverse_inval_inode, fs/fuse/inode.c).
		if st := s.InodeNotify(t.ino, 0, 0); st == fuse.OK {
			f.push.dropped.Add(1)
		}
	}
}

// find returns the tar of shard k of epoch view key, if the kernel knows it.
func (s *tarSet) find(key view.Key, k int) *tarFile {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.byIno {
		if t.sh.Key() == key && t.sh.K == k {
			return t
		}
	}
	return nil
}

// eachHolding calls fn, with s.mu held, for every tar that holds sample i (at index j)
// but those of epochs before the newest read of their shard's stream (looked up again
// after it was read).
func (s *tarSet) eachHolding(i uint32, fn func(t *tarFile, j int)) {
	if s.n.Load() == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.byIno {
		if t.sh.Epoch() < s.newest[t.sh.Stream()] {
			continue
		}
		if j, ok := t.pos[i]; ok {
			fn(t, j)
		}
	}
}

// holding lists the tars that hold sample i (eachHolding), with its index in each.
func (s *tarSet) holding(i uint32) (tars []*tarFile, at []int) {
	s.eachHolding(i, func(t *tarFile, j int) {
		tars = append(tars, t)
		at = append(at, j)
	})
	return tars, at
}

// pushedIn reports whether tars the kernel knows hold sample i (holding, as holding
// lists them), and whether every one of them has its pages pushed (tarFile.done).
func (s *tarSet) pushedIn(i uint32) (holding, pushed bool) {
	pushed = true
	s.eachHolding(i, func(t *tarFile, j int) {
		holding = true
		pushed = pushed && t.done.Has(uint32(j))
	})
	return holding, holding && pushed
}

// pushRecords pushes sample i's bytes into the page cache of every tar the kernel knows
// that holds it, and reports whether any took them.
func (f *FS) pushRecords(i uint32, data []byte) bool {
	tars, at := f.tars.holding(i)
	pushed := false
	for k, t := range tars {
		if t.done.Has(uint32(at[k])) {
			pushed = true // pushed between epochs (records_ahead.go)
			continue
		}
		pushed = f.pushTar(t, at[k], data, f.tars.every(t), nil) || pushed
	}
	return pushed
}

// pushTar pushes the pages of t that sample j's bytes complete: its own whole pages, and
// a page shared with a neighbour whose blob the cache holds (Config.Peek) or near holds
// (by index in the shard; may be nil). The first page of one sample in every is left to
// its READ.
func (f *FS) pushTar(t *tarFile, j int, data []byte, every int, near map[int][]byte) bool {
	s := f.serverOf(t)
	if s == nil || t.own && f.local.has(t.sh.Key(), t.sh.K) {
		return false // a tar held in a local file is opened in passthrough mode
	}
	sh := t.sh
	page := int64(os.Getpagesize())
	start, end := sh.Start(j), sh.Start(j+1)
	if j == sh.Len()-1 {
		end = sh.Size() // the end blocks go with the last sample
	}
	blobs := map[int][]byte{j: data}
	held := func(k int) bool {
		if b, ok := near[k]; ok {
			blobs[k] = b
			return true
		}
		if f.cfg.Peek == nil {
			return false
		}
		b, ok := f.cfg.Peek(sh.Sample(k))
		blobs[k] = b
		return ok
	}
	lo := start &^ (page - 1)
	for k := j - 1; lo < start && k >= 0 && sh.Start(k+1) > lo; k-- {
		if !held(k) {
			lo += page
			break
		}
	}
	hi := min((end+page-1)&^(page-1), sh.Size())
	for k := j + 1; hi > end && k < sh.Len() && sh.Start(k) < hi; k++ {
		if !held(k) {
			hi = end &^ (page - 1)
			break
		}
	}
	if lo >= hi {
		return false
	}
	if f.cfg.PushRoom != nil && !f.cfg.PushRoom(hi-lo) {
		f.push.overLimit.Add(1)
		return false
	}
	// The pages wholly inside the blob go from the blob itself (the kernel copies them);
	// those with headers and the small members are rendered. Each page is in one
	// notification, which alone marks it up to date.
	render := func(from, to int64) []byte {
		buf := make([]byte, to-from)
		if err := sh.ReadAt(buf, from, func(k int) ([]byte, error) { return blobs[k], nil }); err != nil {
			return nil
		}
		return buf
	}
	d := sh.DataStart(j)
	bodyLo := max((d+page-1)&^(page-1), lo)
	bodyHi := min((d+f.ix.Size(sh.Sample(j)))&^(page-1), hi)
	type segment struct {
		from, to int64
		data     []byte
	}
	var segs []segment
	if bodyLo < bodyHi {
		segs = []segment{{lo, bodyLo, nil}, {bodyLo, bodyHi, data[bodyLo-d : bodyHi-d]}, {bodyHi, hi, nil}}
	} else {
		segs = []segment{{lo, hi, nil}}
	}
	// Probes' first pages are left out.
	var probes []int64
	for k := sh.Find(lo); k < sh.Len() && sh.Start(k) < hi; k++ {
		if p := sh.Start(k) &^ (page - 1); k%every == 0 && p >= lo {
			probes = append(probes, p)
		}
	}
	pushed := false
	for _, sg := range segs {
		if sg.from >= sg.to {
			continue
		}
		if sg.data == nil {
			if sg.data = render(sg.from, sg.to); sg.data == nil {
				f.push.failed.Add(1)
				return pushed
			}
		}
		from := sg.from
		for _, p := range append(probes, sg.to) {
			to := min(max(p, sg.from), sg.to)
			if from < to {
				if !f.notifyStore(s, t.ino, from, sg.data[from-sg.from:to-sg.from]) {
					return pushed
				}
				pushed = true
			}
			from = max(from, min(p+page, sg.to))
		}
	}
	if pushed {
		f.push.records.Add(1)
		t.done.Put(uint32(j), true)
	}
	return pushed
}

// serverOf is the connection t is served on.
func (f *FS) serverOf(t *tarFile) *fuse.Server {
	if t.own {
		return f.recServer.Load()
	}
	return f.server.Load()
}

// notifyStore writes data into ino's page cache at off, and counts it.
func (f *FS) notifyStore(s *fuse.Server, ino uint64, off int64, data []byte) bool {
	st := s.InodeNotifyStoreCache(ino, off, data)
	switch st {
	case fuse.OK:
		f.push.bytes.Add(int64(len(data)))
		return true
	case fuse.ENOENT:
		f.push.unknown.Add(1)
	default:
		f.push.failed.Add(1)
	}
	return false
}
