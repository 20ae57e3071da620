package store

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"hash/crc32"
	"regexp"

	"github.com/google/uuid"
)

// MaxSplitName is the longest split name a store accepts.
const MaxSplitName = 255

// CheckSplits is what every backend's PutSplits checks before writing anything: at least one
// split, names of 1-MaxSplitName bytes, none given twice.
func CheckSplits(splits []NewSplit) error {
	if len(splits) == 0 {
		return errors.New("no splits to store")
	}
	seen := map[string]bool{}
	for _, s := range splits {
		if s.Name == "" || len(s.Name) > MaxSplitName {
			return fmt.Errorf("split name %q: want 1-%d bytes", s.Name, MaxSplitName)
		}
		if seen[s.Name] {
			return fmt.Errorf("split %q given twice", s.Name)
		}
		seen[s.Name] = true
	}
	return nil
}

// CheckPut is what every backend's Put checks before writing anything: the sample's size and
// checksum describe data, its target's target.
func CheckPut(s Sample, data, target []byte) error {
	switch t := s.Target; {
	case t == nil && target != nil:
		return fmt.Errorf("put sample %s (%s): target data without a Target", s.ID, s.Name)
	case t == nil:
	case target == nil:
		return fmt.Errorf("put sample %s (%s): a Target without its data", s.ID, s.Name)
	case ValidTargetExt(t.Ext) != nil:
		return fmt.Errorf("put sample %s (%s): %w", s.ID, s.Name, ValidTargetExt(t.Ext))
	case int64(len(target)) != t.Size || len(target) == 0:
		return fmt.Errorf("put sample %s (%s): target size %d does not match its data length %d (or is 0)", s.ID, s.Name, t.Size, len(target))
	case Checksum(target) != t.Checksum || CRC32C(target) != t.CRC32C:
		return fmt.Errorf("put sample %s (%s): target checksum does not match its data", s.ID, s.Name)
	}
	if int64(len(data)) != s.Size {
		return fmt.Errorf("put sample %s (%s): size %d does not match data length %d", s.ID, s.Name, s.Size, len(data))
	}
	if Checksum(data) != s.Checksum {
		return fmt.Errorf("put sample %s (%s): checksum does not match data", s.ID, s.Name)
	}
	if s.HasCRC32C && CRC32C(data) != s.CRC32C {
		return fmt.Errorf("put sample %s (%s): CRC32C does not match data", s.ID, s.Name)
	}
	return nil
}

// sampleNamespace is the UUID namespace of sample ids (a fixed random value; changing it
// changes every id).
var sampleNamespace = uuid.MustParse("6f1c7d0e-3b3a-4f55-9a36-3c2f8f1e0b7a")

// SampleID derives a sample's id from its dataset and its path relative to the dataset
// root, so that ingesting the same file twice writes the same rows (UUID version 5).
func SampleID(dataset, relPath string) uuid.UUID {
	return uuid.NewSHA1(sampleNamespace, []byte(dataset+"\x00"+relPath))
}

// TargetID is the id of the blob holding the target of sample id.
func TargetID(id uuid.UUID) uuid.UUID {
	return uuid.NewSHA1(id, []byte("target"))
}

// MaxTargetExt is the longest target extension, dot included.
const MaxTargetExt = 16

var extRE = regexp.MustCompile(`^\.[A-Za-z0-9_][A-Za-z0-9_.-]*$`)

// ValidTargetExt reports why ext cannot be a target file's extension, or nil.
func ValidTargetExt(ext string) error {
	if len(ext) > MaxTargetExt || !extRE.MatchString(ext) {
		return fmt.Errorf("target extension %q: want '.' and up to %d letters, digits, '_', '-' or '.'", ext, MaxTargetExt-1)
	}
	return nil
}

// Checksum is the checksum stored with every sample.
func Checksum(data []byte) [sha256.Size]byte { return sha256.Sum256(data) }

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// CRC32C is the CRC-32 (Castagnoli) of data, computed with the CPU's CRC32 instruction
// where there is one (SSE4.2, ARMv8): readers verify every blob with it, so it must cost
// little beside the copy of the data itself.
func CRC32C(data []byte) uint32 { return crc32.Checksum(data, castagnoli) }

// identRE is what every dataset and column name is (ValidDatasetName).
var identRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,47}$`)

// ValidDatasetName reports why name cannot be a dataset name on any backend, or nil.
//
// Dataset and column names are portable identifiers: lowercase letters, digits and
// underscores, starting with a letter, at most 48 characters, and no reserved word of a
// backend's query language. Every backend accepts exactly these, unquoted, so a name can
// never inject a query and a dataset keeps its names on any backend. A backend may refuse
// more dataset names of its own (Cassandra's system keyspaces).
func ValidDatasetName(name string) error {
	if !identRE.MatchString(name) {
		return fmt.Errorf("invalid dataset name %q: use 1-48 lowercase letters, digits or '_', starting with a letter", name)
	}
	if reservedWords[name] {
		return fmt.Errorf("invalid dataset name %q: a reserved word of the database's query language", name)
	}
	return nil
}

// BuiltinColumns are the metadata rows' own columns; user metadata may not use them.
var BuiltinColumns = []string{"id", "label", "name", "size", "checksum", "crc32c", "path", "data",
	"target_ext", "target_size", "target_checksum", "target_crc32c", "attach_source", "attach_version"}

// ValidColumnName reports why name cannot be a user metadata column, or nil.
func ValidColumnName(name string) error {
	if !identRE.MatchString(name) {
		return fmt.Errorf("invalid metadata column %q: use 1-48 lowercase letters, digits or '_', starting with a letter", name)
	}
	for _, b := range BuiltinColumns {
		if name == b {
			return fmt.Errorf("metadata column %q clashes with the built-in column of that name; rename it", name)
		}
	}
	if reservedWords[name] {
		return fmt.Errorf("metadata column %q is a reserved CQL word; rename it", name)
	}
	return nil
}

// reservedWords are the words a backend's query language reserves (CQL's reserved
// keywords), which cannot be unquoted identifiers.
var reservedWords = map[string]bool{}

func init() {
	for _, w := range []string{"add", "allow", "alter", "and", "apply", "asc", "authorize", "batch",
		"begin", "by", "columnfamily", "create", "delete", "desc", "describe", "drop", "entries",
		"execute", "from", "full", "grant", "if", "in", "index", "infinity", "insert", "into",
		"is", "keyspace", "limit", "materialized", "mbean", "mbeans", "modify", "nan", "norecursive",
		"not", "null", "of", "on", "or", "order", "primary", "rename", "replace", "revoke",
		"schema", "select", "set", "table", "to", "token", "truncate", "unlogged", "unset",
		"update", "use", "using", "view", "where", "with"} {
		reservedWords[w] = true
	}
}

// SameMeta reports whether two samples' metadata are the same, an empty value counting as
// absent (a store keeps none): what a writer compares before rewriting a sample.
func SameMeta(a, b map[string]string) bool {
	for k, v := range a {
		if v != b[k] {
			return false
		}
	}
	for k, v := range b {
		if v != a[k] {
			return false
		}
	}
	return true
}
