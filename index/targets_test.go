package index_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/cassfs/cassfs/index"
	"github.com/cassfs/cassfs/internal/testkit"
	"github.com/cassfs/cassfs/store"
)

// Targets are all or nothing; what is cached for a sample (blob, then target) verifies
// only whole and right.
func TestIndexTargets(t *testing.T) {
	img, mask := []byte("image"), []byte("mask!!")
	target := &store.Target{Ext: ".nii.gz", Size: int64(len(mask)), Checksum: store.Checksum(mask), CRC32C: store.CRC32C(mask)}
	add := func(b *index.Builder, name string, tg *store.Target) {
		if err := b.Add(store.Sample{ID: store.SampleID("d", name), Label: 0, Name: name, Size: int64(len(img)), Checksum: store.Checksum(img), Target: tg}); err != nil {
			t.Fatal(err)
		}
	}
	b := index.NewBuilder([]string{"a"})
	add(b, "a/scan.jpg", target)
	add(b, "a/other", nil)
	if _, err := b.Build(); err == nil || !strings.Contains(err.Error(), "1 of 2 samples have a target") {
		t.Errorf("mixed targets: %v", err)
	}
	b = index.NewBuilder([]string{"a"})
	add(b, "a/scan.jpg", target)
	add(b, "a/noext", target)
	ix, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	for i := range uint32(2) {
		if want := strings.TrimSuffix(ix.Name(i), ".jpg") + ".nii.gz"; ix.TargetName(i) != want {
			t.Errorf("TargetName = %q, want %q", ix.TargetName(i), want)
		}
		if ix.BlobSize(i) != int64(len(img)+len(mask)) {
			t.Errorf("BlobSize = %d", ix.BlobSize(i))
		}
		whole := append(append([]byte{}, img...), mask...)
		if err := ix.VerifyBlob(i, whole); err != nil {
			t.Errorf("VerifyBlob(blob+target) = %v", err)
		}
		for _, bad := range [][]byte{img, append(append([]byte{}, img...), "mask!?"...), append(append([]byte{}, "imagE"...), mask...)} {
			if err := ix.VerifyBlob(i, bad); !errors.Is(err, store.ErrCorrupt) {
				t.Errorf("VerifyBlob(%q) = %v, want ErrCorrupt", bad, err)
			}
		}
	}
	plain := testkit.Index(t, 3, 1)
	if plain.HasTargets() || plain.BlobSize(0) != plain.Size(0) {
		t.Error("an index without targets has targets")
	}
}
