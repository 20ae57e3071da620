package view

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cassfs/cassfs/index"
	"github.com/cassfs/cassfs/splits"
	"github.com/cassfs/cassfs/store"
)

func targetIndex(t *testing.T, n int, classes []string) *index.Index {
	t.Helper()
	b := index.NewBuilder(classes)
	for k := range n {
		c := k % len(classes)
		name := fmt.Sprintf("%s/img %04d.jpg", classes[c], k)
		ext := []string{".png", ".npy"}[k%2]
		if err := b.Add(store.Sample{ID: store.SampleID("t", name), Label: c, Name: name, Size: int64(100 + k),
			Target: &store.Target{Ext: ext, Size: 7, CRC32C: uint32(k)}}); err != nil {
			t.Fatal(err)
		}
	}
	ix, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return ix
}

// The targets twin of a view: its name resolves only with targets, its entries carry the
// target's extension, its lookups bind the same sample as the image's, its file list is
// line for line the image list's, and the prefetcher hears of each position once.
func TestTargetsTwin(t *testing.T) {
	classes := []string{"a", "b"}
	ix := targetIndex(t, 40, classes)
	rec := &recorder{}
	arrived := map[uint32]bool{}
	s := New(Config{Index: ix, Splits: []*splits.Split{splits.All(ix)}, Mode: Arrival, Progress: rec,
		Arrived: func(i uint32) bool { return arrived[i] }})
	key, ok := s.targetsKey("all", "epoch-3@5.targets")
	if !ok || key != (Key{Split: "all", Epoch: 3, Start: 5}) {
		t.Fatalf("TargetsKey(epoch-3@5.targets) = %+v, %v", key, ok)
	}
	for _, bad := range []string{"epoch-3", "epoch-3.target", "x.targets", "epoch-3.targets.targets"} {
		if _, ok := s.targetsKey("all", bad); ok {
			t.Errorf("TargetsKey(%q) resolved", bad)
		}
	}
	e := s.Epoch(Key{Split: "all", Epoch: 1})
	images := strings.Split(strings.TrimSpace(string(e.ReadFileList(0, 1<<20, false))), "\n")
	targets := strings.Split(strings.TrimSpace(string(e.ReadFileList(0, 1<<20, true))), "\n")
	if len(images) != 40 || len(targets) != 40 || int64(len(e.ReadFileList(0, 1<<20, true))) != e.FileListSize(true) {
		t.Fatalf("%d image lines, %d target lines; size %d", len(images), len(targets), e.FileListSize(true))
	}
	// Every other sample has arrived: arrival binding prefers them.
	for i := range uint32(40) {
		arrived[i] = i%2 == 0
	}
	for k := range images {
		img := images[k][:strings.LastIndexByte(images[k], ' ')]
		tgt := targets[k][:strings.LastIndexByte(targets[k], ' ')]
		if want := strings.TrimSuffix(img, ".jpg"); !strings.HasPrefix(tgt, want+".") || targets[k][len(tgt):] != images[k][len(img):] {
			t.Fatalf("line %d: %q beside %q", k, targets[k], images[k])
		}
		label := ix.Label(e.Order[k])
		file := func(p string) string { return p[strings.IndexByte(p, '/')+1:] }
		var i, j uint32
		var iok, jok bool
		if k%2 == 0 { // the target first, then the image
			j, jok = s.LookupTarget(e, label, file(tgt))
			i, iok = s.Lookup(e, label, file(img))
		} else {
			i, iok = s.Lookup(e, label, file(img))
			j, jok = s.LookupTarget(e, label, file(tgt))
		}
		if !iok || !jok || i != j {
			t.Fatalf("line %d: image bound to %d (%v), target to %d (%v)", k, i, iok, j, jok)
		}
		if _, ok := s.LookupTarget(e, label, file(img)); ok {
			t.Fatalf("the image's name resolved in the targets twin")
		}
		if _, ok := s.Lookup(e, label, file(tgt)); ok {
			t.Fatalf("the target's name resolved among the images")
		}
	}
	if len(rec.accesses) != 40 {
		t.Errorf("the prefetcher heard of %d accesses for 40 positions looked up twice each, want 40", len(rec.accesses))
	}
	plain := New(Config{Index: testIndex(t, 10, classes), Splits: []*splits.Split{splits.All(testIndex(t, 10, classes))}})
	if _, ok := plain.targetsKey("all", "epoch-0.targets"); ok || plain.HasTargets() {
		t.Error("a dataset without targets has a targets twin")
	}
}
