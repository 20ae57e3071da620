package fs_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cassfs/cassfs/index"
	"github.com/cassfs/cassfs/internal/testkit"

	cfs "github.com/cassfs/cassfs/fs"
	"github.com/cassfs/cassfs/prefetch"
	"github.com/cassfs/cassfs/splits"
	"github.com/cassfs/cassfs/store"
	"github.com/cassfs/cassfs/store/memstore"
	"github.com/cassfs/cassfs/view"
	"github.com/google/uuid"
	"golang.org/x/sys/unix"
)

// fixture is a dataset in the in-memory store, its index and its blobs by name.
type fixture struct {
	st    *memstore.Store
	ix    *index.Index
	blobs map[string][]byte // "<class>/<file>" → content
}

func newFixture(t testing.TB, n int, classes []string, opts memstore.Options) *fixture {
	t.Helper()
	return newFixtureMeta(t, n, classes, opts, nil, nil)
}

// newFixtureMeta is newFixture with metadata columns cols, sample i's values meta(i).
func newFixtureMeta(t testing.TB, n int, classes []string, opts memstore.Options, cols []string, meta func(i int) map[string]string) *fixture {
	t.Helper()
	return newFixtureSized(t, n, classes, opts, cols, meta, func(i int) int { return 50 + i%40 })
}

// newFixtureSized is newFixtureMeta with sample i's blob its name repeated repeat(i) times.
func newFixtureSized(t testing.TB, n int, classes []string, opts memstore.Options, cols []string, meta func(i int) map[string]string, repeat func(i int) int) *fixture {
	t.Helper()
	ctx := context.Background()
	st := memstore.New("test", opts)
	testkit.Check(t, st.SetLabels(ctx, classes))
	if cols != nil {
		testkit.Check(t, st.AddColumns(ctx, cols))
	}
	f := &fixture{st: st, blobs: map[string][]byte{}}
	for i := range n {
		c := (i * 7 / 3) % len(classes)
		ext := ".jpg"
		if i%5 == 0 {
			ext = ".png"
		}
		name := fmt.Sprintf("%s/img %04d%s", classes[c], i, ext) // a space, as real datasets have
		data := bytes.Repeat([]byte(name), repeat(i))
		s := store.Sample{ID: store.SampleID("test", name), Label: c, Name: name, Size: int64(len(data)), Checksum: store.Checksum(data)}
		if meta != nil {
			s.Meta = meta(i)
		}
		if err := st.Put(ctx, s, data, nil); err != nil {
			t.Fatal(err)
		}
		f.blobs[name] = data
	}
	ix, err := index.Load(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	f.ix = ix
	return f
}

type mountOpts struct {
	arrival    bool
	seed       uint64
	logger     *slog.Logger
	cache      *prefetch.Cache
	prefetcher *prefetch.Prefetcher
	shard      splits.Shard
	splits     []*splits.Split // default: the all split
	backing    cfs.Backing
	// noPassthrough: MountOptions.NoPassthrough; fsys, if set, receives the filesystem.
	noPassthrough bool
	fsys          **cfs.FS
	// config, if set, adjusts the filesystem's configuration; push: MountOptions.Push.
	config func(*cfs.Config)
	push   bool
	// shardBytes: view.Config.ShardBytes, the size of the record view's shards.
	shardBytes int64
}

// mount serves the fixture at a new directory until the test ends, holding the kernel's
// caches shared meanwhile: assertions across epochs count on the pages and inodes they
// keep, which a test of another process dropping them would take.
func (f *fixture) mount(t testing.TB, o mountOpts) string {
	t.Helper()
	requireFUSE(t)
	testkit.LockCaches(t, false)
	cache := o.cache
	if cache == nil {
		cache = prefetch.NewCache(prefetch.StoreFetch(f.st, f.ix), prefetch.CacheOptions{MaxBytes: 1 << 20})
	}
	t.Cleanup(cache.Close)
	logger := o.logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(testWriter{t}, nil))
	}
	dir := t.TempDir()
	if o.splits == nil {
		o.splits = []*splits.Split{splits.All(f.ix)}
	}
	mode := view.Strict
	if o.arrival {
		mode = view.Arrival
	}
	vc := view.Config{Index: f.ix, Splits: o.splits, Shard: o.shard, Seed: o.seed, Mode: mode, Arrived: cache.Has, ShardBytes: o.shardBytes}
	if o.prefetcher != nil {
		vc.Progress = o.prefetcher
	}
	fc := cfs.Config{Views: view.New(vc), Blobs: cache, Logger: logger, Backing: o.backing}
	if o.config != nil {
		o.config(&fc)
	}
	fsys := cfs.New(fc)
	if o.fsys != nil {
		*o.fsys = fsys
	}
	server := mountSelf(t, dir, fsys, cfs.MountOptions{FsName: "cassfs:test", NoPassthrough: o.noPassthrough, Push: o.push})
	t.Cleanup(func() {
		if err := server.Unmount(); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func readNames(t *testing.T, dir string) ([]string, []os.DirEntry) {
	t.Helper()
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	entries, err := f.ReadDir(-1) // directory order, not sorted
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names, entries
}

var classes = []string{"cat", "dog", "zebra"}

func TestTreeShape(t *testing.T) {
	f := newFixture(t, 120, classes, memstore.Options{})
	mnt := f.mount(t, mountOpts{})

	if names, _ := readNames(t, mnt); !slices.Equal(names, []string{"all", "by-uuid"}) {
		t.Errorf("root lists %q", names)
	}
	names, _ := readNames(t, filepath.Join(mnt, "all"))
	if len(names) != 21 || names[0] != "epoch-0" || names[1] != "epoch-0.wds" || names[18] != "epoch-9" || names[19] != "epoch-9.wds" || names[20] != "samples.csv" {
		t.Errorf("split lists %q, want epoch-0, epoch-0.wds .. epoch-9, epoch-9.wds and samples.csv", names)
	}
	// Any epoch resolves, listed or not; malformed ones do not.
	for _, name := range []string{"epoch-0", "epoch-123456"} {
		if fi, err := os.Stat(filepath.Join(mnt, "all", name)); err != nil || !fi.IsDir() {
			t.Errorf("stat %s: %v", name, err)
		}
	}
	for _, name := range []string{"epoch-01", "epoch--1", "epoch-", "epoch-x", "Epoch-1", "train"} {
		if _, err := os.Stat(filepath.Join(mnt, "all", name)); !errors.Is(err, syscall.ENOENT) {
			t.Errorf("stat all/%s: %v, want ENOENT", name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(mnt, "nosplit")); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("stat of an unknown split: %v, want ENOENT", err)
	}

	// An epoch root: only class directories (label order) and file_list.txt, with d_type.
	root := filepath.Join(mnt, "all", "epoch-3")
	names, entries := readNames(t, root)
	if want := []string{"cat", "dog", "file_list.txt", "zebra"}; !slices.Equal(names, want) {
		t.Fatalf("epoch root lists %q, want %q", names, want)
	}
	for _, e := range entries {
		if wantDir := e.Name() != "file_list.txt"; e.IsDir() != wantDir || (!wantDir && !e.Type().IsRegular()) {
			t.Errorf("%s: d_type %v", e.Name(), e.Type())
		}
		if _, err := os.Stat(filepath.Join(root, e.Name())); err != nil {
			t.Errorf("stat of root entry %s: %v", e.Name(), err)
		}
	}

	// Class directories: regular files only, names sorted bytewise in listing order, with
	// zero-padded positions; every sample exactly once across classes.
	seen := map[string]bool{}
	for label, c := range classes {
		names, entries := readNames(t, filepath.Join(root, c))
		if !slices.IsSorted(names) {
			t.Errorf("class %s does not list in bytewise order", c)
		}
		for k, e := range entries {
			if !e.Type().IsRegular() {
				t.Errorf("%s/%s: d_type %v", c, e.Name(), e.Type())
			}
			pos, base, _ := strings.Cut(e.Name(), "_")
			if len(pos) != 3 {
				t.Errorf("%s: position %q not zero-padded to 3 digits", e.Name(), pos)
			}
			orig := c + "/" + base
			if _, ok := f.blobs[orig]; !ok || seen[orig] {
				t.Errorf("%s/%s: not a sample of this class, or listed twice", c, e.Name())
			}
			seen[orig] = true
			i, _ := f.ix.Find(store.SampleID("test", orig))
			if f.ix.Label(i) != label {
				t.Errorf("%s listed under class %d", orig, label)
			}
			if k > 0 && names[k-1] >= names[k] {
				t.Errorf("names not strictly ascending at %s", names[k])
			}
		}
		// No nested directories anywhere below.
		if _, err := os.Stat(filepath.Join(root, c, "nested")); !errors.Is(err, syscall.ENOENT) {
			t.Errorf("unknown name in class dir: %v, want ENOENT", err)
		}
	}
	if len(seen) != len(f.blobs) {
		t.Errorf("the classes of an epoch list %d samples, want %d", len(seen), len(f.blobs))
	}
}

// epochOrder returns the sample names of an epoch of the all split, in file_list order,
// checking every line's form.
func epochOrder(t *testing.T, mnt string, epoch int) []string {
	t.Helper()
	return viewOrder(t, filepath.Join(mnt, "all", "epoch-"+strconv.Itoa(epoch)), 0, 3)
}

// viewOrder reads an epoch directory's file_list.txt, checks that its lines hold positions
// start, start+1, ... (width digits), and returns "<class>/<original name>" per line.
func viewOrder(t *testing.T, root string, start, width int) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "file_list.txt"))
	if err != nil {
		t.Fatal(err)
	}
	fi := testkit.Must(os.Stat(filepath.Join(root, "file_list.txt")))(t)
	if fi.Size() != int64(len(data)) {
		t.Errorf("file_list.txt: stat size %d, content %d bytes", fi.Size(), len(data))
	}
	var order []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for k := 0; sc.Scan(); k++ {
		line := sc.Text()
		sp := strings.LastIndexByte(line, ' ')
		path, label := line[:sp], line[sp+1:]
		class, name, _ := strings.Cut(path, "/")
		if want := strconv.Itoa(slices.Index(classes, class)); label != want {
			t.Errorf("line %d %q: label %s, want %s", k, line, label, want)
		}
		if pos, _, _ := strings.Cut(name, "_"); pos != fmt.Sprintf("%0*d", width, start+k) {
			t.Errorf("line %d %q: position prefix %s", k, line, pos)
		}
		if _, err := os.Stat(filepath.Join(root, path)); err != nil {
			t.Errorf("line %d names %s, which does not resolve: %v", k, path, err)
		}
		order = append(order, class+"/"+name[strings.IndexByte(name, '_')+1:])
	}
	return order
}

func TestEpochOrderIsTheDocumentedPermutation(t *testing.T) {
	f := newFixture(t, 120, classes, memstore.Options{})
	mnt := f.mount(t, mountOpts{seed: 5})
	for epoch := range 3 {
		got := epochOrder(t, mnt, epoch)
		p := splits.Permutation(f.ix.Len(), "all", 5, uint64(epoch))
		var want []string
		for _, k := range p {
			i := uint32(k) // the all split's members are the canonical order
			want = append(want, classes[f.ix.Label(i)]+"/"+f.ix.Name(i))
		}
		if !slices.Equal(got, want) {
			t.Errorf("epoch %d: file_list order is not Permutation(n, all, 5, %d) over ascending ids", epoch, epoch)
		}
	}
	if slices.Equal(epochOrder(t, mnt, 0), epochOrder(t, mnt, 1)) {
		t.Error("epochs 0 and 1 have the same order")
	}
	// Listing again, and another mount with the same seed, give the same names.
	a, _ := readNames(t, filepath.Join(mnt, "all", "epoch-0", "dog"))
	b, _ := readNames(t, filepath.Join(mnt, "all", "epoch-0", "dog"))
	other := f.mount(t, mountOpts{seed: 5})
	c, _ := readNames(t, filepath.Join(other, "all", "epoch-0", "dog"))
	if !slices.Equal(a, b) || !slices.Equal(a, c) {
		t.Error("the same epoch directory listed differently")
	}
	if !slices.Equal(epochOrder(t, mnt, 2), epochOrder(t, other, 2)) {
		t.Error("two mounts with the same seed disagree on epoch 2")
	}
}

func TestContentSizesAndInodes(t *testing.T) {
	f := newFixture(t, 90, classes, memstore.Options{})
	mnt := f.mount(t, mountOpts{})
	inodes := map[string]uint64{}
	for _, epoch := range []string{"epoch-0", "epoch-7"} {
		for _, c := range classes {
			dir := filepath.Join(mnt, "all", epoch, c)
			names, _ := readNames(t, dir)
			for _, name := range names {
				p := filepath.Join(dir, name)
				orig := c + "/" + name[strings.IndexByte(name, '_')+1:]
				var st syscall.Stat_t
				if err := syscall.Stat(p, &st); err != nil {
					t.Fatal(err)
				}
				if st.Size != int64(len(f.blobs[orig])) || st.Size == 0 {
					t.Errorf("%s: size %d, blob %d", p, st.Size, len(f.blobs[orig]))
				}
				if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
					t.Errorf("%s: mode %o", p, st.Mode)
				}
				if prev, ok := inodes[orig]; ok && prev != st.Ino {
					t.Errorf("%s: inode %d in %s, %d in another epoch", orig, st.Ino, epoch, prev)
				}
				inodes[orig] = st.Ino
				data, err := os.ReadFile(p)
				if err != nil || !bytes.Equal(data, f.blobs[orig]) {
					t.Errorf("%s: read %d bytes (%v), differ from the stored blob", p, len(data), err)
				}
			}
		}
	}
	// by-uuid shows the same inode and content.
	for orig, ino := range inodes {
		id := store.SampleID("test", orig)
		p := filepath.Join(mnt, "by-uuid", id.String()+filepath.Ext(orig))
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil || st.Ino != ino {
			t.Errorf("by-uuid %s: inode %d (%v), want %d", p, st.Ino, err, ino)
		}
	}
	names, _ := readNames(t, filepath.Join(mnt, "by-uuid"))
	if len(names) != len(f.blobs) {
		t.Errorf("by-uuid lists %d, want %d", len(names), len(f.blobs))
	}
	if _, err := os.Stat(filepath.Join(mnt, "by-uuid", uuid.New().String()+".jpg")); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("unknown uuid: %v, want ENOENT", err)
	}
}

// TestMmapPrivate maps files as DALI does (open, fstat, mmap MAP_PRIVATE, close) in a child
// process: touching a mapping of our own mount from the serving process faults inside Go
// code, which holds its P, and deadlocks with GOMAXPROCS=1 (go-fuse's documented caveat).
func TestMmapPrivate(t *testing.T) {
	if os.Getenv("CASSFS_MMAP_CHILD") != "" {
		return // the child's work is done by mmapChild from init
	}
	f := newFixture(t, 10, classes, memstore.Options{})
	mnt := f.mount(t, mountOpts{})
	dir := filepath.Join(mnt, "all", "epoch-0", "cat")
	names, _ := readNames(t, dir)
	var paths []string
	for _, name := range names {
		paths = append(paths, filepath.Join(dir, name))
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "CASSFS_MMAP_CHILD="+strings.Join(paths, "\n"))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("mmap child: %v", err)
	}
	got := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(got) != len(names) {
		t.Fatalf("mmap child mapped %d files, want %d:\n%s", len(got), len(names), out)
	}
	for k, name := range names {
		want := sha256.Sum256(f.blobs["cat/"+name[strings.IndexByte(name, '_')+1:]])
		if got[k] != hex.EncodeToString(want[:]) {
			t.Errorf("mmap of %s: sha256 %s, want the blob's", name, got[k])
		}
	}
}

// mmapChild, in the child process of TestMmapPrivate, prints the sha256 of each file's
// private mapping.
func mmapChild(paths string) {
	for _, p := range strings.Split(paths, "\n") {
		fd, err := syscall.Open(p, syscall.O_RDONLY, 0)
		if err != nil {
			fmt.Println("open:", err)
			os.Exit(1)
		}
		var st syscall.Stat_t
		syscall.Fstat(fd, &st)
		m, err := syscall.Mmap(fd, 0, int(st.Size), syscall.PROT_READ, syscall.MAP_PRIVATE)
		syscall.Close(fd) // DALI closes right after mapping
		if err != nil {
			fmt.Println("mmap:", err)
			os.Exit(1)
		}
		sum := sha256.Sum256(m)
		fmt.Println(hex.EncodeToString(sum[:]))
		syscall.Munmap(m)
	}
	os.Exit(0)
}

func init() {
	if paths := os.Getenv("CASSFS_MMAP_CHILD"); paths != "" {
		mmapChild(paths)
	}
}

func TestReadOnly(t *testing.T) {
	f := newFixture(t, 10, classes, memstore.Options{})
	mnt := f.mount(t, mountOpts{})
	dir := filepath.Join(mnt, "all", "epoch-0", "cat")
	names, _ := readNames(t, dir)
	for _, op := range []func() error{
		func() error { return os.WriteFile(filepath.Join(dir, "new.jpg"), []byte("x"), 0o644) },
		func() error {
			_, err := os.OpenFile(filepath.Join(dir, names[0]), os.O_WRONLY, 0)
			return err
		},
		func() error { return os.Remove(filepath.Join(dir, names[0])) },
		func() error { return os.Mkdir(filepath.Join(mnt, "all", "x"), 0o755) },
	} {
		if err := op(); !errors.Is(err, syscall.EROFS) {
			t.Errorf("write operation: %v, want EROFS", err)
		}
	}
}

// TestIoctlCounted: Python's open() asks each file whether it is a terminal (TCGETS); the
// kernel forwards that to the daemon, which says no (ENOTTY) and counts the round trip, so
// that requests per file show what a Python reader costs.
func TestIoctlCounted(t *testing.T) {
	f := newFixture(t, 10, classes, memstore.Options{})
	var fsys *cfs.FS
	mnt := f.mount(t, mountOpts{fsys: &fsys})
	dir := filepath.Join(mnt, "all", "epoch-0", "cat")
	names, _ := readNames(t, dir)
	before := fsys.RequestStats()
	for _, name := range names[:3] {
		file := testkit.Must(os.Open(filepath.Join(dir, name)))(t)
		if _, err := unix.IoctlGetTermios(int(file.Fd()), unix.TCGETS); !errors.Is(err, syscall.ENOTTY) {
			t.Errorf("TCGETS on %s: %v, want ENOTTY", name, err)
		}
		file.Close()
	}
	after := fsys.RequestStats()
	if got := after["ioctl"] - before["ioctl"]; got != 3 {
		t.Errorf("3 files asked TCGETS: %d ioctl requests counted (other: %d), want 3", got, after["other"]-before["other"])
	}
}

// TestConcurrentReadsFetchOnce: READs of different parts of one file arrive at once (the
// kernel's page locks only serialize reads of the same page), and all of them share one
// fetch of the blob.
func TestConcurrentReadsFetchOnce(t *testing.T) {
	ctx := context.Background()
	st := memstore.New("test", memstore.Options{Latency: func(uuid.UUID) time.Duration { return 50 * time.Millisecond }})
	testkit.Check(t, st.SetLabels(ctx, []string{"big"}))
	const size, files, parts = 1 << 20, 6, 8
	for i := range files {
		name := fmt.Sprintf("big/%d.raw", i)
		data := bytes.Repeat([]byte{byte(i)}, size)
		testkit.Check(t, st.Put(ctx, store.Sample{ID: store.SampleID("test", name), Label: 0, Name: name, Size: size, Checksum: store.Checksum(data)}, data, nil))
	}
	ix, err := index.Load(ctx, st)
	testkit.Check(t, err)
	f := &fixture{st: st, ix: ix}
	mnt := f.mount(t, mountOpts{cache: prefetch.NewCache(prefetch.StoreFetch(st, ix), prefetch.CacheOptions{MaxBytes: 64 << 20})})
	dir := filepath.Join(mnt, "by-uuid")
	var wg sync.WaitGroup
	for i := range uint32(files) {
		fh, err := os.Open(filepath.Join(dir, f.ix.ID(i).String()+".raw"))
		testkit.Check(t, err)
		defer fh.Close()
		for k := range parts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				buf := make([]byte, 4096)
				if _, err := fh.ReadAt(buf, int64(k)*size/parts); err != nil || buf[0] != byte(f.ix.Name(i)[0]-'0') {
					t.Errorf("file %d at %d: %v, byte %d", i, k*size/parts, err, buf[0])
				}
			}()
		}
	}
	wg.Wait()
	if got := st.Gets(); got != files {
		t.Errorf("%d readers each of %d files made %d fetches, want %d", parts, files, got, files)
	}
}

func TestFailuresAreEIOLoggedOnce(t *testing.T) {
	down := errors.New("database down")
	var failing sync.Map
	f := newFixture(t, 30, classes, memstore.Options{FailGet: func(id uuid.UUID) error {
		if _, ok := failing.Load(id); ok {
			return down
		}
		return nil
	}})
	var logs testkit.SyncBuffer
	mnt := f.mount(t, mountOpts{logger: slog.New(slog.NewTextHandler(&logs, nil))})
	dir := filepath.Join(mnt, "all", "epoch-0", "zebra")
	names, _ := readNames(t, dir)
	bad := names[0]
	orig := "zebra/" + bad[strings.IndexByte(bad, '_')+1:]
	id := store.SampleID("test", orig)
	failing.Store(id, true)
	if _, err := os.ReadFile(filepath.Join(dir, bad)); !errors.Is(err, syscall.EIO) {
		t.Fatalf("read with the database down: %v, want EIO", err)
	}
	if n := strings.Count(logs.String(), `msg="I/O error"`); n != 1 || !strings.Contains(logs.String(), id.String()) {
		t.Errorf("the failure was logged %d times, want once:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "database down") {
		t.Errorf("the log lacks the cause:\n%s", logs.String())
	}
	// Once the database is back, the same file reads (after the cache's short memory of
	// the failure, which answers the kernel's immediate retry).
	failing.Delete(id)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		data, err := os.ReadFile(filepath.Join(dir, bad))
		if err == nil {
			if !bytes.Equal(data, f.blobs[orig]) {
				t.Error("read after recovery returned wrong bytes")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("read still fails 10s after recovery: %v", err)
		}
	}
}

func TestCorruptBlobIsEIO(t *testing.T) {
	f := newFixture(t, 12, classes, memstore.Options{})
	// Rewrite one blob behind the index's back: same size, other bytes.
	name := "cat/img 0000.png"
	i, _ := f.ix.Find(store.SampleID("test", name))
	data := slices.Clone(f.blobs[name])
	data[10] ^= 0xff
	f.st.Put(context.Background(), store.Sample{ID: f.ix.ID(i), Label: f.ix.Label(i), Name: name, Size: int64(len(data)), Checksum: store.Checksum(data)}, data, nil)
	var logs testkit.SyncBuffer
	mnt := f.mount(t, mountOpts{logger: slog.New(slog.NewTextHandler(&logs, nil))})
	p := filepath.Join(mnt, "by-uuid", f.ix.ID(i).String()+".png")
	if _, err := os.ReadFile(p); !errors.Is(err, syscall.EIO) {
		t.Fatalf("read of a corrupt blob: %v, want EIO", err)
	}
	if !strings.Contains(logs.String(), "checksum") {
		t.Errorf("the log does not name the checksum mismatch:\n%s", logs.String())
	}
}
