package fs_test

import (
	"archive/tar"
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	cfs "github.com/cassfs/cassfs/fs"
	"github.com/cassfs/cassfs/internal/testkit"
	"github.com/cassfs/cassfs/prefetch"
	"github.com/cassfs/cassfs/splits"
	"github.com/cassfs/cassfs/store"
	"github.com/cassfs/cassfs/store/memstore"
	"github.com/cassfs/cassfs/view"
	"github.com/google/uuid"
	"golang.org/x/sys/unix"
)

// recordMount mounts f with a prefetcher and pushing, as cassfs mount does, record shards
// of about shardBytes.
func recordMount(t *testing.T, f *fixture, shardBytes int64) (string, *cfs.FS) {
	t.Helper()
	return recordMountWith(t, f, shardBytes, nil)
}

// recordMountWith is recordMount with the configuration changed by config, if set.
func recordMountWith(t *testing.T, f *fixture, shardBytes int64, config func(*cfs.Config)) (string, *cfs.FS) {
	t.Helper()
	var fsys *cfs.FS
	n := f.ix.Len()
	cache := prefetch.NewCache(prefetch.StoreFetch(f.st, f.ix), prefetch.CacheOptions{MaxBytes: 1 << 30, Samples: n,
		Push: func(i uint32, data []byte) bool { return fsys.Push(i, data) }})
	// A first window of the whole dataset: a reader's first READ has everything fetched.
	p := prefetch.NewPrefetcher(cache, prefetch.Options{Size: f.ix.Size, InitialWindow: n, Samples: n})
	t.Cleanup(p.Close)
	mnt := f.mount(t, mountOpts{cache: cache, prefetcher: p, fsys: &fsys, push: true, shardBytes: shardBytes, config: func(c *cfs.Config) {
		c.Looked, c.Held, c.Peek = cache.Looked, cache.Has, cache.Peek
		if config != nil {
			config(c)
		}
	}})
	return mnt, fsys
}

// TestRecordViewIsTheEpochAsTars: epoch-N.wds lists a tar and an index per shard; read
// with archive/tar, the shards hold every sample of the epoch once, in the order of its
// file_list.txt, each as its bytes, its label and its JSON under its position; the index
// gives each member's data offset and size; two epochs differ in order. A shard
// directory's record view is its part of the epoch.
func TestRecordViewIsTheEpochAsTars(t *testing.T) {
	f := newFixtureMeta(t, 60, classes, memstore.Options{}, []string{"patient_id"}, func(i int) map[string]string {
		return map[string]string{"patient_id": "p" + strconv.Itoa(i%7)}
	})
	mnt, _ := recordMount(t, f, 16<<10)
	orders := map[string][]string{}
	for _, epoch := range []string{"epoch-1", "epoch-2", "shard-1-of-2/epoch-1"} {
		epochPath := filepath.Join(mnt, "all", epoch)
		dir := epochPath + ".wds"
		names, _ := readNames(t, dir)
		if len(names) < 4 || len(names)%2 != 0 || names[0] != "shard-00000.idx" || names[1] != "shard-00000.tar" {
			t.Fatalf("%s lists %q", dir, names)
		}
		var keys []string
		for k := 0; k < len(names); k += 2 {
			tarPath := filepath.Join(dir, names[k+1])
			data := testkit.Must(os.ReadFile(tarPath))(t)
			if fi := testkit.Must(os.Stat(tarPath))(t); fi.Size() != int64(len(data)) {
				t.Fatalf("%s: stat says %d bytes, read %d", tarPath, fi.Size(), len(data))
			}
			keys = append(keys, checkShard(t, f, data, testkit.Must(os.ReadFile(filepath.Join(dir, names[k])))(t))...)
		}
		// The file list names each position's sample: the tars' keys follow it.
		list := testkit.Must(os.ReadFile(filepath.Join(epochPath, "file_list.txt")))(t)
		var want []string
		for line := range strings.Lines(string(list)) {
			line = strings.TrimSpace(line)
			entry := line[:strings.LastIndexByte(line, ' ')]
			class, file, _ := strings.Cut(entry, "/")
			pos, name, _ := strings.Cut(file, "_")
			want = append(want, pos+" "+class+"/"+name)
		}
		if strings.Join(keys, "\n") != strings.Join(want, "\n") {
			t.Fatalf("epoch %s's shards hold\n%.200s\nwant the file list's\n%.200s", epoch, strings.Join(keys, "\n"), strings.Join(want, "\n"))
		}
		orders[epoch] = keys
	}
	if strings.Join(orders["epoch-1"], ",") == strings.Join(orders["epoch-2"], ",") || len(orders["shard-1-of-2/epoch-1"]) != len(orders["epoch-1"])/2 {
		t.Errorf("epochs 1 and 2 have the same order, or the shard directory holds %d samples of %d", len(orders["shard-1-of-2/epoch-1"]), len(orders["epoch-1"]))
	}
	for _, bad := range []string{"shard-99999.tar", "shard-0.tar", "x.tar"} {
		if _, err := os.Stat(filepath.Join(mnt, "all", "epoch-1.wds", bad)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("stat epoch-1.wds/%s: %v, want ENOENT", bad, err)
		}
	}
	if _, err := os.Stat(filepath.Join(mnt, "all", "epoch-1@3.wds")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stat epoch-1@3.wds: %v, want ENOENT (no record view of a resumed epoch)", err)
	}
}

// TestLocalTarIsTheTar: a tar written to a local file for the record view's own
// connection (--records-at) is byte for byte the tar the mount serves, and leaves no name
// behind; with its blobs not held it is not written.
func TestLocalTarIsTheTar(t *testing.T) {
	f := newFixtureMeta(t, 60, classes, memstore.Options{}, []string{"patient_id"}, func(i int) map[string]string {
		return map[string]string{"patient_id": "p" + strconv.Itoa(i%7)}
	})
	mnt, fsys := recordMount(t, f, 16<<10)
	dir := t.TempDir()
	if _, err := fsys.WriteLocalTar(dir, "all", "epoch-1.wds", 0); err == nil {
		t.Errorf("a tar written with no blob held")
	}
	names, _ := readNames(t, filepath.Join(mnt, "all", "epoch-1.wds"))
	for k := 0; k < len(names)/2; k++ {
		want := testkit.Must(os.ReadFile(filepath.Join(mnt, "all", "epoch-1.wds", names[2*k+1])))(t)
		file, err := fsys.WriteLocalTar(dir, "all", "epoch-1.wds", k)
		if err != nil {
			t.Fatalf("shard %d: %v", k, err)
		}
		got, err := io.ReadAll(io.NewSectionReader(file, 0, 1<<40))
		file.Close()
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("shard %d: the local file (%d bytes, %v) is not the mount's tar (%d bytes)", k, len(got), err, len(want))
		}
	}
	if left := testkit.Must(os.ReadDir(dir))(t); len(left) != 0 {
		t.Errorf("%s holds %v after the tars were written", dir, left)
	}
}

// TestRecordsOwnConnectionWithoutHelper: the record view on its own connection
// (MountRecords) with no lookahead helper: once an epoch's tars were read and closed, the
// daemon's own quiet time passes and the next epoch's tars are written to local files;
// read there they are byte for byte the main mount's, opened in passthrough mode with no
// READ (where the kernel refuses passthrough, none is written).
func TestRecordsOwnConnectionWithoutHelper(t *testing.T) {
	f := newFixtureMeta(t, 60, classes, memstore.Options{}, []string{"patient_id"}, func(i int) map[string]string {
		return map[string]string{"patient_id": "p" + strconv.Itoa(i%7)}
	})
	scratch := t.TempDir()
	mnt, fsys := recordMountWith(t, f, 16<<10, func(c *cfs.Config) { c.RecordsDir = scratch })
	rec := t.TempDir()
	server, err := cfs.MountRecords(rec, fsys, cfs.MountOptions{FsName: "cassfs:test.wds"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := server.Unmount(); err != nil {
			t.Errorf("unmount %s: %v", rec, err)
		}
	})
	if err := server.WaitMount(); err != nil {
		t.Fatal(err)
	}
	tars := func(root, epoch string) (paths []string) {
		dir := filepath.Join(root, "all", epoch+".wds")
		names, _ := readNames(t, dir)
		for _, name := range names {
			if strings.HasSuffix(name, ".tar") {
				paths = append(paths, filepath.Join(dir, name))
			}
		}
		return paths
	}
	for _, tp := range tars(rec, "epoch-0") {
		testkit.Must(os.ReadFile(tp))(t)
	}
	shards := tars(rec, "epoch-1")
	if fsys.RecordsDir() == "" {
		time.Sleep(500 * time.Millisecond)
		if got := fsys.Stats().LocalTars; got != 0 {
			t.Errorf("%d tars written where the kernel refuses passthrough", got)
		}
		return
	}
	for deadline := time.Now().Add(10 * time.Second); fsys.Stats().LocalTars < int64(len(shards)); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of epoch 1's %d tars written to local files", fsys.Stats().LocalTars, len(shards))
		}
	}
	reads := fsys.Stats().Reads
	var got [][]byte
	for _, tp := range shards {
		got = append(got, testkit.Must(os.ReadFile(tp))(t))
	}
	if r := fsys.Stats().Reads - reads; r != 0 || fsys.Stats().TarsPassedThrough < int64(len(shards)) {
		t.Errorf("epoch 1's tars read with %d READs, %d opens passed through; want none, %d", r, fsys.Stats().TarsPassedThrough, len(shards))
	}
	for k, tp := range tars(mnt, "epoch-1") {
		if !bytes.Equal(got[k], testkit.Must(os.ReadFile(tp))(t)) {
			t.Fatalf("%s differs from %s", shards[k], tp)
		}
	}
	// Epoch 1 read and closed, epoch 2's tars are written (and nothing is left to do after
	// the test).
	for deadline := time.Now().Add(10 * time.Second); fsys.Stats().LocalTars < int64(2*len(shards)); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d tars written to local files after epoch 1 was read, want %d", fsys.Stats().LocalTars, 2*len(shards))
		}
	}
}

// checkShard reads one tar and checks each sample's members against the store and the
// index file; it returns "<key> <path>" for each sample in the tar's order.
func checkShard(t *testing.T, f *fixture, data, idx []byte) (keys []string) {
	t.Helper()
	r := tar.NewReader(bytes.NewReader(data))
	lines := strings.Split(strings.TrimSuffix(string(idx), "\n"), "\n")
	var members []string // "<ext> <offset> <size> <name>" as the index gives them
	for _, l := range lines[1:] {
		fields := strings.Fields(l)
		for k := 0; k+4 <= len(fields); k += 4 {
			members = append(members, strings.Join(fields[k:k+4], " "))
		}
	}
	var pos int64
	var cur struct {
		key, path string
		label     int
	}
	m := 0
	for {
		h, err := r.Next()
		if err == io.EOF {
			break
		}
		testkit.Check(t, err)
		body := testkit.Must(io.ReadAll(r))(t)
		key, ext, _ := strings.Cut(h.Name, ".")
		if m >= len(members) || members[m] != fmt.Sprintf("%s %d %d %s", ext, pos+512, h.Size, h.Name) {
			t.Fatalf("member %s at %d (%d bytes): the index says %q", h.Name, pos+512, h.Size, members[min(m, len(members)-1)])
		}
		m++
		pos += 512 + (h.Size+511)/512*512
		switch ext {
		case "cls":
			cur.label = testkit.Must(strconv.Atoi(string(body)))(t)
		case "json":
			var meta map[string]any
			testkit.Check(t, json.Unmarshal(body, &meta))
			cur.path = meta["name"].(string)
			i, ok := f.ix.Find(uuid.MustParse(meta["uuid"].(string)))
			if !ok || f.ix.Path(i) != cur.path || int(meta["label"].(float64)) != cur.label || f.ix.Label(i) != cur.label {
				t.Fatalf("%s: %s does not describe the sample (label %d)", h.Name, body, cur.label)
			}
			if c, ok := f.ix.Column("patient_id"); ok {
				if v, _ := f.ix.Meta(i, c); meta["patient_id"] != string(v) {
					t.Fatalf("%s: %s, want patient_id %q", h.Name, body, v)
				}
			}
			keys = append(keys, key+" "+cur.path)
		default:
			cur.key = key
			if !bytes.Contains(body, []byte(ext)) || len(body) == 0 {
				t.Fatalf("%s: %.20q", h.Name, body)
			}
			// The blob is its name repeated: the name it had at ingest.
			name := string(body[:bytes.IndexByte(body, '.')+len(ext)+1])
			if !bytes.Equal(body, f.blobs[name]) {
				t.Fatalf("%s is not the bytes of %s", h.Name, name)
			}
		}
	}
	if len(lines) != len(keys)+1 || lines[0] != "v1.2 "+strconv.Itoa(len(keys)) || m != len(members) {
		t.Fatalf("index %q... for %d samples, %d members of %d", lines[0], len(keys), m, len(members))
	}
	return keys
}

// TestRecordBytesArePushedAhead: once a reader starts a shard, the prefetcher follows it
// and the blobs it brings go into the tar's page cache: the whole shard then reads with
// little READ but the probes' pages (one sample in probeEvery), its bytes those
// archive/tar would write.
func TestRecordBytesArePushedAhead(t *testing.T) {
	f := newFixtureSized(t, 160, classes, memstore.Options{}, nil, nil, func(i int) int { return 800 + 7*i })
	mnt, fsys := recordMount(t, f, 4<<20)
	path := filepath.Join(mnt, "all", "epoch-0.wds", "shard-00000.tar")
	fl := testkit.Must(os.Open(path))(t)
	defer fl.Close()
	size := testkit.Must(fl.Stat())(t).Size()
	var idxSamples int
	fmt.Sscanf(string(testkit.Must(os.ReadFile(strings.TrimSuffix(path, ".tar")+".idx"))(t)), "v1.2 %d", &idxSamples)
	if idxSamples < 3*cfs.ProbeEvery {
		t.Fatalf("shard 0 holds %d samples; the test wants several probes", idxSamples)
	}
	// The first page starts the shard's stream.
	testkit.Must(fl.ReadAt(make([]byte, 4096), 0))(t)
	deadline := time.Now().Add(10 * time.Second)
	for fsys.PushStats().Records < int64(idxSamples)-1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := fsys.PushStats().Records; n < int64(idxSamples)-1 {
		t.Fatalf("%d of the shard's %d samples pushed", n, idxSamples)
	}
	// Bytes READ, not READs: pages pushed and reclaimed since (the machine's proactive
	// reclaim takes cold pages) come by READs, a few pages each.
	read := func() int64 { return fsys.Stats().Bytes }
	before := read()
	got := testkit.Must(io.ReadAll(bufio.NewReaderSize(fl, 1<<16)))(t)
	if n := read() - before; n > size/10 {
		t.Errorf("reading a %d-byte shard of %d samples pushed ahead READ %d bytes, want at most a tenth (its probes' pages); push stats %+v",
			size, idxSamples, n, fsys.PushStats())
	}
	if int64(len(got)) != size {
		t.Fatalf("read %d bytes of %d", len(got), size)
	}
	checkShard(t, f, got, testkit.Must(os.ReadFile(strings.TrimSuffix(path, ".tar")+".idx"))(t))
}

// TestNextEpochTarsPushedFromTheDiskTier: with nothing in memory, the blobs the disk tier
// holds (Config.Backing) are pushed into the next epoch's tars between epochs, pages
// shared by neighbours read from it included: that epoch reads with little READ. With a
// third of the blobs missing from the tier, the rest is pushed and every byte is right
// (a neighbour's blob is never overwritten by the next read before its shared page went);
// with targets, which follow their blobs in the tier's files, too.
func TestNextEpochTarsPushedFromTheDiskTier(t *testing.T) {
	plain := newFixtureSized(t, 200, classes, memstore.Options{}, nil, nil, func(i int) int { return 900 + 5*i })
	for _, f := range []*fixture{plain, targetFixture(t, 120, memstore.Options{})} {
		dir := t.TempDir()
		blobs := make([][]byte, f.ix.Len())
		fetch := prefetch.StoreFetch(f.st, f.ix) // as the cache and the tier hold it: the target after the blob
		for i := range f.ix.Len() {
			blobs[i] = testkit.Must(fetch.Fetch(t.Context(), uint32(i)))(t)
			if err := os.WriteFile(filepath.Join(dir, strconv.Itoa(i)), blobs[i], 0o644); err != nil {
				t.Fatal(err)
			}
		}
		for _, missing := range []bool{false, true} {
			tier := backingFunc(func(i uint32) (*os.File, bool) {
				if missing && i%3 == 0 {
					return nil, false
				}
				fl, err := os.Open(filepath.Join(dir, strconv.Itoa(int(i))))
				return fl, err == nil
			})
			mnt, fsys, _, stop := lookaheadMountWith(t, f, false, cfs.LookaheadOptions{Distance: 64, NextEpoch: 20 * time.Millisecond}, func(c *cfs.Config) {
				c.Peek = func(uint32) ([]byte, bool) { return nil, false } // memory holds nothing
				c.Backing = tier
			})
			tarOf := func(epoch string) string { return filepath.Join(mnt, "all", "epoch-"+epoch+".wds", "shard-00000.tar") }
			testkit.Must(os.ReadFile(tarOf("0")))(t)
			// What epoch 1's tar holds: the layout the mount shows (its members' time is
			// the mount's), rendered from the store's blobs.
			mtime := testkit.Must(os.Stat(tarOf("1")))(t).ModTime()
			sh := view.New(view.Config{Index: f.ix, Splits: []*splits.Split{splits.All(f.ix)}, ModTime: mtime}).
				Epoch(view.Key{Split: "all", Epoch: 1}).Records().Shard(0)
			want := make([]byte, sh.Size())
			testkit.Check(t, sh.ReadAt(want, 0, func(j int) ([]byte, error) { return blobs[sh.Sample(j)], nil }))
			// The pushes between epochs start 20 ms after the last READ: wait until they end.
			last, since := fsys.PushStats().Records, time.Now()
			for deadline := time.Now().Add(10 * time.Second); time.Since(since) < 300*time.Millisecond && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
				if r := fsys.PushStats().Records; r != last {
					last, since = r, time.Now()
				}
			}
			before := fsys.Stats().Bytes
			data := testkit.Must(os.ReadFile(tarOf("1")))(t)
			if got := fsys.Stats().Bytes - before; !missing && got > int64(len(data))/10 {
				t.Errorf("epoch 1's tar, pushed from the disk tier between epochs, READ %d of its %d bytes, want at most a tenth (%d records pushed)", got, len(data), last)
			}
			if !bytes.Equal(data, want) {
				k := 0
				for k < min(len(data), len(want)) && data[k] == want[k] {
					k++
				}
				t.Errorf("epoch 1's tar (targets %v, a third missing from the tier %v) differs from what it holds from byte %d (sample %d) on; %d records pushed",
					f.ix.HasTargets(), missing, k, sh.Find(int64(k)), last)
			}
			stop()
		}
	}
}

// TestTierBudgetGivenBack: a blob the pushes between epochs do not read from the disk
// tier gives its share of the pause's budget back, whether the tier does not hold it, its
// file went short (evicted meanwhile), or it is larger than what is left: the blobs after
// it still have the room. One read takes its size.
func TestTierBudgetGivenBack(t *testing.T) {
	f := newFixtureSized(t, 3, classes, memstore.Options{}, nil, nil, func(i int) int { return 100 })
	dir := t.TempDir()
	fetch := prefetch.StoreFetch(f.st, f.ix)
	for i := range f.ix.Len() {
		blob := testkit.Must(fetch.Fetch(t.Context(), uint32(i)))(t)
		if i == 1 {
			blob = blob[:len(blob)/2] // short: the read fails
		}
		testkit.Check(t, os.WriteFile(filepath.Join(dir, strconv.Itoa(i)), blob, 0o644))
	}
	tier := backingFunc(func(i uint32) (*os.File, bool) {
		if i == 2 {
			return nil, false
		}
		fl, err := os.Open(filepath.Join(dir, strconv.Itoa(int(i))))
		return fl, err == nil
	})
	fsys := cfs.New(cfs.Config{Views: view.New(view.Config{Index: f.ix, Splits: []*splits.Split{splits.All(f.ix)}}), Backing: tier})
	const room = 1 << 20
	n := f.ix.BlobSize(0)
	if data, ok, left := fsys.TierBlob(0, room); !ok || int64(len(data)) != n || left != room-n {
		t.Errorf("a blob the tier holds: read %v (%d bytes), %d left of %d; want its %d bytes read and taken from the room", ok, len(data), left, room, n)
	}
	for _, c := range []struct {
		what string
		i    uint32
		room int64
	}{
		{"whose file went short", 1, room},
		{"the tier does not hold", 2, room},
		{"larger than the room left", 0, n - 1},
	} {
		if _, ok, left := fsys.TierBlob(c.i, c.room); ok || left != c.room {
			t.Errorf("a blob %s: read %v, %d left of %d; want it not read and the room given back", c.what, ok, left, c.room)
		}
	}
}

// TestRecordReadsClaimWholeSamples: a READ claims the samples whose bytes it covers
// whole (their pushes would copy the same bytes again), not those it covers in part;
// a sample is claimed once; a failed READ gives its claims back.
func TestRecordReadsClaimWholeSamples(t *testing.T) {
	f := newFixtureSized(t, 40, classes, memstore.Options{}, nil, nil, func(i int) int { return 3000 + 11*i })
	sh := view.New(view.Config{Index: f.ix, Splits: []*splits.Split{splits.All(f.ix)}, ShardBytes: 1 << 20}).
		Epoch(view.Key{Split: "all"}).Records().Shard(0)
	claim, unclaim := cfs.Claims(sh)
	// From the middle of sample 2 to the end of sample 6: samples 3..6 whole.
	got := claim(sh.Start(2)+100, sh.Start(7))
	if len(got) != 4 || got[0] != 3 || got[3] != 6 {
		t.Fatalf("a READ from inside sample 2 to the end of 6 claimed %v, want 3..6", got)
	}
	if again := claim(sh.Start(3), sh.Start(5)); len(again) != 0 {
		t.Fatalf("claimed again: %v", again)
	}
	unclaim(got)
	if back := claim(sh.Start(3), sh.Start(4)); len(back) != 1 || back[0] != 3 {
		t.Fatalf("after unclaim, a READ of sample 3 claimed %v", back)
	}
	// The last sample with the end blocks.
	n := sh.Len()
	if last := claim(sh.Start(n-1), sh.Size()); len(last) != 1 || last[0] != uint32(n-1) {
		t.Fatalf("a READ of the last sample and the end blocks claimed %v, want [%d]", last, n-1)
	}
}

// TestRecordReadOfAMissingBlobFails: a READ covering bytes of a blob the store cannot
// give (missing, or corrupt: both fail the fetch) fails with EIO; the tar's other ranges
// read, and the index needs no blob.
func TestRecordReadOfAMissingBlobFails(t *testing.T) {
	var bad atomic.Pointer[uuid.UUID]
	f := newFixtureSized(t, 30, classes, memstore.Options{FailGet: func(id uuid.UUID) error {
		if b := bad.Load(); b != nil && *b == id {
			return fmt.Errorf("blob of %s: %w", id, store.ErrCorrupt)
		}
		return nil
	}}, nil, nil, func(i int) int { return 600 })
	// The layout the mount shows (same seed, same shard size), to find the tenth sample.
	sh := view.New(view.Config{Index: f.ix, Splits: []*splits.Split{splits.All(f.ix)}, ShardBytes: 1 << 20}).
		Epoch(view.Key{Split: "all"}).Records().Shard(0)
	id := f.ix.ID(sh.Sample(9))
	bad.Store(&id)
	mnt, _ := recordMount(t, f, 1<<20)
	fl := testkit.Must(os.Open(filepath.Join(mnt, "all", "epoch-0.wds", "shard-00000.tar")))(t)
	defer fl.Close()
	start, end := sh.Start(9), sh.Start(10)
	buf := make([]byte, end-start)
	if _, err := fl.ReadAt(buf, start); !errors.Is(err, syscall.EIO) {
		t.Fatalf("a read of the bytes of a sample the store fails: %v, want EIO", err)
	}
	if _, err := fl.ReadAt(make([]byte, 4096), 0); err != nil {
		t.Fatalf("a read of the tar's first page: %v", err)
	}
	if _, err := fl.ReadAt(make([]byte, 512), sh.Start(sh.Len()-1)); err != nil {
		t.Fatalf("a read of the last sample's header: %v", err)
	}
	if _, err := os.ReadFile(filepath.Join(mnt, "all", "epoch-0.wds", "shard-00000.idx")); err != nil {
		t.Fatalf("the index: %v", err)
	}
}

// TestNextEpochTarsPushedBetweenEpochs: once readers got to an epoch's last shard and the
// mount is quiet, the helper looks the next epoch's tars up and the daemon pushes every
// blob it holds into them: that epoch then reads with little READ but the probes' pages,
// its bytes right, and one sample in AheadEvery·ProbeEvery a probe. Once it is read, the
// kernel lets go of the epoch before's tar.
func TestNextEpochTarsPushedBetweenEpochs(t *testing.T) {
	f := newFixtureSized(t, 640, classes, memstore.Options{}, nil, nil, func(i int) int { return 700 + 3*i })
	mnt, fsys, _, stop := lookaheadMountWith(t, f, false, cfs.LookaheadOptions{Distance: 64, NextEpoch: 20 * time.Millisecond})
	defer stop()
	tarOf := func(epoch string) string { return filepath.Join(mnt, "all", "epoch-"+epoch+".wds", "shard-00000.tar") }
	if names, _ := readNames(t, filepath.Join(mnt, "all", "epoch-0.wds")); len(names) != 2 {
		t.Fatalf("epoch-0.wds lists %q, want one shard", names)
	}
	testkit.Must(os.ReadFile(tarOf("0")))(t) // every blob is in memory now
	n := int64(f.ix.Len())
	// Epoch 0's pushes, then epoch 1's: wait until they settle.
	last, since := fsys.PushStats().Records, time.Now()
	for deadline := time.Now().Add(10 * time.Second); time.Since(since) < 300*time.Millisecond && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		if r := fsys.PushStats().Records; r != last {
			last, since = r, time.Now()
		}
	}
	if last < n {
		t.Fatalf("%d records pushed, want epoch 1's %d at least", last, n)
	}
	// Bytes READ, not READs: pages pushed and reclaimed since (the machine's proactive
	// reclaim takes cold pages) come by READs, a few pages each.
	read := func() int64 { return fsys.Stats().Bytes }
	reads := func() int64 { return fsys.RequestStats()["read"] }
	evicted := evictedPages(t, tarOf("1"))
	before, readsBefore := read(), reads()
	data := testkit.Must(os.ReadFile(tarOf("1")))(t)
	if got := read() - before; got > int64(len(data))/10 {
		t.Errorf("epoch 1's tar, pushed between epochs, READ %d of its %d bytes, want at most a tenth (its probes' pages)", got, len(data))
	}
	// Pushed ahead of its readers, it leaves one sample in AheadEvery·ProbeEvery to READs,
	// not one in ProbeEvery; a page pushed and reclaimed since (the kernel counts it
	// evicted, as it does not a page never there) costs a READ more.
	t.Logf("epoch 1's tar: %d READs, %d pages evicted since pushed", reads()-readsBefore, evicted)
	if got, probes := reads()-readsBefore, f.ix.Len()/(view.AheadEvery*cfs.ProbeEvery); got > int64(2*probes)+evicted {
		t.Errorf("epoch 1's tar, pushed between epochs, took %d READs, want about %d (one sample in %d a probe; %d pages evicted since pushed)", got, probes, view.AheadEvery*cfs.ProbeEvery, evicted)
	}
	checkShard(t, f, data, testkit.Must(os.ReadFile(strings.TrimSuffix(tarOf("1"), ".tar")+".idx"))(t))
	// Epoch 1 read, epoch 0's tar is let go: read again, it is READ (and rendered) whole.
	for deadline := time.Now().Add(10 * time.Second); fsys.PushStats().TarsDropped < 1 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	before = read()
	old := testkit.Must(os.ReadFile(tarOf("0")))(t)
	if got := read() - before; got < int64(len(old))/2 {
		t.Errorf("epoch 0's tar, after epoch 1's was read, READ %d of its %d bytes, want it let go (%d tars dropped)", got, len(old), fsys.PushStats().TarsDropped)
	}
	checkShard(t, f, old, testkit.Must(os.ReadFile(strings.TrimSuffix(tarOf("0"), ".tar")+".idx"))(t))
}

// evictedPages is how many pages of file p the kernel evicted from its page cache
// (cachestat(2), Linux 6.5+): pages that were there, not those never written.
func evictedPages(t *testing.T, p string) int64 {
	t.Helper()
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	var cs unix.Cachestat_t
	if err := unix.Cachestat(uint(fd), &unix.CachestatRange{}, &cs, 0); err != nil {
		t.Fatalf("cachestat %s: %v", p, err)
	}
	return int64(cs.Evicted)
}
