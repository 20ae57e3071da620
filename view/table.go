package view

import (
	"bytes"
	"encoding/csv"
	"encoding/hex"
	"slices"
	"strconv"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/cassfs/cassfs/splits"
)

// SamplesName is the table of a split's samples, in the split's directory beside the epoch
// directories (never inside an epoch root, where readers take every entry for a class).
const SamplesName = "samples.csv"

// Table is a split's samples.csv: a header and one row per member (in canonical order, the
// whole split whatever the shard) with
//
//	uuid,class,label,file,name,size,sha256,<column>...
//
// class is the class directory's name, file the entry's name after its "<pos>_" prefix
// (so a file_list.txt line "<class>/<pos>_<file> <label>" joins on class and file), name
// the path at ingest, sha256 hex, then every metadata column of the dataset (empty where a
// sample has no value). It is generated on demand like file_list.txt: its size is
// computed once (one pass over the split), and a read formats only the rows it covers,
// found through the offsets of every tableBlock-th row — no copy of the table is kept.
type Table struct {
	set   *Set
	split *splits.Split

	once     sync.Once
	header   []byte
	blockEnd []uint64 // blockEnd[b] = offset just past rows [0, (b+1)*tableBlock)
	size     int64
}

const tableBlock = 256

// Table returns the samples table of a split of the set.
func (s *Set) Table(split string) (*Table, bool) {
	sp, ok := s.byName[split]
	if !ok {
		return nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tables == nil {
		s.tables = map[string]*Table{}
	}
	t := s.tables[split]
	if t == nil {
		t = &Table{set: s, split: sp}
		s.tables[split] = t
	}
	return t, true
}

func (t *Table) init() {
	t.once.Do(func() {
		var b bytes.Buffer
		w := csv.NewWriter(&b)
		w.Write(append([]string{"uuid", "class", "label", "file", "name", "size", "sha256"}, t.set.ix.Columns()...))
		w.Flush()
		t.header = slices.Clone(b.Bytes())
		end := uint64(len(t.header))
		var row []byte
		members := t.split.Members
		t.blockEnd = make([]uint64, 0, (len(members)+tableBlock-1)/tableBlock)
		for k, i := range members {
			row = t.appendRow(row[:0], i)
			end += uint64(len(row))
			if (k+1)%tableBlock == 0 || k == len(members)-1 {
				t.blockEnd = append(t.blockEnd, end)
			}
		}
		t.size = int64(end)
	})
}

// appendRow appends sample i's row, quoted as encoding/csv quotes (without its
// allocations: the first stat of a table of a million rows formats every row).
func (t *Table) appendRow(buf []byte, i uint32) []byte {
	ix := t.set.ix
	label := ix.Label(i)
	sum := ix.Checksum(i)
	id := ix.ID(i)
	buf = append(buf, id.String()...) // no byte of a uuid or hex needs quotes
	buf = append(buf, ',')
	buf = appendField(buf, t.set.classNames[label])
	buf = append(buf, ',')
	buf = strconv.AppendInt(buf, int64(label), 10)
	buf = append(buf, ',')
	buf = appendField(buf, ix.Name(i))
	buf = append(buf, ',')
	buf = appendField(buf, ix.Path(i))
	buf = append(buf, ',')
	buf = strconv.AppendInt(buf, ix.Size(i), 10)
	buf = append(buf, ',')
	buf = hex.AppendEncode(buf, sum[:])
	for c := range ix.NumColumns() {
		v, _ := ix.Meta(i, c)
		buf = append(buf, ',')
		buf = appendField(buf, v)
	}
	return append(buf, '\n')
}

// appendField appends one CSV field, quoted where encoding/csv.Writer quotes it: when it
// holds a comma, quote, CR or LF, starts with a space (unicode.IsSpace), or is `\.`.
func appendField[T string | []byte](buf []byte, f T) []byte {
	needs := false
	if len(f) > 0 {
		r, _ := utf8.DecodeRune([]byte(f[:min(len(f), utf8.UTFMax)]))
		needs = unicode.IsSpace(r) || string(f) == `\.`
	}
	for k := 0; k < len(f) && !needs; k++ {
		switch f[k] {
		case ',', '"', '\r', '\n':
			needs = true
		}
	}
	if !needs {
		return append(buf, f...)
	}
	buf = append(buf, '"')
	for k := 0; k < len(f); k++ {
		if f[k] == '"' {
			buf = append(buf, '"')
		}
		buf = append(buf, f[k])
	}
	return append(buf, '"')
}

// Size is the table's size in bytes.
func (t *Table) Size() int64 {
	t.init()
	return t.size
}

// Read returns up to n bytes of the table from offset off on.
func (t *Table) Read(off int64, n int) []byte {
	t.init()
	if off < 0 || off >= t.size || n <= 0 {
		return nil
	}
	var buf []byte
	start := uint64(0)
	k := 0 // first row in buf
	if uint64(off) < uint64(len(t.header)) {
		buf = append(buf, t.header...)
	} else {
		// The first block that ends after off.
		b, _ := slices.BinarySearch(t.blockEnd, uint64(off)+1)
		k = b * tableBlock
		start = uint64(len(t.header))
		if b > 0 {
			start = t.blockEnd[b-1]
		}
	}
	members := t.split.Members
	for ; k < len(members) && uint64(len(buf)) < uint64(off)-start+uint64(n); k++ {
		buf = t.appendRow(buf, members[k])
	}
	lo := uint64(off) - start
	hi := min(lo+uint64(n), uint64(len(buf)))
	return buf[lo:hi]
}
