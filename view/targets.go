package view

import (
	"strings"

	"github.com/cassfs/cassfs/splits"
)

// TargetsSuffix names the targets twin of an epoch view: beside epoch-N/ (and epoch-N@K/),
// a dataset with targets shows epoch-N.targets/ with the same class directories, each
// sample's target under the same position prefix and its own file_list.txt, line for
// line in the same order. A position shows the same sample in both (one binding).
const TargetsSuffix = ".targets"

// TargetsKeyIn resolves the name of an epoch view's targets twin in a shard directory of
// split, a view of shard sh: "epoch-<N>.targets" or "epoch-<N>@<K>.targets". False if the
// dataset has no targets.
func (s *Set) TargetsKeyIn(split string, sh splits.Shard, name string) (Key, bool) {
	base, ok := strings.CutSuffix(name, TargetsSuffix)
	if !ok || !s.ix.HasTargets() {
		return Key{}, false
	}
	return s.EpochKeyIn(split, sh, base)
}

// HasTargets reports whether the dataset's samples have targets.
func (s *Set) HasTargets() bool { return s.ix.HasTargets() }

// TargetEntryName is the file name in the targets twin at index k of the view's order: the
// position, then the target's name (the sample's name with the target's extension).
func (e *Epoch) TargetEntryName(k uint32) string {
	return padInt(uint64(e.Start)+uint64(k), e.width) + "_" + e.set.ix.TargetName(e.Order[k])
}
