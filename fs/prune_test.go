package fs_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	cfs "github.com/cassfs/cassfs/fs"
	"github.com/cassfs/cassfs/store/memstore"
)

// readEpoch reads every file of epoch e of the all split, checking its bytes, and returns
// how many it read.
func readEpoch(t *testing.T, f *fixture, mnt string, e int) int {
	t.Helper()
	dir := filepath.Join(mnt, "all", "epoch-"+strconv.Itoa(e))
	names := viewOrder(t, dir, 0, 2)
	lines, err := os.ReadFile(filepath.Join(dir, "file_list.txt"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for k, line := range bytes.Split(bytes.TrimSpace(lines), []byte("\n")) {
		p := string(line[:bytes.LastIndexByte(line, ' ')])
		data, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(data, f.blobs[names[k]]) {
			t.Fatalf("epoch %d: %s is not %s's bytes", e, p, names[k])
		}
		n++
	}
	return n
}

// Names of past epochs leave go-fuse's tree: each epoch read links every sample under a
// class directory of its own, and the daemon's memory would grow by an epoch's names every
// epoch. Two epochs keep theirs; an epoch read again after its names went reads the same.
func TestPastEpochsLeaveTheTree(t *testing.T) {
	const n = 60
	cfs.SetPruneIdle(t, 0)
	f := newFixture(t, n, classes, memstore.Options{})
	var fsys *cfs.FS
	mnt := f.mount(t, mountOpts{fsys: &fsys})
	for e := range 6 {
		if got := readEpoch(t, f, mnt, e); got != n {
			t.Fatalf("epoch %d: %d files, want %d", e, got, n)
		}
		want := min(e+1, 2) * n
		deadline := time.Now().Add(5 * time.Second)
		for fsys.SampleLinks() > want && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if got := fsys.SampleLinks(); got > want {
			t.Fatalf("after epoch %d: %d names in the tree, want at most %d (two epochs')", e, got, want)
		}
	}
	names, dirs := fsys.Pruned()
	if names < 4*n || dirs < int64(4*len(classes)) {
		t.Errorf("%d names and %d class directories pruned, want at least %d and %d (epochs 0-3)", names, dirs, 4*n, 4*len(classes))
	}
	// The kernel dropped epoch 0's class directories: looking one up again reaches the
	// daemon (entries are otherwise cached for good).
	before := fsys.RequestStats()["lookup"]
	if _, err := os.Stat(filepath.Join(mnt, "all", "epoch-0", classes[0])); err != nil {
		t.Fatal(err)
	}
	if fsys.RequestStats()["lookup"] == before {
		t.Error("epoch 0's class directory is still in the kernel's cache")
	}
	readEpoch(t, f, mnt, 0) // pruned: read again, every byte right
}

// Two readers on one mount, each in its own epoch (two trainings sharing a dataset): the
// epochs one of them starts prune only what neither links names in any more, not the
// other's current epoch, whose names would all be looked up again.
func TestEpochsInUseAreNotPruned(t *testing.T) {
	const n = 60
	cfs.SetPruneIdle(t, 300*time.Millisecond)
	f := newFixture(t, n, classes, memstore.Options{})
	var fsys *cfs.FS
	mnt := f.mount(t, mountOpts{fsys: &fsys})
	slow := filepath.Join(mnt, "all", "epoch-0")
	lines, err := os.ReadFile(filepath.Join(slow, "file_list.txt"))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { // a reader of epoch 0, a file every 60 ms
		for _, line := range bytes.Split(bytes.TrimSpace(lines), []byte("\n")) {
			if _, err := os.ReadFile(filepath.Join(slow, string(line[:bytes.LastIndexByte(line, ' ')]))); err != nil {
				done <- err
				return
			}
			time.Sleep(60 * time.Millisecond)
		}
		done <- nil
	}()
	for e := 1; e <= 4; e++ { // the other reader, fast, resting between epochs
		readEpoch(t, f, mnt, e)
		time.Sleep(400 * time.Millisecond)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := fsys.EpochLinks("all", "epoch-0"); got != n {
		t.Errorf("epoch 0, read throughout: %d of its %d names in the tree (pruned while read)", got, n)
	}
	// Epochs 1 and 2 went idle: their names left the tree, and the kernel was told to drop
	// at least epoch 2's directories, its samples linked again in epoch 3 by then (epoch 1
	// may have been pruned as epoch 2 began, before its samples were linked again, and then
	// stays in the kernel's cache).
	if names, dirs := fsys.Pruned(); names < 2*n || dirs < int64(len(classes)) {
		t.Errorf("%d names pruned and %d class directories dropped, want at least %d and %d (epochs 1 and 2, idle)", names, dirs, 2*n, len(classes))
	}
}
