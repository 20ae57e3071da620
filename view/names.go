package view

import (
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/cassfs/cassfs/splits"
	"github.com/google/uuid"
)

// FileListName is the DALI file_list in every epoch directory.
const FileListName = "file_list.txt"

// ByUUIDName is the directory of every sample by id.
const ByUUIDName = "by-uuid"

// ClassNames returns the directory name of each label: the label's name when the names
// already sort bytewise in label order and are usable as names, otherwise "<label>_<name>"
// with a zero-padded label so that sorting gives label order.
func ClassNames(labels []string) []string {
	ok := true
	for i, l := range labels {
		if !usableName(l) || (i > 0 && labels[i-1] >= l) {
			ok = false
			break
		}
	}
	if ok {
		return labels
	}
	w := len(strconv.Itoa(max(len(labels)-1, 0)))
	out := make([]string, len(labels))
	for i, l := range labels {
		if !usableName(l) {
			l = "class"
		}
		out[i] = padInt(uint64(i), w) + "_" + l
	}
	return out
}

func usableName(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.HasPrefix(s, ".") && !strings.ContainsAny(s, "/\x00\n\r") &&
		strings.TrimRight(s, " \t") == s
}

func padInt(v uint64, width int) string {
	s := strconv.FormatUint(v, 10)
	if len(s) < width {
		s = strings.Repeat("0", width-len(s)) + s
	}
	return s
}

// ShardName is the directory of rank sh.Rank's part of a split among sh.Count ranks:
// "shard-<R>-of-<W>".
func ShardName(sh splits.Shard) string {
	return "shard-" + strconv.Itoa(sh.Rank) + "-of-" + strconv.Itoa(sh.Count)
}

// ParseShardName reads "shard-<R>-of-<W>" (canonical decimals, 0 <= R < W <= 2^20): rank
// R's part of every epoch of a split among W ranks, as --shard R/W shows it.
func ParseShardName(name string) (splits.Shard, bool) {
	rest, ok := strings.CutPrefix(name, "shard-")
	if !ok {
		return splits.Shard{}, false
	}
	r, w, ok := strings.Cut(rest, "-of-")
	if !ok {
		return splits.Shard{}, false
	}
	sh, err := splits.ParseShard(r + "/" + w)
	return sh, err == nil
}

// EpochName is the directory name of epoch n: "epoch-<n>".
func EpochName(n uint64) string { return "epoch-" + strconv.FormatUint(n, 10) }

// ParseEpochName reads "epoch-<N>" or "epoch-<N>@<K>" (the view resumed at position K), with
// N and K in canonical decimal form.
func ParseEpochName(name string) (n uint64, start uint32, ok bool) {
	s, ok := strings.CutPrefix(name, "epoch-")
	if !ok {
		return 0, 0, false
	}
	s, k, resumed := strings.Cut(s, "@")
	n, ok = parseDecimal(s)
	if !ok {
		return 0, 0, false
	}
	if !resumed {
		return n, 0, true
	}
	kk, ok := parseDecimal(k)
	if !ok || kk > 1<<32-1 {
		return 0, 0, false
	}
	return n, uint32(kk), true
}

func parseDecimal(s string) (uint64, bool) {
	if s == "" || (len(s) > 1 && s[0] == '0') || s[0] == '+' {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil
}

// ParseEntryPos reads the position prefix of an entry name whose prefix has width digits.
func ParseEntryPos(name string, width int) (uint32, bool) {
	if len(name) < width+2 || name[width] != '_' {
		return 0, false
	}
	var pos uint64
	for _, ch := range []byte(name[:width]) {
		if ch < '0' || ch > '9' {
			return 0, false
		}
		pos = pos*10 + uint64(ch-'0')
	}
	return uint32(pos), pos <= 1<<32-1
}

// EntryName is the file name of the sample at index k of the view's order: its position in
// the epoch (the same in a resumed view as in the whole one) and its name.
func (e *Epoch) EntryName(k uint32) string {
	return padInt(uint64(e.Start)+uint64(k), e.width) + "_" + e.set.ix.Name(e.Order[k])
}

// fileListState is one file list of an epoch view, computed on first use.
type fileListState struct {
	sizeOnce sync.Once
	size     int64 // of the file list
	lineOnce sync.Once
	lineEnd  []uint64 // lineEnd[k] = offset just past line k
}

// NameAt is the file name at index k of the view's order: the sample's, or (targets) its
// target's in the view's targets twin.
func (e *Epoch) NameAt(k uint32, targets bool) string {
	if targets {
		return e.TargetEntryName(k)
	}
	return e.EntryName(k)
}

// lineLen is the length of sample i's file_list line, which does not depend on its
// position.
func (e *Epoch) lineLen(i uint32, targets bool) int {
	ix := e.set.ix
	label := ix.Label(i)
	name := ix.NameLen(i)
	if targets {
		name = len(ix.TargetName(i))
	}
	return len(e.set.classNames[label]) + 1 + e.width + 1 + name + 1 + len(strconv.Itoa(label)) + 1
}

// FileListSize is the size of the view's file_list.txt (targets: of its .targets twin).
func (e *Epoch) FileListSize(targets bool) int64 {
	l := &e.lists[b2i(targets)]
	l.sizeOnce.Do(func() {
		var n int64
		for _, i := range e.Order {
			n += int64(e.lineLen(i, targets))
		}
		l.size = n
	})
	return l.size
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// ReadFileList returns up to n bytes of the view's file_list.txt (targets: of its
// .targets twin) from offset off on, generated from the view's order: "<class>/<entry>
// <label>\n" per position.
func (e *Epoch) ReadFileList(off int64, n int, targets bool) []byte {
	l := &e.lists[b2i(targets)]
	l.lineOnce.Do(func() {
		l.lineEnd = make([]uint64, len(e.Order))
		var end uint64
		for k, i := range e.Order {
			end += uint64(e.lineLen(i, targets))
			l.lineEnd[k] = end
		}
	})
	if off < 0 || len(l.lineEnd) == 0 || uint64(off) >= l.lineEnd[len(l.lineEnd)-1] {
		return nil
	}
	// The first line that ends after off.
	k, _ := slices.BinarySearch(l.lineEnd, uint64(off)+1)
	start := uint64(0)
	if k > 0 {
		start = l.lineEnd[k-1]
	}
	ix := e.set.ix
	buf := make([]byte, 0, n+256)
	for ; k < len(e.Order) && uint64(len(buf)) < uint64(off)-start+uint64(n); k++ {
		pos := uint32(k)
		label := ix.Label(e.Order[pos])
		buf = append(buf, e.set.classNames[label]...)
		buf = append(buf, '/')
		buf = append(buf, e.NameAt(pos, targets)...)
		buf = append(buf, ' ')
		buf = strconv.AppendInt(buf, int64(label), 10)
		buf = append(buf, '\n')
	}
	lo := uint64(off) - start
	hi := min(lo+uint64(n), uint64(len(buf)))
	return buf[lo:hi]
}

// FindUUIDName returns the sample whose by-uuid name is name.
func (s *Set) FindUUIDName(name string) (uint32, bool) {
	if len(name) < 36 {
		return 0, false
	}
	id, err := uuid.Parse(name[:36])
	if err != nil {
		return 0, false
	}
	i, ok := s.ix.Find(id)
	if !ok || s.UUIDName(i) != name {
		return 0, false
	}
	return i, true
}
