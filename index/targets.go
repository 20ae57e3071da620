package index

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/cassfs/cassfs/store"
)

// Targets: in a dataset with targets every sample has one (a segmentation mask, a label
// vector), a blob of its own under store.TargetID. The index keeps, per sample, the
// target's size, CRC32C and extension (an index into the dataset's few distinct ones): 9
// bytes. A sample and its target travel together — fetched at once, cached as one blob
// (the image's bytes, then the target's), verified each against its own checksum — so that
// an image and its target are always at hand together, and one prefetch brings both.

// targetInfo is the index's record of the targets.
type targetInfo struct {
	size []uint32
	crc  []uint32
	ext  []uint8 // index into exts
	exts []string
}

// maxTargetExts bounds the distinct target extensions of a dataset.
const maxTargetExts = math.MaxUint8 + 1

// buildTargets records the entries' targets in canonical order; all or none must have one.
func buildTargets(samples []indexEntry, order func(j int) int) (*targetInfo, error) {
	with := 0
	for k := range samples {
		if samples[k].target != nil {
			with++
		}
	}
	switch {
	case with == 0:
		return nil, nil
	case with < len(samples):
		return nil, fmt.Errorf("%d of %d samples have a target: every sample must have one or none; ingest the tree again with --targets", with, len(samples))
	}
	n := len(samples)
	t := &targetInfo{size: make([]uint32, n), crc: make([]uint32, n), ext: make([]uint8, n)}
	for j := range n {
		s := &samples[order(j)]
		if s.target.Size <= 0 || s.target.Size > math.MaxUint32 {
			return nil, fmt.Errorf("sample %s (%s) has a target of %d bytes, outside 1..%d", s.id, s.name, s.target.Size, uint32(math.MaxUint32))
		}
		if err := store.ValidTargetExt(s.target.Ext); err != nil {
			return nil, fmt.Errorf("sample %s (%s): %w", s.id, s.name, err)
		}
		e := slices.Index(t.exts, s.target.Ext)
		if e < 0 {
			if len(t.exts) == maxTargetExts {
				return nil, fmt.Errorf("targets have more than %d distinct extensions", maxTargetExts)
			}
			t.exts = append(t.exts, s.target.Ext)
			e = len(t.exts) - 1
		}
		t.size[j], t.crc[j], t.ext[j] = uint32(s.target.Size), s.target.CRC32C, uint8(e)
	}
	return t, nil
}

// HasTargets reports whether the dataset's samples have targets.
func (ix *Index) HasTargets() bool { return ix.targets != nil }

// TargetSize is sample i's target size (0 without targets).
func (ix *Index) TargetSize(i uint32) int64 {
	if ix.targets == nil {
		return 0
	}
	return int64(ix.targets.size[i])
}

// TargetName is the file name of sample i's target: its name with the target's extension
// in place of its own ("tile_7.jpg" with a ".png" mask: "tile_7.png").
func (ix *Index) TargetName(i uint32) string {
	name := ix.Name(i)
	if k := strings.LastIndexByte(name, '.'); k > 0 {
		name = name[:k]
	}
	return name + ix.targets.exts[ix.targets.ext[i]]
}

// BlobSize is the size of what is fetched and cached for sample i: its blob, followed by
// its target's if the dataset has targets.
func (ix *Index) BlobSize(i uint32) int64 { return ix.Size(i) + ix.TargetSize(i) }

// TargetCRC32C is sample i's target's CRC32C.
func (ix *Index) TargetCRC32C(i uint32) uint32 { return ix.targets.crc[i] }

// VerifyTarget checks a target blob read for sample i: label, size and CRC32C. A mismatch
// wraps store.ErrCorrupt.
func (ix *Index) VerifyTarget(i uint32, b store.Blob) error {
	if err := ix.verifySizeLabel("target of sample", i, b, ix.TargetSize(i)); err != nil {
		return err
	}
	switch {
	case store.CRC32C(b.Data) != ix.targets.crc[i]:
		return fmt.Errorf("target of sample %s: blob checksum differs from the one stored at ingest (CRC32C): %w", ix.ids[i], store.ErrCorrupt)
	}
	return nil
}

// VerifyBlob checks what is cached for sample i (BlobSize bytes: its blob, then its
// target's, if any).
func (ix *Index) VerifyBlob(i uint32, data []byte) error {
	if int64(len(data)) != ix.BlobSize(i) {
		return fmt.Errorf("sample %s: %d bytes, want %d: %w", ix.ids[i], len(data), ix.BlobSize(i), store.ErrCorrupt)
	}
	n := ix.Size(i)
	if err := ix.Verify(i, store.Blob{Label: ix.Label(i), Data: data[:n]}); err != nil {
		return err
	}
	if ix.targets != nil {
		return ix.VerifyTarget(i, store.Blob{Label: ix.Label(i), Data: data[n:]})
	}
	return nil
}
