//go:build e2e

package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cassfs/cassfs/internal/testkit"
)

// TestTargetsWithReaders: a generated segmentation dataset (a mask per image whose pixels
// encode the image's checksum and class) ingested with --targets; DALI (two
// fn.readers.file over the two file lists, decoded) and torchvision (a Dataset of the two
// trees, shuffle=True, two workers) read aligned pairs exactly once per epoch, under
// arrival binding (the default, prefetching on) and strict binding, with --shard and a
// resumed epoch-N@K view. A targets tree with a mismatched name stops the ingest before
// anything is written.
func TestTargetsWithReaders(t *testing.T) {
	const n = 90
	dir := t.TempDir()
	name := newDataset(t, "seg")
	if r := cassfs(t, "gen", "--out", dir, "--count", fmt.Sprint(n), "--classes", "3", "--mean-size", "3000", "--masks", "--progress", "none"); r.code != 0 {
		t.Fatalf("gen: %s", r)
	}
	images, masks := filepath.Join(dir, "images"), filepath.Join(dir, "masks")
	source := map[string]bool{} // sha256 of every image
	err := filepath.WalkDir(images, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		sum := sha256.Sum256(data)
		source[hex.EncodeToString(sum[:])] = true
		return err
	})
	if err != nil || len(source) != n {
		t.Fatalf("%d source images: %v", len(source), err)
	}

	// A mask renamed: the ingest names it and the image left without one, and writes nothing.
	first := filepath.Join(masks, "class_000")
	entries, err := os.ReadDir(first)
	if err != nil || len(entries) == 0 {
		t.Fatalf("masks of class_000: %v", err)
	}
	orig := filepath.Join(first, entries[0].Name())
	testkit.Check(t, os.Rename(orig, filepath.Join(first, "stray.png")))
	r := cassfs(t, "ingest", "-d", name, "--progress", "none", "--targets", masks, images)
	if r.code == 0 || !strings.Contains(r.stderr, "class_000/stray.png matches no image") || !strings.Contains(r.stderr, "has no target") {
		t.Errorf("ingest with a mismatched target: %s", r)
	}
	if r := cassfs(t, "dataset", "list"); strings.Contains(r.stdout, name) {
		t.Errorf("a failed ingest left dataset %s behind:\n%s", name, r.stdout)
	}
	testkit.Check(t, os.Rename(filepath.Join(first, "stray.png"), orig))
	if r := cassfs(t, "ingest", "-d", name, "--progress", "none", "--targets", masks, images); r.code != 0 {
		t.Fatalf("ingest --targets: %s", r)
	}
	if r := cassfs(t, "dataset", "show", "-d", name); !strings.Contains(r.stdout, fmt.Sprintf("targets: %d of %d samples", n, n)) || !strings.Contains(r.stdout, "(.png)") {
		t.Errorf("dataset show of a dataset with targets: %s", r)
	}

	type pairs struct {
		Pairs      int      `json:"pairs"`
		Mismatched int      `json:"mismatched"`
		Images     []string `json:"images"`
	}
	read := func(t *testing.T, reader, root string, want int) []string {
		t.Helper()
		var got pairs
		runPython(t, &got, "pairs.py", reader, root)
		if got.Pairs != want || got.Mismatched != 0 {
			t.Errorf("%s %s: %d pairs, %d mismatched; want %d, 0", reader, filepath.Base(root), got.Pairs, got.Mismatched, want)
		}
		if d := slices.Compact(slices.Sorted(slices.Values(got.Images))); len(d) != len(got.Images) {
			t.Errorf("%s %s: %d images, %d distinct: a sample twice in one epoch", reader, filepath.Base(root), len(got.Images), len(d))
		}
		for _, s := range got.Images {
			if !source[s] {
				t.Errorf("%s %s: an image that is no source image", reader, filepath.Base(root))
				break
			}
		}
		return got.Images
	}

	t.Run("arrival", func(t *testing.T) {
		m := startMount(t, name)
		split := filepath.Join(m.dir, "all")
		read(t, "dali", filepath.Join(split, "epoch-0"), n)
		read(t, "torch", filepath.Join(split, "epoch-1"), n)
		read(t, "dali", filepath.Join(split, "epoch-2@40"), n-40)
	})
	t.Run("strict-shard", func(t *testing.T) {
		var seen []string
		for rank := range 2 {
			m := startMount(t, name, "--order", "strict", "--shard", fmt.Sprintf("%d/2", rank))
			seen = append(seen, read(t, "dali", filepath.Join(m.dir, "all", "epoch-0"), n/2)...)
			if rank == 1 {
				read(t, "torch", filepath.Join(m.dir, "all", "epoch-1@5"), n/2-5)
			}
			m.stop(t)
		}
		if slices.Sort(seen); len(slices.Compact(seen)) != n {
			t.Errorf("the two shards of epoch 0 covered %d of %d samples", len(seen), n)
		}
	})
	// Without labels: class_000's images and masks as flat directories (their masks say
	// class 0, the one label of an unlabeled dataset).
	t.Run("unlabeled", func(t *testing.T) {
		flat, flatMasks := t.TempDir(), t.TempDir()
		entries, err := os.ReadDir(filepath.Join(images, "class_000"))
		testkit.Check(t, err)
		for _, e := range entries {
			testkit.Check(t, os.Symlink(filepath.Join(images, "class_000", e.Name()), filepath.Join(flat, e.Name())))
			mask := strings.TrimSuffix(e.Name(), filepath.Ext(e.Name())) + ".png"
			testkit.Check(t, os.Symlink(filepath.Join(masks, "class_000", mask), filepath.Join(flatMasks, mask)))
		}
		plain := newDataset(t, "segflat")
		if r := cassfs(t, "ingest", "-d", plain, "--progress", "none", "--unlabeled", "--targets", flatMasks, flat); r.code != 0 {
			t.Fatalf("ingest --unlabeled: %s", r)
		}
		m := startMount(t, plain)
		if _, err := os.Stat(filepath.Join(m.dir, "all", "epoch-0", "unlabeled")); err != nil {
			t.Errorf("an unlabeled dataset's one class directory: %v", err)
		}
		read(t, "dali", filepath.Join(m.dir, "all", "epoch-0"), len(entries))
	})
}
