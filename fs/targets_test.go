package fs_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cassfs/cassfs/index"
	"github.com/cassfs/cassfs/internal/testkit"
	"github.com/cassfs/cassfs/prefetch"
	"github.com/cassfs/cassfs/splits"
	"github.com/cassfs/cassfs/store"
	"github.com/cassfs/cassfs/store/memstore"
	"github.com/google/uuid"
)

// targetFixture is a dataset whose samples have targets: sample "<class>/img NNNN.jpg" has
// the target "mask of <class>/img NNNN.jpg" (".png"), so a pair can be checked by content.
func targetFixture(t testing.TB, n int, opts memstore.Options) *fixture {
	t.Helper()
	ctx := context.Background()
	st := memstore.New("test", opts)
	testkit.Check(t, st.SetLabels(ctx, classes))
	f := &fixture{st: st, blobs: map[string][]byte{}}
	for i := range n {
		c := i % len(classes)
		name := fmt.Sprintf("%s/img %04d.jpg", classes[c], i)
		data := bytes.Repeat([]byte(name), 40+i%30)
		mask := []byte("mask of " + name)
		s := store.Sample{ID: store.SampleID("test", name), Label: c, Name: name, Size: int64(len(data)), Checksum: store.Checksum(data),
			Target: &store.Target{Ext: ".png", Size: int64(len(mask)), Checksum: store.Checksum(mask), CRC32C: store.CRC32C(mask)}}
		testkit.Check(t, st.Put(ctx, s, data, mask))
		f.blobs[name] = data
	}
	ix, err := index.Load(ctx, st)
	testkit.Check(t, err)
	f.ix = ix
	return f
}

// readPairs reads an epoch view's images and targets through their two file lists, line by
// line in parallel (as two DALI readers do), and returns the sample each pair shows; it
// fails if a target is not its image's, or the lists are not aligned.
func readPairs(t *testing.T, f *fixture, root string, targetsFirst bool) []string {
	t.Helper()
	images, err := os.ReadFile(filepath.Join(root, "file_list.txt"))
	testkit.Check(t, err)
	masks, err := os.ReadFile(filepath.Join(root+".targets", "file_list.txt"))
	testkit.Check(t, err)
	il, ml := strings.Split(strings.TrimSpace(string(images)), "\n"), strings.Split(strings.TrimSpace(string(masks)), "\n")
	if len(il) != len(ml) {
		t.Fatalf("%d images, %d targets listed", len(il), len(ml))
	}
	byContent := map[string]string{}
	for name, blob := range f.blobs {
		byContent[string(blob)] = name
	}
	got := make([]string, len(il))
	var wg sync.WaitGroup
	for k := range il {
		wg.Add(1)
		go func() {
			defer wg.Done()
			img, imgLabel := splitLine(il[k])
			mask, maskLabel := splitLine(ml[k])
			if imgLabel != maskLabel || strings.TrimSuffix(img, ".jpg") != strings.TrimSuffix(mask, ".png") {
				t.Errorf("line %d: %q and %q are not a pair", k, il[k], ml[k])
				return
			}
			read := func(p string) []byte {
				b, err := os.ReadFile(p)
				if err != nil {
					t.Error(err)
				}
				return b
			}
			var a, b []byte
			if targetsFirst {
				b = read(filepath.Join(root+".targets", mask))
				a = read(filepath.Join(root, img))
			} else {
				a = read(filepath.Join(root, img))
				b = read(filepath.Join(root+".targets", mask))
			}
			sample := byContent[string(a)]
			if sample == "" || string(b) != "mask of "+sample {
				t.Errorf("line %d: image of %q with target %q", k, sample, b)
			}
			if class(sample) != class(img) {
				t.Errorf("line %d: %s shows %s, of another class", k, img, sample)
			}
			got[k] = sample
		}()
	}
	wg.Wait()
	return got
}

// Targets in lockstep: epoch-N.targets beside epoch-N lists the same positions with each
// sample's target; a position shows the same sample in both, under strict and arrival
// binding, whichever is read first, in resumed views and shards; each sample once per
// epoch, one fetch each.
func TestTargetsInLockstep(t *testing.T) {
	const n = 90
	f := targetFixture(t, n, memstore.Options{Latency: func(id uuid.UUID) time.Duration { return time.Duration(id[0]%4) * time.Millisecond }})
	for _, arrival := range []bool{false, true} {
		t.Run(fmt.Sprintf("arrival=%v", arrival), func(t *testing.T) {
			cache := prefetch.NewCache(prefetch.StoreFetch(f.st, f.ix), prefetch.CacheOptions{MaxBytes: 1 << 30})
			p := prefetch.NewPrefetcher(cache, prefetch.Options{Size: f.ix.BlobSize})
			defer p.Close()
			mnt := f.mount(t, mountOpts{cache: cache, prefetcher: p, arrival: arrival, seed: 3})
			names, _ := readNames(t, filepath.Join(mnt, "all"))
			if !slices.Contains(names, "epoch-0.targets") || !slices.Contains(names, "epoch-9.targets") {
				t.Errorf("split lists %q, want epoch-N.targets beside each epoch-N", names)
			}
			for epoch, targetsFirst := range []bool{false, true} {
				got := readPairs(t, f, filepath.Join(mnt, "all", fmt.Sprintf("epoch-%d", epoch)), targetsFirst)
				if slices.Sort(got); len(slices.Compact(got)) != n {
					t.Errorf("epoch %d showed %d distinct samples, want %d", epoch, len(got), n)
				}
				if !arrival {
					if want := f.names(splits.Permutation(n, "all", 3, uint64(epoch))); !slices.Equal(viewOrder(t, filepath.Join(mnt, "all", fmt.Sprintf("epoch-%d", epoch)), 0, 2), want) {
						t.Errorf("epoch %d: not the documented order", epoch)
					}
				}
			}
			if st := cache.Stats(); st.Misses+st.Prefetched > 2*n {
				t.Errorf("%d fetches for two epochs of %d samples with their targets: a target costs no fetch of its own", st.Misses+st.Prefetched, n)
			}
			// A targets class directory lists the targets of its file list's lines, with
			// their own inodes.
			list, err := os.ReadFile(filepath.Join(mnt, "all", "epoch-0.targets", "file_list.txt"))
			testkit.Check(t, err)
			var want []string
			for _, line := range strings.Split(strings.TrimSpace(string(list)), "\n") {
				if name, _ := splitLine(line); strings.HasPrefix(name, "dog/") {
					want = append(want, strings.TrimPrefix(name, "dog/"))
				}
			}
			names, entries := readNames(t, filepath.Join(mnt, "all", "epoch-0.targets", "dog"))
			if slices.Sort(names); !slices.Equal(names, want) {
				t.Errorf("epoch-0.targets/dog lists %q, want %q", names, want)
			}
			imgs, _ := readNames(t, filepath.Join(mnt, "all", "epoch-0", "dog"))
			var st, ist syscall.Stat_t
			testkit.Check(t, syscall.Stat(filepath.Join(mnt, "all", "epoch-0.targets", "dog", entries[0].Name()), &st))
			testkit.Check(t, syscall.Stat(filepath.Join(mnt, "all", "epoch-0", "dog", imgs[0]), &ist))
			if st.Ino == ist.Ino {
				t.Errorf("a target shares its image's inode %d", st.Ino)
			}
			// A resumed view and its targets twin.
			got := readPairs(t, f, filepath.Join(mnt, "all", "epoch-2@40"), false)
			if len(got) != n-40 {
				t.Errorf("epoch-2@40 shows %d pairs, want %d", len(got), n-40)
			}
		})
	}
	mnt := f.mount(t, mountOpts{shard: splits.Shard{Rank: 1, Count: 2}})
	got := readPairs(t, f, filepath.Join(mnt, "all", "epoch-0"), false)
	if len(got) != n/2 {
		t.Errorf("rank 1 of 2 shows %d pairs, want %d", len(got), n/2)
	}
	// The same rank's shard directory of a mount of every rank: the same pairs.
	all := f.mount(t, mountOpts{})
	if dir := readPairs(t, f, filepath.Join(all, "all", "shard-1-of-2", "epoch-0"), true); !slices.Equal(dir, got) {
		t.Errorf("shard-1-of-2/epoch-0 shows %d pairs, not the %d of a --shard 1/2 mount", len(dir), len(got))
	}
	for _, bad := range []string{"epoch-0.target", "epoch-0.targets.targets", "epoch-x.targets"} {
		if _, err := os.Stat(filepath.Join(mnt, "all", bad)); !errors.Is(err, syscall.ENOENT) {
			t.Errorf("stat %s: %v, want ENOENT", bad, err)
		}
	}
}

// A dataset without targets shows no .targets directories.
func TestNoTargetsNoTwins(t *testing.T) {
	f := newFixture(t, 10, classes, memstore.Options{})
	mnt := f.mount(t, mountOpts{})
	if _, err := os.Stat(filepath.Join(mnt, "all", "epoch-0.targets")); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("stat epoch-0.targets: %v, want ENOENT", err)
	}
}

// A target that is missing or corrupt in the database fails its sample's reads with EIO,
// both image and target: the pair is fetched, verified and served together.
func TestBrokenTargetIsEIO(t *testing.T) {
	f := targetFixture(t, 12, memstore.Options{})
	i := uint32(4)
	f.st.DeleteSample(store.TargetID(f.ix.ID(i)), true)
	mnt := f.mount(t, mountOpts{})
	name := f.ix.Name(i)
	root := filepath.Join(mnt, "all", "epoch-0")
	list, err := os.ReadFile(filepath.Join(root, "file_list.txt"))
	testkit.Check(t, err)
	for _, line := range strings.Split(strings.TrimSpace(string(list)), "\n") {
		entry, _ := splitLine(line)
		if !strings.HasSuffix(entry, "_"+name) {
			continue
		}
		if _, err := os.ReadFile(filepath.Join(root, entry)); !errors.Is(err, syscall.EIO) {
			t.Errorf("image of a sample whose target is gone: %v, want EIO", err)
		}
		mask := strings.TrimSuffix(entry, ".jpg") + ".png"
		if _, err := os.ReadFile(filepath.Join(root+".targets", mask)); !errors.Is(err, syscall.EIO) {
			t.Errorf("its target: %v, want EIO", err)
		}
		return
	}
	t.Fatalf("%s not in the file list", name)
}

// splitLine splits a file_list.txt line into its name and its label.
func splitLine(line string) (name, label string) {
	k := strings.LastIndexByte(line, ' ')
	return line[:k], line[k+1:]
}
