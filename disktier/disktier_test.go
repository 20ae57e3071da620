package disktier

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cassfs/cassfs/evict"
	"github.com/cassfs/cassfs/index"
	"github.com/cassfs/cassfs/internal/testkit"
	"github.com/cassfs/cassfs/store"
	"github.com/google/uuid"
	"golang.org/x/sys/unix"
)

// diskDataset is an index of n samples whose bytes depend on version (a sample ingested
// again has other bytes and another checksum), and a Fetcher of them that counts its calls.
func diskDataset(t *testing.T, n int, version string) (*index.Index, fetchFunc, *atomic.Int64) {
	t.Helper()
	b := index.NewBuilder([]string{"a"})
	data := map[uuid.UUID][]byte{}
	for k := range n {
		name := fmt.Sprintf("a/x%03d.jpg", k)
		d := bytes.Repeat([]byte(version+name), 50+k)
		s := store.Sample{ID: store.SampleID("ds", name), Name: name, Size: int64(len(d)), Checksum: store.Checksum(d), CRC32C: store.CRC32C(d), HasCRC32C: true}
		testkit.Check(t, b.Add(s))
		data[s.ID] = d
	}
	ix, err := b.Build()
	testkit.Check(t, err)
	var calls atomic.Int64
	return ix, func(ctx context.Context, i uint32) ([]byte, error) {
		calls.Add(1)
		return data[ix.ID(i)], nil
	}, &calls
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestDiskTierKeepsAndServes(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ix, next, calls := diskDataset(t, 20, "v1")
	d, err := Open(dir, "ds", ix, 1<<30, quiet())
	testkit.Check(t, err)
	fetch := d.Over(next)
	want := make([][]byte, ix.Len())
	for i := range uint32(ix.Len()) {
		want[i] = testkit.Must(next(ctx, i))(t)
	}
	calls.Store(0)
	for range 2 {
		for i := range uint32(ix.Len()) {
			if got := testkit.Must(fetch.Fetch(ctx, i))(t); !bytes.Equal(got, want[i]) {
				t.Fatalf("sample %d: wrong bytes", i)
			}
		}
	}
	if calls.Load() != int64(ix.Len()) {
		t.Errorf("two passes fetched %d times from the database, want %d (the second from disk)", calls.Load(), ix.Len())
	}
	if _, err := Open(dir, "ds", ix, 1<<30, quiet()); err == nil || !strings.Contains(err.Error(), "in use by another mount") {
		t.Errorf("a second mount of the same directory and dataset: %v, want a refusal", err)
	}
	testkit.Check(t, d.Close())

	// A remount finds every entry; a stale temporary file goes, a file not ours stays.
	testkit.Check(t, os.WriteFile(filepath.Join(dir, "ds", "notes.txt"), []byte("mine"), 0o600))
	tmp := filepath.Join(dir, "ds", "00", "x.tmp-123")
	testkit.Check(t, os.MkdirAll(filepath.Dir(tmp), 0o700))
	testkit.Check(t, os.WriteFile(tmp, []byte("half"), 0o600))
	d, err = Open(dir, "ds", ix, 1<<30, quiet())
	testkit.Check(t, err)
	defer d.Close()
	if st := d.Stats(); st.Entries != ix.Len() {
		t.Errorf("remount found %d entries, want %d", st.Entries, ix.Len())
	}
	calls.Store(0)
	fetch = d.Over(next)
	for i := range uint32(ix.Len()) {
		if got := testkit.Must(fetch.Fetch(ctx, i))(t); !bytes.Equal(got, want[i]) {
			t.Fatalf("sample %d after remount: wrong bytes", i)
		}
	}
	if calls.Load() != 0 {
		t.Errorf("after a remount %d fetches went to the database, want 0", calls.Load())
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Errorf("a temporary file of a crashed write survived the remount: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "ds", "notes.txt")); err != nil {
		t.Errorf("a file that is not an entry was removed: %v", err)
	}
}

// A flipped byte in an entry is detected, counted and fetched again, never served.
func TestDiskTierRefetchesACorruptFile(t *testing.T) {
	ctx := context.Background()
	ix, next, calls := diskDataset(t, 3, "v1")
	d, err := Open(t.TempDir(), "ds", ix, 1<<30, quiet())
	testkit.Check(t, err)
	defer d.Close()
	var reported atomic.Int64
	d.OnCorrupt = func(error) { reported.Add(1) }
	fetch := d.Over(next)
	want := testkit.Must(fetch.Fetch(ctx, 1))(t)
	p := d.path(1)
	b := testkit.Must(os.ReadFile(p))(t)
	b[len(b)/2] ^= 1
	testkit.Check(t, os.WriteFile(p, b, 0o600))
	calls.Store(0)
	if got := testkit.Must(fetch.Fetch(ctx, 1))(t); !bytes.Equal(got, want) {
		t.Fatal("a corrupt cache file was served")
	}
	if calls.Load() != 1 || d.Stats().Corrupt != 1 || reported.Load() != 1 {
		t.Errorf("corrupt file: %d fetches, %d counted, %d reported; want 1 each", calls.Load(), d.Stats().Corrupt, reported.Load())
	}
	if got := testkit.Must(os.ReadFile(p))(t); !bytes.Equal(got, want) {
		t.Error("the corrupt file was not replaced by the fetched bytes")
	}
}

// A sample ingested again (new bytes, new checksum) never serves its old entry, and the
// old entry is removed at the next open.
func TestDiskTierDropsEntriesOfReingestedSamples(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ix1, next1, _ := diskDataset(t, 5, "v1")
	d := testkit.Must(Open(dir, "ds", ix1, 1<<30, quiet()))(t)
	for i := range uint32(ix1.Len()) {
		testkit.Must(d.Over(next1).Fetch(ctx, i))(t)
	}
	testkit.Check(t, d.Close())
	ix2, next2, calls := diskDataset(t, 5, "v2")
	d = testkit.Must(Open(dir, "ds", ix2, 1<<30, quiet()))(t)
	defer d.Close()
	if st := d.Stats(); st.Entries != 0 || st.Bytes != 0 {
		t.Errorf("entries of the old ingest were kept: %+v", st)
	}
	for i := range uint32(ix2.Len()) {
		if got := testkit.Must(d.Over(next2).Fetch(ctx, i))(t); !bytes.Equal(got, testkit.Must(next2(ctx, i))(t)) {
			t.Fatalf("sample %d: old bytes served after the sample was ingested again", i)
		}
	}
	if calls.Load() != 2*int64(ix2.Len()) {
		t.Errorf("%d fetches, want %d: every sample from the database once (plus the reference reads)", calls.Load(), 2*ix2.Len())
	}
}

// The bound is never exceeded: once full the tier (with no future) keeps what it has; a smaller bound at
// the next open trims it.
func TestDiskTierBound(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ix, next, _ := diskDataset(t, 30, "v1")
	bound := ix.Size(0) * 10
	d := testkit.Must(Open(dir, "ds", ix, bound, quiet()))(t)
	for i := range uint32(ix.Len()) {
		testkit.Must(d.Over(next).Fetch(ctx, i))(t)
	}
	st := d.Stats()
	if st.Bytes > bound || st.Entries == 0 || st.Bytes != dirBytes(t, filepath.Join(dir, "ds")) {
		t.Errorf("bound %d: holds %d bytes in %d entries, %d on disk", bound, st.Bytes, st.Entries, dirBytes(t, filepath.Join(dir, "ds")))
	}
	testkit.Check(t, d.Close())
	d = testkit.Must(Open(dir, "ds", ix, bound/2, quiet()))(t)
	defer d.Close()
	if st := d.Stats(); st.Bytes > bound/2 || dirBytes(t, filepath.Join(dir, "ds")) > bound/2 {
		t.Errorf("reopened with bound %d: holds %d bytes, %d on disk", bound/2, st.Bytes, dirBytes(t, filepath.Join(dir, "ds")))
	}
	if _, err := Open(filepath.Join(dir, "ds", ".lock"), "ds", ix, bound, quiet()); err == nil || !strings.Contains(err.Error(), "must be a directory") {
		t.Errorf("a cache directory that is a file: %v, want a clear error", err)
	}
}

func dirBytes(t *testing.T, dir string) int64 {
	var n int64
	testkit.Check(t, filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() && fi.Name() != ".lock" {
			n += fi.Size()
		}
		return err
	}))
	return n
}

// A full disk: writes that do not fit fail, are counted and logged once, and the samples
// are served all the same (from the database); what did fit is served from disk; nothing
// wrong is ever served. A cache directory that is a file is a clear error.
func TestDiskTierFullDisk(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root")
	}
	dir := t.TempDir()
	testkit.Check(t, unix.Mount("tmpfs", dir, "tmpfs", 0, "size=16k"))
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	ctx := context.Background()
	ix, next, calls := diskDataset(t, 20, "v1")
	var logged bytes.Buffer
	d, err := Open(dir, "ds", ix, 1<<30, slog.New(slog.NewTextHandler(&logged, nil)))
	testkit.Check(t, err)
	defer d.Close()
	fetch := d.Over(next)
	for pass := range 2 {
		for i := range uint32(ix.Len()) {
			got, err := fetch.Fetch(ctx, i)
			want := testkit.Must(next(ctx, i))(t)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("pass %d, sample %d: %v or wrong bytes", pass, i, err)
			}
		}
	}
	st := d.Stats()
	if st.WriteErrors == 0 || st.Entries == 0 || st.Entries == ix.Len() {
		t.Errorf("%d entries kept, %d write errors: want some of each on a disk this small", st.Entries, st.WriteErrors)
	}
	// Pass 2 fetched only what was not kept (each fetch above also calls next once more).
	if fetched := calls.Load() - 2*int64(ix.Len()); fetched != int64(2*ix.Len()-st.Entries) {
		t.Errorf("%d fetches from the database over two passes, want %d (all, then those not on disk)", fetched, 2*ix.Len()-st.Entries)
	}
	if n := strings.Count(logged.String(), "cannot write to the cache directory"); n != 1 {
		t.Errorf("logged the write failure %d times, want once:\n%s", n, logged.String())
	}

	file := filepath.Join(t.TempDir(), "plain-file")
	testkit.Check(t, os.WriteFile(file, nil, 0o600))
	if _, err := Open(file, "ds", ix, 1<<30, quiet()); err == nil || !strings.Contains(err.Error(), "must be a directory cassfs can write") {
		t.Errorf("a cache directory that is a file: %v", err)
	}
}

// An open (Backing) that arrives while the sample's entry is being written finds nothing
// to pass through, and leaves the entry alone: when the write ends, the entry is held and
// counted, so the files on disk are exactly the entries and within the bound.
func TestDiskTierBackingDuringWrite(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ix, next, _ := diskDataset(t, 300, "v1")
	d, err := Open(dir, "ds", ix, 1<<30, quiet())
	testkit.Check(t, err)
	defer d.Close()
	fetch := d.Over(next)
	var wg sync.WaitGroup
	for i := range uint32(ix.Len()) {
		wg.Add(2)
		go func() {
			defer wg.Done()
			testkit.Must(fetch.Fetch(ctx, i))(t)
		}()
		go func() { // the reader's open, racing the write
			defer wg.Done()
			for range 50 {
				if f, ok := d.Backing(i); ok {
					f.Close()
					return
				}
			}
		}()
	}
	wg.Wait()
	var files int
	var size int64
	testkit.Check(t, filepath.WalkDir(filepath.Join(dir, "ds"), func(p string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			info := testkit.Must(e.Info())(t)
			files++
			size += info.Size()
		}
		return err
	}))
	if st := d.Stats(); st.Entries != files || st.Bytes != size || files != ix.Len() {
		t.Errorf("%d entries of %d bytes held, %d files of %d bytes on disk, %d samples fetched: an open during a write lost an entry", st.Entries, st.Bytes, files, size, ix.Len())
	}
}

// Once full, the tier replaces an entry no known order reads by a sample read again after
// the read it is fetched for; it turns away a sample not read again, and one that would
// only take the place of an entry read later (no gain under permutations, a rewrite of the
// disk per miss); without a future it keeps what it has.
func TestDiskTierEvictsByFuture(t *testing.T) {
	ctx := context.Background()
	ix, next, _ := diskDataset(t, 12, "v1")
	dir := t.TempDir()
	d := testkit.Must(Open(dir, "ds", ix, ix.Size(3)*4, quiet()))(t) // room for 0..3 (sizes grow with the index)
	defer d.Close()
	fetch := d.Over(next)
	for i := range uint32(4) {
		testkit.Must(fetch.Fetch(ctx, i))(t)
	}
	// No future yet: a full tier admits nothing.
	testkit.Must(fetch.Fetch(ctx, 4))(t)
	if d.Holds(4) || d.Stats().Evicted != 0 {
		t.Fatalf("without a future: holds 4 %v, evicted %d; want it turned away", d.Holds(4), d.Stats().Evicted)
	}
	// Sample 1 is read by no known order; 5 is read again, 6 is not, 7 is but 0, 2, 3 are too.
	d.UseFuture(testkit.Future{0: {10, evict.Never}, 2: {20, 200}, 3: {30, 300}, 5: {5, 50}, 6: {6, evict.Never}, 7: {7, 70}})
	testkit.Must(fetch.Fetch(ctx, 5))(t)
	if !d.Holds(5) || d.Holds(1) {
		t.Errorf("sample 5 (read again) in place of 1 (read by no order): holds 5 %v, holds 1 %v", d.Holds(5), d.Holds(1))
	}
	if _, err := os.Stat(d.path(1)); !os.IsNotExist(err) {
		t.Errorf("evicted sample 1's file: %v, want it removed", err)
	}
	for _, i := range []uint32{6, 7} {
		testkit.Must(fetch.Fetch(ctx, i))(t)
		if d.Holds(i) {
			t.Errorf("sample %d was admitted", i)
		}
	}
	st := d.Stats()
	if st.Evicted != 1 || st.Bytes > ix.Size(3)*4 || st.Bytes != dirBytes(t, filepath.Join(dir, "ds")) {
		t.Errorf("evicted %d (want 1), holds %d bytes (bound %d), %d on disk", st.Evicted, st.Bytes, ix.Size(3)*4, dirBytes(t, filepath.Join(dir, "ds")))
	}
	for _, i := range []uint32{0, 2, 3, 5} {
		if got := testkit.Must(fetch.Fetch(ctx, i))(t); !bytes.Equal(got, testkit.Must(next(ctx, i))(t)) || !d.Holds(i) {
			t.Errorf("sample %d: wrong bytes or not held", i)
		}
	}
}

// openIn returns the files under dir (but the lock) that this process has open.
func openIn(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	testkit.Check(t, err)
	var open []string
	for _, e := range ents {
		if p, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && strings.HasPrefix(p, dir) && !strings.HasSuffix(p, ".lock") {
			open = append(open, p)
		}
	}
	return open
}

// A verified entry is held open: later opens duplicate it rather than open its path (so an
// entry removed behind the tier's back still serves its verified bytes), each open is the
// caller's to close, at most maxFiles are held, and dropping an entry or closing the tier
// closes what it holds, so no removed file keeps its disk space.
func TestDiskTierHoldsEntriesOpen(t *testing.T) {
	ctx := context.Background()
	ix, next, _ := diskDataset(t, 6, "v1")
	dir := t.TempDir()
	d := testkit.Must(Open(dir, "ds", ix, 1<<30, quiet()))(t)
	fetch := d.Over(next)
	for i := range uint32(ix.Len()) {
		testkit.Must(fetch.Fetch(ctx, i))(t)
	}
	if n := len(openIn(t, dir)); n != ix.Len() {
		t.Fatalf("%d entries held open after writing %d", n, ix.Len())
	}
	read := func(i uint32) ([]byte, bool) {
		f, ok := d.Backing(i)
		if !ok {
			return nil, false
		}
		defer f.Close()
		b := make([]byte, ix.BlobSize(i))
		_, err := f.ReadAt(b, 0)
		testkit.Check(t, err)
		return b, true
	}
	testkit.Check(t, os.Remove(d.path(2)))
	for range 2 {
		got, ok := read(2)
		if want := testkit.Must(next(ctx, 2))(t); !ok || !bytes.Equal(got, want) {
			t.Fatalf("an entry removed after it was verified: served %v, right bytes %v; want its held bytes", ok, bytes.Equal(got, want))
		}
	}
	d.drop(2)
	for _, p := range openIn(t, dir) {
		if strings.Contains(p, filepath.Base(d.path(2))) {
			t.Errorf("dropped entry still open: %s", p)
		}
	}

	testkit.Check(t, d.Close())
	if open := openIn(t, dir); len(open) != 0 {
		t.Errorf("open after Close: %v", open)
	}

	d = testkit.Must(Open(dir, "ds", ix, 1<<30, quiet()))(t)
	d.maxFiles = 2
	fetch = d.Over(next)
	for i := range uint32(ix.Len()) {
		testkit.Must(fetch.Fetch(ctx, i))(t)
		read(i)
	}
	if n := len(openIn(t, dir)); n != 2 {
		t.Errorf("%d files open under the tier with maxFiles 2", n)
	}
	testkit.Check(t, d.Close())
	if open := openIn(t, dir); len(open) != 0 {
		t.Errorf("open after Close: %v", open)
	}
}

// TestReadDiskUsageNeverGuesses: a dataset's hit counts that cannot be read are an error
// naming the dataset, not zeros; a directory no mount has used yet has none.
func TestReadDiskUsageNeverGuesses(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "tiles")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, ".lock"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	us, err := ReadUsage(dir)
	if err != nil || len(us) != 1 || us[0].Hits != 0 || us[0].Misses != 0 {
		t.Fatalf("an unused directory: %+v, %v", us, err)
	}
	if err := os.WriteFile(filepath.Join(root, statsFile), []byte(`{"hits": 12, "mis`), 0o600); err != nil {
		t.Fatal(err)
	}
	if us, err := ReadUsage(dir); err == nil || !strings.Contains(err.Error(), "dataset tiles") {
		t.Errorf("a damaged stats file: %+v, %v; want an error naming the dataset", us, err)
	}
}

// fetchFunc is a function used as a prefetch.Fetcher.
type fetchFunc func(ctx context.Context, i uint32) ([]byte, error)

func (f fetchFunc) Fetch(ctx context.Context, i uint32) ([]byte, error) { return f(ctx, i) }
