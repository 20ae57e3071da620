package view

import (
	"encoding/hex"
	"strconv"
	"strings"
)

// Extended attributes of a sample file: what a training script needs to know about the
// sample a name is bound to (under arrival binding, the one it was bound to), served from
// the index — no database call.
//
//	user.cassfs.uuid    the sample's id
//	user.cassfs.label   its label (the class's index)
//	user.cassfs.class   its class name, as ingested
//	user.cassfs.name    its path at ingest, "<class>/<file>"
//	user.cassfs.sha256  the SHA-256 of its content, hex
//	user.<column>       each metadata column it has a value in (patient_id, slide, ...)
//
// Column names are lowercase letters, digits and '_' (store.ValidColumnName), so they are
// valid attribute names and never clash with the user.cassfs.* ones.
const attrPrefix = "user."

var builtinAttrs = []string{"user.cassfs.uuid", "user.cassfs.label", "user.cassfs.class", "user.cassfs.name", "user.cassfs.sha256"}

// AttrNames lists sample i's extended attribute names.
func (s *Set) AttrNames(i uint32) []string {
	names := append([]string(nil), builtinAttrs...)
	for c, col := range s.ix.Columns() {
		if _, ok := s.ix.Meta(i, c); ok {
			names = append(names, attrPrefix+col)
		}
	}
	return names
}

// Attr returns sample i's extended attribute name, or false if it has none of that name.
func (s *Set) Attr(i uint32, name string) ([]byte, bool) {
	ix := s.ix
	switch name {
	case "user.cassfs.uuid":
		return []byte(ix.ID(i).String()), true
	case "user.cassfs.label":
		return strconv.AppendInt(nil, int64(ix.Label(i)), 10), true
	case "user.cassfs.class":
		return []byte(ix.Labels()[ix.Label(i)]), true
	case "user.cassfs.name":
		return []byte(ix.Path(i)), true
	case "user.cassfs.sha256":
		sum := ix.Checksum(i)
		return hex.AppendEncode(nil, sum[:]), true
	}
	if !strings.HasPrefix(name, attrPrefix) {
		return nil, false
	}
	if c, ok := ix.Column(name[len(attrPrefix):]); ok {
		return ix.Meta(i, c)
	}
	return nil, false
}
