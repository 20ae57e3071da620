package fs_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cassfs/cassfs/internal/testkit"

	"github.com/cassfs/cassfs/prefetch"
	"github.com/cassfs/cassfs/splits"
	"github.com/cassfs/cassfs/store"
	"github.com/cassfs/cassfs/store/memstore"
	"github.com/google/uuid"
)

// TestPrefetchFollowsLookups: a reader walking file_list.txt in order never waits for a fetch
// it started itself: each lookup has the prefetcher fetch that sample and the ones after it,
// so every READ finds its blob cached or in flight.
func TestPrefetchFollowsLookups(t *testing.T) {
	f := newFixture(t, 200, classes, memstore.Options{Latency: func(uuid.UUID) time.Duration { return 2 * time.Millisecond }})
	cache := prefetch.NewCache(prefetch.StoreFetch(f.st, f.ix), prefetch.CacheOptions{MaxBytes: 1 << 30})
	p := prefetch.NewPrefetcher(cache, prefetch.Options{Size: f.ix.Size, InitialWindow: 8})
	defer p.Close()
	mnt := f.mount(t, mountOpts{cache: cache, prefetcher: p})
	root := filepath.Join(mnt, "all", "epoch-0")
	data, err := os.ReadFile(filepath.Join(root, "file_list.txt"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	for _, line := range lines {
		p := line[:strings.LastIndexByte(line, ' ')]
		got, err := os.ReadFile(filepath.Join(root, p))
		if err != nil || !bytes.Equal(got, f.blobs[p[:strings.IndexByte(p, '/')]+"/"+p[strings.IndexByte(p, '_')+1:]]) {
			t.Fatalf("%s: wrong content or %v", p, err)
		}
	}
	s := cache.Stats()
	if s.Misses != 0 {
		t.Errorf("%d reads had to start their own fetch; the prefetcher should have started each", s.Misses)
	}
	if s.Prefetched < int64(len(lines)) {
		t.Errorf("prefetched %d of %d samples", s.Prefetched, len(lines))
	}
	if got := f.st.Gets(); got != len(lines) {
		t.Errorf("%d fetches for %d samples", got, len(lines))
	}
	st := p.Stats()
	if len(st) != 1 || st[0].Consumed < int64(len(lines)) {
		t.Errorf("prefetch stream %+v: want one stream told of every one of the %d lookups", st, len(lines))
	}
}

// TestArrivalBinding: with stragglers in the store and several concurrent readers walking
// file_list.txt, arrival binding gives every sample exactly once per epoch, each under its
// own class, and a name keeps its content once bound; the stragglers end up bound to later
// names than their own positions.
func TestArrivalBinding(t *testing.T) {
	straggler := func(id uuid.UUID) bool { return id[0] < 24 } // ~10% of samples
	f := newFixture(t, 300, classes, memstore.Options{Latency: func(id uuid.UUID) time.Duration {
		if straggler(id) {
			return 300 * time.Millisecond
		}
		return time.Millisecond
	}})
	cache := prefetch.NewCache(prefetch.StoreFetch(f.st, f.ix), prefetch.CacheOptions{MaxBytes: 1 << 30})
	p := prefetch.NewPrefetcher(cache, prefetch.Options{Size: f.ix.Size, InitialWindow: 64})
	defer p.Close()
	mnt := f.mount(t, mountOpts{cache: cache, prefetcher: p, arrival: true})
	root := filepath.Join(mnt, "all", "epoch-0")
	data, err := os.ReadFile(filepath.Join(root, "file_list.txt"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	// Listing binds nothing: it happens before any read and must not wait.
	for _, c := range classes {
		if _, err := os.ReadDir(filepath.Join(root, c)); err != nil {
			t.Fatal(err)
		}
	}
	byContent := map[string]string{}
	for orig, blob := range f.blobs {
		byContent[string(blob)] = orig
	}
	got := make([]string, len(lines)) // position → sample read there
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := int(next.Add(1)) - 1; k < len(lines); k = int(next.Add(1)) - 1 {
				name := lines[k][:strings.LastIndexByte(lines[k], ' ')]
				blob, err := os.ReadFile(filepath.Join(root, name))
				if err != nil {
					t.Error(err)
					return
				}
				orig, ok := byContent[string(blob)]
				if !ok {
					t.Errorf("%s: content of no sample", name)
					return
				}
				if class(orig) != class(name) {
					t.Errorf("%s holds %s, of another class", name, orig)
				}
				var st syscall.Stat_t
				if err := syscall.Stat(filepath.Join(root, name), &st); err != nil || st.Size != int64(len(blob)) {
					t.Errorf("%s: stat size %d, content %d bytes", name, st.Size, len(blob))
				}
				got[k] = orig
			}
		}()
	}
	wg.Wait()
	seen := map[string]int{}
	for _, o := range got {
		seen[o]++
	}
	if len(seen) != len(f.blobs) {
		t.Errorf("the epoch showed %d distinct samples, want %d", len(seen), len(f.blobs))
	}
	for o, n := range seen {
		if n != 1 {
			t.Errorf("%s appeared %d times in one epoch", o, n)
		}
	}
	// Once bound, a name keeps its content.
	for k, line := range lines[:50] {
		name := line[:strings.LastIndexByte(line, ' ')]
		blob := testkit.Must(os.ReadFile(filepath.Join(root, name)))(t)
		if byContent[string(blob)] != got[k] {
			t.Errorf("%s changed content after it was bound", name)
		}
	}
	// Stragglers were pushed back: on average they are read later than their own positions.
	var own, bound, n int
	for k, o := range got {
		if straggler(store.SampleID("test", o)) {
			i, _ := f.ix.Find(store.SampleID("test", o))
			for pos, j := range splits.Permutation(f.ix.Len(), "all", 0, 0) {
				if j == i {
					own += pos
				}
			}
			bound += k
			n++
		}
	}
	if n == 0 || bound <= own {
		t.Errorf("%d stragglers at mean position %d, their own mean position %d: arrival binding should push them back", n, bound/max(n, 1), own/max(n, 1))
	}
}

func class(p string) string { return p[:strings.IndexByte(p, '/')] }

// want returns "<class>/<name>" of canonical samples.
func (f *fixture) names(order []uint32) []string {
	var out []string
	for _, i := range order {
		out = append(out, classes[f.ix.Label(i)]+"/"+f.ix.Name(i))
	}
	return out
}

func TestShardedMountsPartitionEachEpoch(t *testing.T) {
	f := newFixture(t, 103, classes, memstore.Options{})
	for _, pad := range []bool{false, true} {
		const ranks = 4
		for epoch := range 2 {
			perm := splits.Permutation(f.ix.Len(), "all", 5, uint64(epoch))
			seen := map[string]int{}
			for r := range ranks {
				sh := splits.Shard{Rank: r, Count: ranks, Pad: pad}
				mnt := f.mount(t, mountOpts{seed: 5, shard: sh})
				got := viewOrder(t, filepath.Join(mnt, "all", "epoch-"+strconv.Itoa(epoch)), 0, 2)
				if want := f.names(sh.Take(perm)); !slices.Equal(got, want) {
					t.Errorf("pad=%v epoch %d rank %d: file_list is not the rank's part of the permutation", pad, epoch, r)
				}
				for _, n := range got {
					seen[n]++
				}
				// The class directories list exactly the shard's samples.
				listed := 0
				for _, c := range classes {
					names, _ := readNames(t, filepath.Join(mnt, "all", "epoch-"+strconv.Itoa(epoch), c))
					listed += len(names)
				}
				if listed != len(got) {
					t.Errorf("pad=%v rank %d: class directories list %d files, file_list %d", pad, r, listed, len(got))
				}
			}
			if len(seen) != f.ix.Len() {
				t.Errorf("pad=%v epoch %d: the shards cover %d of %d samples", pad, epoch, len(seen), f.ix.Len())
			}
			for n, c := range seen {
				if c != 1 && !pad {
					t.Errorf("epoch %d: %s is in %d shards", epoch, n, c)
				}
			}
		}
	}
}

// TestShardDirectories: one mount shows every rank's part as <split>/shard-R-of-W/, each
// epoch directory in it the same (names, file_list, class directories, resumed views) as a
// mount with --shard R/W shows; the ranks' parts partition every epoch; a rank read through
// the shard directory is its own prefetch stream.
func TestShardDirectories(t *testing.T) {
	f := newFixture(t, 103, classes, memstore.Options{})
	for _, pad := range []bool{false, true} {
		const ranks = 4
		mnt := f.mount(t, mountOpts{seed: 5, shard: splits.Shard{Pad: pad}})
		for epoch := range 2 {
			perm := splits.Permutation(f.ix.Len(), "all", 5, uint64(epoch))
			seen := map[string]int{}
			for r := range ranks {
				sh := splits.Shard{Rank: r, Count: ranks, Pad: pad}
				dir := filepath.Join(mnt, "all", fmt.Sprintf("shard-%d-of-%d", r, ranks), "epoch-"+strconv.Itoa(epoch))
				got := viewOrder(t, dir, 0, 2)
				if want := f.names(sh.Take(perm)); !slices.Equal(got, want) {
					t.Errorf("pad=%v epoch %d rank %d: file_list is not the rank's part of the permutation", pad, epoch, r)
				}
				single := f.mount(t, mountOpts{seed: 5, shard: sh})
				for _, sub := range []string{"epoch-" + strconv.Itoa(epoch), fmt.Sprintf("epoch-%d@3", epoch)} {
					a := testkit.Must(os.ReadFile(filepath.Join(filepath.Dir(dir), sub, "file_list.txt")))(t)
					b := testkit.Must(os.ReadFile(filepath.Join(single, "all", sub, "file_list.txt")))(t)
					if !bytes.Equal(a, b) {
						t.Errorf("pad=%v rank %d: %s differs from a --shard %v mount's", pad, r, sub, sh)
					}
				}
				for _, n := range got {
					seen[n]++
				}
			}
			if len(seen) != f.ix.Len() {
				t.Errorf("pad=%v epoch %d: the shards cover %d of %d samples", pad, epoch, len(seen), f.ix.Len())
			}
			for n, c := range seen {
				if c != 1 && !pad {
					t.Errorf("epoch %d: %s is in %d shards", epoch, n, c)
				}
			}
		}
		// Not listed, not resolved beyond what --shard accepts, no samples.csv inside.
		names, _ := readNames(t, filepath.Join(mnt, "all"))
		for _, n := range names {
			if strings.HasPrefix(n, "shard-") {
				t.Errorf("the split directory lists %s", n)
			}
		}
		for _, bad := range []string{"shard-4-of-4", "shard-0-of-0", "shard-01-of-4", "shard-0-of-4/shard-0-of-2", "shard-0-of-4/samples.csv"} {
			if _, err := os.Stat(filepath.Join(mnt, "all", bad)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s: %v, want none", bad, err)
			}
		}
	}
}

func TestResumedEpochView(t *testing.T) {
	f := newFixture(t, 120, classes, memstore.Options{})
	for _, arrival := range []bool{false, true} {
		mnt := f.mount(t, mountOpts{seed: 5, arrival: arrival})
		full := viewOrder(t, filepath.Join(mnt, "all", "epoch-2"), 0, 3)
		rest := viewOrder(t, filepath.Join(mnt, "all", "epoch-2@37"), 37, 3)
		if !slices.Equal(rest, full[37:]) {
			t.Errorf("arrival=%v: epoch-2@37 lists %d samples, want the %d of epoch-2 from position 37 on", arrival, len(rest), len(full)-37)
		}
		// Class directories: the names of epoch-2 at positions >= 37, and they read.
		for _, c := range classes {
			all, _ := readNames(t, filepath.Join(mnt, "all", "epoch-2", c))
			var want []string
			for _, n := range all {
				if testkit.Must(strconv.Atoi(n[:3]))(t) >= 37 {
					want = append(want, n)
				}
			}
			got, _ := readNames(t, filepath.Join(mnt, "all", "epoch-2@37", c))
			if !slices.Equal(got, want) {
				t.Errorf("arrival=%v class %s: resumed view lists %v, want %v", arrival, c, got, want)
			}
			for _, n := range got {
				data, err := os.ReadFile(filepath.Join(mnt, "all", "epoch-2@37", c, n))
				if err != nil {
					t.Fatal(err)
				}
				if !arrival && !bytes.Equal(data, f.blobs[c+"/"+n[4:]]) {
					t.Errorf("%s/%s: wrong content", c, n)
				}
			}
		}
		if got := viewOrder(t, filepath.Join(mnt, "all", "epoch-2@120"), 120, 3); len(got) != 0 {
			t.Errorf("epoch-2@120 (the end) lists %d samples, want none", len(got))
		}
		for _, bad := range []string{"epoch-2@121", "epoch-2@037", "epoch-2@", "epoch-2@+3", "epoch-02@3", "epoch-2@3@4"} {
			if _, err := os.Stat(filepath.Join(mnt, "all", bad)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s: got %v, want ENOENT", bad, err)
			}
		}
		// A name before the resume point does not resolve in the resumed view.
		names, _ := readNames(t, filepath.Join(mnt, "all", "epoch-2", "cat"))
		if testkit.Must(strconv.Atoi(names[0][:3]))(t) < 37 {
			if _, err := os.Stat(filepath.Join(mnt, "all", "epoch-2@37", "cat", names[0])); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s before the resume point: got %v, want ENOENT", names[0], err)
			}
		}
	}
}

func TestResumedShard(t *testing.T) {
	f := newFixture(t, 50, classes, memstore.Options{})
	sh := splits.Shard{Rank: 1, Count: 3}
	mnt := f.mount(t, mountOpts{seed: 1, shard: sh})
	full := viewOrder(t, filepath.Join(mnt, "all", "epoch-0"), 0, 2)
	if len(full) != 17 {
		t.Fatalf("rank 1 of 3 over 50 samples lists %d, want 17", len(full))
	}
	if rest := viewOrder(t, filepath.Join(mnt, "all", "epoch-0@10"), 10, 2); !slices.Equal(rest, full[10:]) {
		t.Errorf("epoch-0@10 of the shard is not the shard's order from 10 on")
	}
	if _, err := os.Stat(filepath.Join(mnt, "all", "epoch-0@18")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("epoch-0@18, past the shard's 17: got %v, want ENOENT", err)
	}
}
