package view

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cassfs/cassfs/prefetch"
	"github.com/cassfs/cassfs/splits"
)

// The record view: beside epoch-N/, epoch-N.wds/ shows the same epoch view as WebDataset
// shards, tar files whose members follow the epoch's order. Readers of record files (DALI's
// fn.readers.webdataset, the webdataset package) then read a full reshuffle every epoch
// with no conversion and no shuffle buffer.
//
//	epoch-N.wds/
//	  shard-00000.tar   positions 0 .. per-1 of the epoch view, in order
//	  shard-00000.idx   its DALI index (the format wds2idx writes)
//	  shard-00001.tar   positions per .. 2·per-1, ...
//
// Each sample is the members that share its key, its position in the epoch zero-padded as
// in entry names: KEY.<ext> (the stored bytes; ext is the extension of its file name),
// KEY.cls (the label, decimal), KEY.json (uuid, label, class, name and every metadata
// column it has a value in) and, with targets, KEY.target.<ext> (the target's bytes).
//
// Every byte is a function of the index: a member's header is what archive/tar writes for
// it (ustar, mode 0444, the mount's time), its data padded to 512 bytes, and the archive
// ends with the two zero blocks archive/tar's Close writes. So sizes, offsets and the index
// files are known before any blob arrives, and ReadAt returns for any range exactly what
// archive/tar would write for those samples in that order. Sizes are kept in 32 bits by
// the index, far below the 8 GiB a ustar member holds, and names are short, so ustar
// always fits.
//
// A shard holds per samples, the same number in every shard of a split but the last:
// Config.ShardBytes divided by the split's mean bytes per sample, so shards weigh about
// ShardBytes each and readers that split shards between them (DALI's num_shards, a
// DataLoader's workers) get even shares. Records of resumed views (epoch-N@K) are not
// shown: a reader resuming records restarts at a shard. Names are bound strictly: a
// position shows the sample the permutation puts there, whatever the mount's binding, since
// its offset depends on the sizes before it.
//
// Each shard read is a prefetch stream of its own (recordStream): readers of several shards
// at once are followed each in their shard. A shard's stream runs on from the shard's first
// position to the end of the epoch, not to the shard's end: readers that take shards in
// order (DALI's, one after another; a DataLoader's workers, each the next shard no worker
// took) find the next shard's start fetched, where a stream that ended with the shard
// left them its first fetches to wait for, a round trip or more at every shard (at 150 ms,
// a quarter of the file view's speed). What it fetches of the next shard is what that
// shard's own stream, once read, finds cached. Package fs reports how far each shard was
// read (RecordShard.Reading).

// RecordsSuffix names the record view of an epoch: epoch-N.wds beside epoch-N.
const RecordsSuffix = ".wds"

// DefaultShardBytes is the default size of a shard: the low end of WebDataset's guidance
// (100 MB–1 GB), so a split of a few GB makes shards enough for 8–16 loader workers.
const DefaultShardBytes = 128 << 20

// MinShardBytes is the smallest shard size accepted (Config.ShardBytes).
const MinShardBytes = 1 << 20

// tarBlock is the tar format's block: headers are one, data is padded to a multiple.
const tarBlock = 512

// RecordsKeyIn resolves the name of an epoch's record view in a shard directory of split
// (a view of shard sh): "epoch-<N>.wds".
func (s *Set) RecordsKeyIn(split string, sh splits.Shard, name string) (Key, bool) {
	base, ok := strings.CutSuffix(name, RecordsSuffix)
	if !ok {
		return Key{}, false
	}
	k, ok := s.EpochKeyIn(split, sh, base)
	if !ok || base != EpochName(k.Epoch) {
		return Key{}, false
	}
	return k, true
}

// ShardFileName is the name of shard k's tar file (index: its index file) among n shards.
func ShardFileName(k, n int, index bool) string {
	ext := ".tar"
	if index {
		ext = ".idx"
	}
	return "shard-" + padInt(uint64(k), max(5, len(strconv.Itoa(max(n-1, 0))))) + ext
}

// ParseShardFileName is ShardFileName's inverse among n shards.
func ParseShardFileName(name string, n int) (k int, index, ok bool) {
	base, index := strings.CutSuffix(name, ".idx")
	if !index {
		if base, ok = strings.CutSuffix(name, ".tar"); !ok {
			return 0, false, false
		}
	}
	digits, ok := strings.CutPrefix(base, "shard-")
	v, err := strconv.ParseUint(digits, 10, 32)
	if !ok || err != nil || v >= uint64(n) || ShardFileName(int(v), n, index) != name {
		return 0, false, false
	}
	return int(v), index, true
}

// Records is the record view of one epoch view: its order cut into shards.
type Records struct {
	e      *Epoch
	per    int // samples per shard
	shards []shardSlot
}

type shardSlot struct {
	once sync.Once
	sh   *RecordShard
}

// Records returns the record view of e, made on first use.
func (e *Epoch) Records() *Records {
	e.recOnce.Do(func() {
		per := e.set.samplesPerShard(e.Key.Split)
		n := (len(e.Order) + per - 1) / per
		e.rec = &Records{e: e, per: per, shards: make([]shardSlot, n)}
	})
	return e.rec
}

// samplesPerShard is how many samples a shard of split holds: Config.ShardBytes over the
// split's mean bytes per sample (headers and padding counted, the JSON member taken as one
// block), at least 1. It depends on the split only, so every epoch and shard directory of
// a split cuts its shards alike, and a shard's stream has the same length in every epoch.
func (s *Set) samplesPerShard(split string) int {
	sp := s.byName[split]
	if len(sp.Members) == 0 {
		return 1
	}
	var total int64
	for _, i := range sp.Members {
		total += 4*tarBlock + padBlock(s.ix.Size(i)) + tarBlock + tarBlock
		if s.ix.HasTargets() {
			total += tarBlock + padBlock(s.ix.TargetSize(i))
		}
	}
	mean := max(total/int64(len(sp.Members)), 1)
	return int(max(s.cfg.ShardBytes/mean, 1))
}

// Len is the number of shards.
func (r *Records) Len() int { return len(r.shards) }

// Shard returns shard k, laid out on first use.
func (r *Records) Shard(k int) *RecordShard {
	sl := &r.shards[k]
	sl.once.Do(func() { sl.sh = r.layout(k) })
	return sl.sh
}

// RecordShard is one tar file of a record view.
type RecordShard struct {
	r     *Records
	K     int
	first int     // index in the view's order of its first sample
	off   []int64 // off[j]: where sample j's first header starts; off[n]: the end of its last member
	json  []int32 // json[j]: the size of sample j's JSON member

	reads  shardReads
	stream *recordStream

	idxOnce sync.Once
	idx     []byte
}

func (r *Records) layout(k int) *RecordShard {
	first := k * r.per
	n := min(r.per, len(r.e.Order)-first)
	sh := &RecordShard{r: r, K: k, first: first, off: make([]int64, n+1), json: make([]int32, n)}
	ix := r.e.set.ix
	var pos int64
	for j := range n {
		i := r.e.Order[first+j]
		sh.off[j] = pos
		sh.json[j] = int32(len(r.e.set.sampleJSON(i)))
		pos += tarBlock + padBlock(ix.Size(i)) + tarBlock + padBlock(int64(len(strconv.Itoa(ix.Label(i))))) + tarBlock + padBlock(int64(sh.json[j]))
		if ix.HasTargets() {
			pos += tarBlock + padBlock(ix.TargetSize(i))
		}
	}
	sh.off[n] = pos
	e := r.e
	name := e.stream.name + RecordsSuffix + "/" + strconv.Itoa(k)
	sh.stream = &recordStream{set: e.set, key: e.Key, k: k, per: r.per, name: name}
	return sh
}

func padBlock(n int64) int64 { return (n + tarBlock - 1) / tarBlock * tarBlock }

// Size is the tar file's size: its members and the two zero blocks that end it.
func (sh *RecordShard) Size() int64 { return sh.off[len(sh.off)-1] + 2*tarBlock }

// Len is the number of samples in the shard.
func (sh *RecordShard) Len() int { return len(sh.off) - 1 }

// Sample is the canonical index of the shard's sample j.
func (sh *RecordShard) Sample(j int) uint32 { return sh.r.e.Order[sh.first+j] }

// Start is where sample j's first header starts (j = Len: where the end blocks start).
func (sh *RecordShard) Start(j int) int64 { return sh.off[j] }

// DataStart is where sample j's own bytes (its first member's data) start.
func (sh *RecordShard) DataStart(j int) int64 { return sh.off[j] + tarBlock }

// Find is the sample whose bytes hold offset off: Len for the end blocks (and beyond).
func (sh *RecordShard) Find(off int64) int {
	return sort.Search(sh.Len(), func(j int) bool { return sh.off[j+1] > off })
}

// member is one member of a sample: its name in the tar, its size and its bytes.
type member struct {
	name string
	data []byte
}

// members lists sample j's members; blob is its content as the cache holds it (the blob,
// then its target's), nil for sizes only (data then holds nil or the generated bytes).
func (sh *RecordShard) members(j int, blob []byte) (ms [4]member, n int, sizes [4]int64) {
	e := sh.r.e
	ix := e.set.ix
	i := sh.Sample(j)
	key := padInt(uint64(e.Start)+uint64(sh.first+j), e.width)
	size := ix.Size(i)
	ext := memberExt(ix.Name(i))
	var img, target []byte
	if blob != nil {
		img = blob[:size]
		target = blob[size:]
	}
	ms[0], sizes[0] = member{key + "." + ext, img}, size
	cls := strconv.Itoa(ix.Label(i))
	ms[1], sizes[1] = member{key + ".cls", []byte(cls)}, int64(len(cls))
	ms[2], sizes[2] = member{key + ".json", nil}, int64(sh.json[j])
	n = 3
	if ix.HasTargets() {
		text := memberExt(ix.TargetName(i))
		ms[3], sizes[3] = member{key + ".target." + text, target}, ix.TargetSize(i)
		n = 4
	}
	return ms, n, sizes
}

// ReadAt fills dst with the tar's bytes from off on (dst must end within the file). blob
// returns sample j's content as the cache holds it; it is asked only for samples whose
// bytes dst covers.
func (sh *RecordShard) ReadAt(dst []byte, off int64, blob func(j int) ([]byte, error)) error {
	end := off + int64(len(dst))
	for j := sh.Find(off); j < sh.Len() && sh.off[j] < end; j++ {
		b, err := blob(j)
		if err != nil {
			return err
		}
		if err := sh.render(dst, off, j, b); err != nil {
			return err
		}
	}
	// The end blocks and the padding are zeros; dst may hold anything.
	if tail := max(sh.off[sh.Len()], off); tail < end {
		clear(dst[tail-off:])
	}
	return nil
}

// render writes the part of sample j's members that falls in dst (which holds the tar's
// bytes from off on).
func (sh *RecordShard) render(dst []byte, off int64, j int, blob []byte) error {
	if want := sh.r.e.set.ix.BlobSize(sh.Sample(j)); int64(len(blob)) != want {
		return fmt.Errorf("record view: sample #%d holds %d bytes, the index says %d", sh.Sample(j), len(blob), want)
	}
	ms, n, sizes := sh.members(j, blob)
	end := off + int64(len(dst))
	pos := sh.off[j]
	for m := range n {
		if pos >= end {
			return nil
		}
		dataEnd := pos + tarBlock + sizes[m]
		next := pos + tarBlock + padBlock(sizes[m])
		if next <= off {
			pos = next
			continue
		}
		if pos+tarBlock > off {
			var h [tarBlock]byte
			sh.r.e.set.ustarHeader(&h, ms[m].name, sizes[m])
			copyAt(dst, off, pos, h[:])
		}
		if dataEnd > off && pos+tarBlock < end {
			data := ms[m].data
			if m == 2 {
				data = sh.r.e.set.sampleJSON(sh.Sample(j))
			}
			copyAt(dst, off, pos+tarBlock, data)
		}
		if next > off && dataEnd < end {
			lo, hi := max(dataEnd, off), min(next, end)
			if lo < hi {
				clear(dst[lo-off : hi-off])
			}
		}
		pos = next
	}
	return nil
}

// copyAt copies src, which belongs at offset at of the file, into the part of dst (the
// file's bytes from off on) it overlaps.
func copyAt(dst []byte, off, at int64, src []byte) {
	lo := max(at, off)
	hi := min(at+int64(len(src)), off+int64(len(dst)))
	if lo < hi {
		copy(dst[lo-off:hi-off], src[lo-at:hi-at])
	}
}

// ustarHeader writes into h the header archive/tar writes for a regular file called name
// (at most 100 bytes: see memberExt) of size bytes: ustar, mode 0444, owned by root,
// modified at the set's time. The header of an empty name, rendered once by archive/tar,
// is a template: the name, the size and the checksum are all that differ (the format is
// archive/tar's formatter's: octal with leading zeros and a NUL, the checksum six digits, a
// NUL and a space), which TestRecordShardsAreWhatArchiveTarWrites checks byte for byte.
func (s *Set) ustarHeader(h *[tarBlock]byte, name string, size int64) {
	s.headerOnce.Do(func() {
		var b bytes.Buffer
		// WriteHeader writes the header block at once; no data is written, and the writer
		// is dropped unclosed.
		err := tar.NewWriter(&b).WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "-", Mode: 0o444, ModTime: s.modTime, Format: tar.FormatUSTAR})
		if err != nil {
			panic(fmt.Sprintf("record view: a ustar header: %v", err))
		}
		copy(s.header[:], b.Bytes())
		s.header[0] = 0
	})
	*h = s.header
	copy(h[:100], name)
	size8 := strconv.FormatInt(size, 8)
	copy(h[124:135], "00000000000"[:11-len(size8)]+size8)
	sum := 8 * int64(' ') // the checksum's own field counts as spaces
	for k, c := range h {
		if k < 148 || k >= 156 {
			sum += int64(c)
		}
	}
	sum8 := strconv.FormatInt(sum, 8)
	copy(h[148:156], "000000"[:6-len(sum8)]+sum8+"\x00 ")
}

// memberExt is the extension a member's name takes from a file name: its own, or "bin" for
// one without or with a long one (a ustar name holds 100 bytes).
func memberExt(name string) string {
	ext := strings.TrimPrefix(path.Ext(name), ".")
	if ext == "" || len(ext) > 32 {
		return "bin"
	}
	return ext
}

// sampleJSON is sample i's JSON member: its id, label, class and name at ingest, then each
// metadata column it has a value in, in the columns' order.
func (s *Set) sampleJSON(i uint32) []byte {
	ix := s.ix
	b := []byte(`{"uuid":"`)
	b = append(b, ix.ID(i).String()...)
	b = append(b, `","label":`...)
	b = strconv.AppendInt(b, int64(ix.Label(i)), 10)
	b = append(b, `,"class":`...)
	b = appendJSONString(b, ix.Labels()[ix.Label(i)])
	b = append(b, `,"name":`...)
	b = appendJSONString(b, ix.Path(i))
	for c, col := range ix.Columns() {
		if v, ok := ix.Meta(i, c); ok {
			b = append(b, ',')
			b = appendJSONString(b, col)
			b = append(b, ':')
			b = appendJSONString(b, string(v))
		}
	}
	return append(b, '}')
}

func appendJSONString(b []byte, s string) []byte {
	for k := 0; k < len(s); k++ {
		if c := s[k]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			q, _ := json.Marshal(s) // a string always marshals
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// Index is the shard's DALI index file: "v1.2 <samples>", then a line per sample listing,
// for each member, its extension, the offset of its data, its size and its name (what
// wds2idx writes for the tar).
func (sh *RecordShard) Index() []byte {
	sh.idxOnce.Do(func() {
		b := []byte("v1.2 " + strconv.Itoa(sh.Len()) + "\n")
		for j := range sh.Len() {
			ms, n, sizes := sh.members(j, nil)
			pos := sh.off[j]
			for m := range n {
				if m > 0 {
					b = append(b, ' ')
				}
				name := ms[m].name
				b = append(b, name[strings.IndexByte(name, '.')+1:]...)
				b = append(b, ' ')
				b = strconv.AppendInt(b, pos+tarBlock, 10)
				b = append(b, ' ')
				b = strconv.AppendInt(b, sizes[m], 10)
				b = append(b, ' ')
				b = append(b, name...)
				pos += tarBlock + padBlock(sizes[m])
			}
			b = append(b, '\n')
		}
		sh.idx = b
	})
	return sh.idx
}

// Stream names the shard's prefetch stream: the same shard of every epoch of a split (or
// shard directory).
func (sh *RecordShard) Stream() string { return sh.stream.name }

// Epoch is the shard's epoch.
func (sh *RecordShard) Epoch() uint64 { return sh.r.e.N }

// Key is the shard's epoch view.
func (sh *RecordShard) Key() Key { return sh.r.e.Key }

// Last reports whether the shard is its record view's last.
func (sh *RecordShard) Last() bool { return sh.K == len(sh.r.shards)-1 }

// shardReads is what the READs of a shard told of its readers' progress (ReadBegins).
type shardReads struct {
	mu       sync.Mutex
	reached  int         // samples counted as accessed
	seen     int         // samples READs begun or answered show the readers past
	inFlight map[int]int // the first sample of each READ in flight → how many
}

// ReadBegins tells the prefetcher that a READ of the shard from its sample first on
// began, and ReadEnds (with the same first) that it was answered, having covered samples
// up to at (at = Len: the end blocks), or failed. The shard's stream counts the samples
// before first as accessed at once (the prefetcher goes on from first, which is not in
// yet), and up to at once answered; but never past the first sample of a READ still in
// flight. A reader reads a tar in order, but not one READ at a time: DALI reads a
// batch's samples in parallel, and a READ far into the shard may be answered while the
// kernel's READs of the samples before it wait. Counting those as read would leave them
// to be fetched one READ at a time, a round trip each, behind the prefetcher's back. Both
// return the samples newly counted, [from, to): some were read from the page cache,
// where the daemon sees no READ. The first READ of a shard starts its stream (a count of
// 0), so the prefetcher starts as the reader does, not when its first READ is answered.
func (sh *RecordShard) ReadBegins(first int) (from, to int) {
	rs := &sh.reads
	rs.mu.Lock()
	if rs.inFlight == nil {
		rs.inFlight = map[int]int{}
	}
	rs.inFlight[first]++
	rs.seen = max(rs.seen, min(first, sh.Len()))
	return sh.advanceLocked(true)
}

// ReadEnds tells the prefetcher that a READ ReadBegins told of was answered (see there).
func (sh *RecordShard) ReadEnds(first, at int, ok bool) (from, to int) {
	rs := &sh.reads
	rs.mu.Lock()
	if rs.inFlight[first]--; rs.inFlight[first] <= 0 {
		delete(rs.inFlight, first)
	}
	if ok {
		rs.seen = max(rs.seen, min(at+1, sh.Len()))
	}
	return sh.advanceLocked(false)
}

// advanceLocked counts what rs now shows as accessed, and unlocks rs.mu; touch reports a
// count of 0 as well, so that a stream not known yet starts.
func (sh *RecordShard) advanceLocked(touch bool) (from, to int) {
	rs := &sh.reads
	c := rs.seen
	for f := range rs.inFlight {
		c = min(c, f)
	}
	old := rs.reached
	if c < old || c == old && !(touch && old == 0) {
		rs.mu.Unlock()
		return old, old
	}
	rs.reached = c
	rs.mu.Unlock()
	// Outside the lock: the prefetcher issues under its own. Counts reported out of
	// order still add up to reached.
	if p := sh.r.e.set.cfg.Progress; p != nil {
		p.AccessN(sh.stream, sh.r.e.N, c-old)
	}
	return old, c
}

// recordStream is the prefetch stream of one shard of a record view: its positions, and
// those after it to the end of the epoch, in every epoch of the split (and shard directory).
type recordStream struct {
	set  *Set
	key  Key
	k    int // the shard
	per  int // samples per shard
	name string
}

var _ prefetch.Continuing = (*recordStream)(nil)

func (st *recordStream) Name() string { return st.name }

// Continues names the stream of the shard before: readers that take shards in order
// take over its rate (prefetch.Continuing).
func (st *recordStream) Continues() string {
	return strings.TrimSuffix(st.name, strconv.Itoa(st.k)) + strconv.Itoa(st.k-1)
}

func (st *recordStream) Order(epoch uint64) []uint32 {
	k := st.key
	k.Epoch = epoch
	order := st.set.Epoch(k).Order
	return order[min(st.k*st.per, len(order)):]
}

// ModTime is the time of every entry of the mount, and of every member of its record files.
func (s *Set) ModTime() time.Time { return s.modTime }
