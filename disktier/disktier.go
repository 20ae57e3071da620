// Package disktier keeps fetched blobs as files in a local directory (a GPU node's NVMe),
// so that epochs after the first, and later mounts, read them from disk instead of the
// database: the Tier (a prefetch.Fetcher over the store's, bounded in bytes, evicting by
// the known future with evict.SampledMIN), and what `cassfs cache show` and `cache clear`
// do with such a directory without opening it (ReadUsage, Remove). It knows neither FUSE
// nor the database.
package disktier

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cassfs/cassfs/evict"
	"github.com/cassfs/cassfs/index"
	"github.com/cassfs/cassfs/internal/bitset"
	"github.com/cassfs/cassfs/prefetch"
	"github.com/google/uuid"
	"golang.org/x/sys/unix"
)

// Tier keeps fetched blobs as files in a directory (a GPU node's NVMe), so that epochs
// after the first, and later mounts, read them from disk instead of the database.
//
// An entry is DIR/<dataset>/<first two hex digits of the id>/<sample id>-<first 16 hex
// digits of its SHA-256>: keyed by what makes it valid, so a remount finds it, a sample
// ingested again (another checksum) never serves its old bytes, and two datasets never
// mix. Entries are written to a temporary name and renamed, so a crash mid-write leaves
// no entry that can be served; every entry read is verified against the index (CRC32C, or
// SHA-256 for samples ingested without one) before it is served, so a flipped byte is
// refetched from the database and counted, never served. Files that are not entries (not
// named as above) are left alone.
//
// The tier is bounded in bytes. Once full, it evicts by the known future (UseFuture: the
// prefetcher's current and next epoch orders of every split and shard being read), but
// only an entry that no known order reads, and only for a sample that the orders read
// again after the read it is fetched for. Such an entry is what Belady's MIN evicts first;
// between two samples that the known orders do read, MIN would keep the one read sooner,
// which under a new permutation every epoch gains no hit (each is read once an epoch) and
// would rewrite the disk for nearly every miss (BenchmarkEvictionPolicies counts both). So
// a tier holding one split read whole every epoch keeps what it has, and one whose reads
// move on — a rank of a sharded job reads another part of the split every epoch, a job
// moves from one split to another, `cassfs cache warm` filled it with samples this mount
// does not read — replaces what will not be read by what will. Entries are drawn at random
// (evict.SampledMIN, 8 bytes per entry) rather than kept ordered. Without a known future
// (cassfs cache warm) it admits nothing once full. A mount that finds more than its bound
// (a smaller --cache-dir-size than last time) removes entries until it fits.
//
// One mount at a time uses a dataset's directory: it holds an exclusive lock on
// DIR/<dataset>/.lock, and a second mount of the dataset with the same directory is
// refused with a clear error (give each its own directory).
type Tier struct {
	dir      string
	ix       *index.Index
	maxBytes int64
	lock     *os.File
	log      *slog.Logger

	mu       sync.Mutex
	held     map[uint32]int64    // guarded by mu: sample → size of its entry
	policy   *evict.SampledMIN   // guarded by mu: the held samples, for eviction
	future   evict.ReuseFuture   // guarded by mu: what evicts (nil: none, the tier keeps what it has)
	bytes    int64               // guarded by mu
	verified map[uint32]fileID   // guarded by mu: entries written or verified by this mount, as they were then
	files    map[uint32]*os.File // guarded by mu: verified entries held open (at most maxFiles; see Backing)
	maxFiles int
	present  bitset.Set // held samples (Holds without the lock)

	hits, misses, corrupt, writeErrors, evicted atomic.Int64
	before                                      Stats // hits and misses of earlier mounts (DIR/<dataset>/.stats)
	// OnCorrupt, if set, is called with the error of every entry that failed verification.
	OnCorrupt func(error)
}

// Stats are the disk tier's counters.
type Stats struct {
	Hits, Misses, Corrupt, WriteErrors int64
	Evicted                            int64 // entries no known order reads, removed for ones read again
	Entries                            int
	Bytes, MaxBytes                    int64
}

// Open opens (making it if needed) the disk tier of dataset ds in dir, bounded by
// maxBytes, and indexes the entries it already holds for ix.
func Open(dir, ds string, ix *index.Index, maxBytes int64, log *slog.Logger) (*Tier, error) {
	if maxBytes <= 0 {
		return nil, fmt.Errorf("cache directory %s: a size bound is needed (--cache-dir-size)", dir)
	}
	root := filepath.Join(dir, ds)
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("cache directory %s: %w (it must be a directory cassfs can write)", dir, err)
	}
	lock, err := os.OpenFile(filepath.Join(root, ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("cache directory %s: %w (it must be a directory cassfs can write)", dir, err)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		lock.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("cache directory %s is in use by another mount of dataset %s: give each mount its own --cache-dir", dir, ds)
		}
		return nil, fmt.Errorf("cache directory %s: lock: %w", dir, err)
	}
	d := &Tier{dir: root, ix: ix, maxBytes: maxBytes, lock: lock, log: log, held: map[uint32]int64{},
		policy: evict.NewSampledMIN(ix.Len(), uint64(os.Getpid())), verified: map[uint32]fileID{},
		files: map[uint32]*os.File{}, maxFiles: maxHeldFiles(), present: bitset.New(ix.Len())}
	if b, err := os.ReadFile(filepath.Join(root, statsFile)); err == nil {
		json.Unmarshal(b, &d.before) // counters only: unreadable ones start again at zero
	}
	if err := d.scan(); err != nil {
		lock.Close()
		return nil, err
	}
	return d, nil
}

// scan indexes the entries that are valid for the index, removes stale ones (samples
// ingested again or gone, temporary files of a crashed write) and trims to the bound.
func (d *Tier) scan() error {
	err := filepath.WalkDir(d.dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() || e.Name() == ".lock" || e.Name() == statsFile {
			return nil
		}
		name := e.Name()
		if strings.Contains(name, ".tmp-") {
			os.Remove(p) // a write that did not finish
			return nil
		}
		i, ok, valid := d.parse(name)
		if !ok {
			return nil // not ours
		}
		info, err := e.Info()
		if !valid || err != nil || info.Size() != d.ix.BlobSize(i) {
			os.Remove(p) // ingested again, removed from the dataset, or cut short
			return nil
		}
		if d.bytes+info.Size() > d.maxBytes {
			os.Remove(p) // a smaller bound than the last mount's
			return nil
		}
		d.held[i] = info.Size()
		d.policy.Add(i)
		d.bytes += info.Size()
		d.mark(i, true)
		return nil
	})
	if err != nil {
		return fmt.Errorf("cache directory %s: %w", d.dir, err)
	}
	return nil
}

// parse reads an entry's name: ok if it is named as entries are, valid if it is the
// current entry of a sample of the index.
func (d *Tier) parse(name string) (i uint32, ok, valid bool) {
	if len(name) != 36+1+16 || name[36] != '-' {
		return 0, false, false
	}
	id, err := uuid.Parse(name[:36])
	if err != nil {
		return 0, false, false
	}
	if _, err := hex.DecodeString(name[37:]); err != nil {
		return 0, false, false
	}
	i, found := d.ix.Find(id)
	if !found {
		return 0, true, false
	}
	return i, true, d.name(i) == name
}

// name is sample i's entry name. In a dataset with targets the entry holds the target
// too, and its target's CRC32C is folded into the key: a target ingested anew makes it
// stale like a new blob does.
func (d *Tier) name(i uint32) string {
	sum := d.ix.Checksum(i)
	if d.ix.HasTargets() {
		binary.BigEndian.PutUint32(sum[4:8], binary.BigEndian.Uint32(sum[4:8])^d.ix.TargetCRC32C(i))
	}
	return d.ix.ID(i).String() + "-" + hex.EncodeToString(sum[:8])
}

func (d *Tier) path(i uint32) string {
	n := d.name(i)
	return filepath.Join(d.dir, n[:2], n)
}

// Over returns the Fetcher that serves samples from the tier and fetches the others with
// next, keeping them on disk while the bound allows.
func (d *Tier) Over(next prefetch.Fetcher) *Fetcher { return &Fetcher{tier: d, next: next} }

// Fetcher is the tier's link in the read chain: above the store, below the memory cache.
type Fetcher struct {
	tier *Tier
	next prefetch.Fetcher
}

// Fetch implements prefetch.Fetcher.
func (f *Fetcher) Fetch(ctx context.Context, i uint32) ([]byte, error) {
	d := f.tier
	if data, ok := d.read(i); ok {
		d.hits.Add(1)
		return data, nil
	}
	d.misses.Add(1)
	data, err := f.next.Fetch(ctx, i)
	if err != nil {
		return nil, err
	}
	d.write(i, data)
	return data, nil
}

// FetchBlock implements prefetch.BlockFetcher: the samples the tier holds are read from
// their files, each by itself and all at once (as their Fetches would be: a disk serves
// reads in parallel), the others fetched in one block below and kept as they arrive.
func (f *Fetcher) FetchBlock(ctx context.Context, samples []uint32, got func(k int, data []byte, err error)) {
	d := f.tier
	var missing []uint32
	var at []int // the index in samples of each of missing
	var wg sync.WaitGroup
	for k, i := range samples {
		if !d.Holds(i) {
			d.misses.Add(1)
			missing, at = append(missing, i), append(at, k)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			data, err := f.Fetch(ctx, i) // from its file, or fetched if it fails to verify
			got(k, data, err)
		}()
	}
	if len(missing) > 0 {
		prefetch.FetchBlock(ctx, f.next, missing, func(j int, data []byte, err error) {
			if err == nil {
				d.write(missing[j], data)
			}
			got(at[j], data, err)
		})
	}
	wg.Wait()
}

// read returns sample i's entry if it holds one that verifies. The Cache fetches a sample
// once at a time, so read and write never race for one sample.
func (d *Tier) read(i uint32) ([]byte, bool) {
	if !d.Holds(i) {
		return nil, false // none, or still being written
	}
	data, err := os.ReadFile(d.path(i))
	if err == nil {
		err = d.verify(i, data)
	}
	if err != nil {
		d.drop(i)
		return nil, false
	}
	return data, true
}

// verify checks an entry's content against the index; a mismatch is counted, logged and
// reported (OnCorrupt) before the caller drops the entry.
func (d *Tier) verify(i uint32, data []byte) error {
	err := d.ix.VerifyBlob(i, data)
	if err != nil {
		d.corrupt.Add(1)
		d.log.Warn("cache file corrupt; fetching the sample again", "file", d.path(i), "err", err)
		if d.OnCorrupt != nil {
			d.OnCorrupt(err)
		}
	}
	return err
}

// write keeps data as sample i's entry if the bound allows: to a temporary name, then
// renamed. A failure (a full disk, a directory gone) is logged once and counted; the
// sample is served from memory all the same.
func (d *Tier) write(i uint32, data []byte) {
	n := int64(len(data))
	d.mu.Lock()
	if _, ok := d.held[i]; ok {
		d.mu.Unlock()
		return
	}
	evicted, fits := d.makeRoomLocked(i, n)
	if fits {
		d.held[i] = n // reserved: a concurrent write of i stops above
		d.policy.Add(i)
		d.bytes += n
	}
	d.mu.Unlock()
	for _, v := range evicted {
		os.Remove(d.path(v))
		d.evicted.Add(1)
	}
	if !fits {
		return
	}
	// Holds (and so Backing and Local) only once the file is there: an open arriving
	// during the write would find no file, drop the reservation and orphan the entry.
	p := d.path(i)
	err := os.MkdirAll(filepath.Dir(p), 0o700)
	var f *os.File
	if err == nil {
		f, err = os.CreateTemp(filepath.Dir(p), filepath.Base(p)+".tmp-*")
	}
	if err == nil {
		_, err = f.Write(data)
		// Its identity before closing: the file renamed is this one.
		id, known := idOf(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(f.Name(), p)
		}
		if err == nil && known {
			d.mu.Lock()
			d.verified[i] = id
			d.mu.Unlock()
		}
		if err == nil {
			d.mark(i, true)
			// Held open from now on (see Backing): the directory entry is in the
			// kernel's caches now, so this open is cheap, unlike one in a later epoch.
			if g, gerr := os.Open(p); gerr == nil {
				if gid, ok := idOf(g); ok && known && gid == id {
					d.hold(i, g, gid)
				}
				g.Close()
			}
		} else {
			os.Remove(f.Name())
		}
	}
	if err != nil {
		if d.writeErrors.Add(1) == 1 {
			d.log.Error("cannot write to the cache directory; serving from the database", "dir", d.dir, "err", err)
		}
		d.mu.Lock()
		d.forgetLocked(i)
		d.mu.Unlock()
	}
}

// UseFuture makes the tier evict by f once full (see the type's doc): the prefetcher,
// which counts reads from its streams' readers.
func (d *Tier) UseFuture(f evict.ReuseFuture) {
	d.mu.Lock()
	d.future = f
	d.mu.Unlock()
}

// makeRoomLocked forgets entries on disk (not ones being written) that no known order
// reads until n more bytes fit, if sample i is read again after the read it is fetched
// for. It returns the samples forgotten, whose files the caller removes outside the lock,
// and whether sample i fits now. d.mu is held.
func (d *Tier) makeRoomLocked(i uint32, n int64) (evicted []uint32, fits bool) {
	if d.bytes+n <= d.maxBytes {
		return nil, true
	}
	// Distances from the readers' positions now: any clock will do, as nothing is kept.
	if d.future == nil || n > d.maxBytes || d.future.Reuse(i, 0) == evict.Never {
		return nil, false
	}
	for d.bytes+n > d.maxBytes {
		v, next, ok := d.policy.Victim(d.future, 0, d.Holds)
		if !ok || next != evict.Never {
			return evicted, false
		}
		d.forgetLocked(v)
		evicted = append(evicted, v)
	}
	return evicted, true
}

// forgetLocked stops holding sample i's entry (its file stays for the caller to remove).
// d.mu is held.
func (d *Tier) forgetLocked(i uint32) {
	if h := d.files[i]; h != nil {
		h.Close()
		delete(d.files, i)
	}
	if n, ok := d.held[i]; ok {
		delete(d.held, i)
		delete(d.verified, i)
		d.policy.Remove(i)
		d.bytes -= n
	}
	d.mark(i, false)
}

// drop forgets sample i's entry and removes its file.
func (d *Tier) drop(i uint32) {
	d.mu.Lock()
	d.forgetLocked(i)
	d.mu.Unlock()
	os.Remove(d.path(i))
}

// Stats returns the tier's counters.
func (d *Tier) Stats() Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return Stats{Hits: d.hits.Load(), Misses: d.misses.Load(), Corrupt: d.corrupt.Load(), WriteErrors: d.writeErrors.Load(),
		Evicted: d.evicted.Load(), Entries: len(d.held), Bytes: d.bytes, MaxBytes: d.maxBytes}
}

// Holds reports whether sample i has an entry (or one is being written).
func (d *Tier) Holds(i uint32) bool { return d.present.Has(i) }

func (d *Tier) mark(i uint32, on bool) { d.present.Put(i, on) }

// ForgetCounts leaves this use's hits and misses out of the directory's (cassfs cache warm:
// filling is not a mount's reading).
func (d *Tier) ForgetCounts() {
	d.hits.Store(0)
	d.misses.Store(0)
}

// Close adds this mount's hits and misses to the directory's, closes the entries it holds
// open and releases its lock.
func (d *Tier) Close() error {
	d.mu.Lock()
	for v, h := range d.files {
		h.Close()
		delete(d.files, v)
	}
	d.mu.Unlock()
	st := Stats{Hits: d.before.Hits + d.hits.Load(), Misses: d.before.Misses + d.misses.Load()}
	if b, err := json.Marshal(st); err == nil {
		// Written aside and renamed, so cache show never reads half a file.
		tmp := filepath.Join(d.dir, statsFile+".tmp")
		if err := os.WriteFile(tmp, b, 0o600); err == nil {
			os.Rename(tmp, filepath.Join(d.dir, statsFile))
		}
	}
	return d.lock.Close()
}
