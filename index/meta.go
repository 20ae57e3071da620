package index

import (
	"math"
	"slices"
	"strings"
)

// The index keeps every sample's metadata (the user's columns: patient_id, slide, x, ...) so
// that the mount can show it (extended attributes, samples.csv) without a database call.
// A column is stored dictionary-encoded: per sample a 4-byte reference to the column's
// distinct values, each value's bytes once. Metadata of this kind repeats a lot (a patient
// has thousands of tiles, coordinates take a few hundred values), so a column costs about 4
// bytes per sample; a column unique to every sample costs its bytes and 8 more. Nothing
// per sample is a Go string or map: the garbage collector sees a few slices per column.

// metaColumn is one user metadata column of an index.
type metaColumn struct {
	name string
	ref  []uint32 // sample i's value is value ref[i]-1; 0: none
	off  []uint32 // value v is vals[off[v]:off[v+1]]
	vals []byte
}

func (c *metaColumn) value(i uint32) ([]byte, bool) {
	r := c.ref[i]
	if r == 0 {
		return nil, false
	}
	return c.vals[c.off[r-1]:c.off[r]], true
}

// metaBuilder interns a column's values while samples are added (in scan order).
type metaBuilder struct {
	metaColumn
	ids map[string]uint32 // value → reference (1-based)
}

// add records sample k's value of the column.
func (m *metaBuilder) add(k int, v string) bool {
	r, ok := m.ids[v]
	if !ok {
		if len(m.vals)+len(v) > math.MaxUint32 || len(m.off) == math.MaxUint32 {
			return false
		}
		if len(m.off) == 0 {
			m.off = append(m.off, 0)
		}
		m.vals = append(m.vals, v...)
		m.off = append(m.off, uint32(len(m.vals)))
		r = uint32(len(m.off) - 1)
		m.ids[v] = r
	}
	if k >= len(m.ref) {
		m.ref = slices.Grow(m.ref, k+1-len(m.ref))[:k+1]
	}
	m.ref[k] = r
	return true
}

// done returns the column with sample references in canonical order: order[j] is the
// scan position of canonical sample j.
func (m *metaBuilder) done(order func(j int) int, n int) metaColumn {
	c := metaColumn{name: m.name, off: slices.Clip(m.off), vals: slices.Clip(m.vals), ref: make([]uint32, n)}
	for j := range n {
		if k := order(j); k < len(m.ref) {
			c.ref[j] = m.ref[k]
		}
	}
	return c
}

// Columns lists the user metadata columns that at least one sample has a value in, sorted.
func (ix *Index) Columns() []string {
	out := make([]string, len(ix.meta))
	for c := range ix.meta {
		out[c] = ix.meta[c].name
	}
	return out
}

// Meta is sample i's value of metadata column c (an index into Columns), and whether it has
// one. The slice is the index's own: it must not be modified.
func (ix *Index) Meta(i uint32, c int) ([]byte, bool) {
	return ix.meta[c].value(i)
}

// metaBytes is what the metadata columns take in memory.
func (ix *Index) metaBytes() int64 {
	var n int64
	for _, c := range ix.meta {
		n += int64(len(c.ref)+len(c.off))*4 + int64(len(c.vals))
	}
	return n
}

// Column returns the index (into Columns) of the metadata column called name.
func (ix *Index) Column(name string) (int, bool) {
	return slices.BinarySearchFunc(ix.meta, name, func(c metaColumn, name string) int { return strings.Compare(c.name, name) })
}

// NumColumns is len(ix.Columns()).
func (ix *Index) NumColumns() int { return len(ix.meta) }
