// Package store keeps image datasets — blobs and their metadata — in Apache Cassandra or
// ScyllaDB, behind a small interface that the rest of cassfs programs against.
//
// # Data model
//
// A dataset is a keyspace. It holds three tables:
//
//   - blobs(id uuid PRIMARY KEY, label int, data blob): the encoded image with its label beside
//     it, so one point read returns both.
//   - samples(id uuid PRIMARY KEY, label int, name text, size bigint, checksum blob, <user
//     columns>): everything a listing needs without touching blobs. name is the original path
//     relative to the dataset root ("<class>/<file>"); checksum is the SHA-256 of the blob. The
//     user's metadata columns (patient_id, slide, ...) are text columns added on demand.
//   - labels(label int PRIMARY KEY, name text): the class names; label i is the i-th class in
//     bytewise order of the class directory names.
//
// # Visibility and atomicity
//
// Cassandra fails logged batches over 50 KiB that span partitions, so a blob and its metadata
// row cannot be written atomically. Put writes the blob first and the metadata row second:
// the metadata row is the commit marker, and Scan only lists samples whose row exists. An
// interrupted ingest leaves at most an orphan blob, which is invisible and is overwritten by
// the next run (sample ids are derived from dataset and path, see SampleID).
//
// # Concurrency and deadlines
//
// All methods of a Store are safe for concurrent use. Every call takes a context; the
// Cassandra implementation also applies its own per-request timeout, so no call blocks
// longer than that bound even with a background context. Errors wrap ErrNotFound when a
// sample or dataset does not exist; everything else is a failure of the database or the
// request, wrapped with the key it concerns.
package store

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"regexp"

	"github.com/google/uuid"
)

// ErrNotFound is wrapped by errors for samples, datasets or labels that do not exist.
var ErrNotFound = errors.New("not found")

// ErrCorrupt is wrapped by errors for stored data that contradicts its metadata (size,
// label or checksum).
var ErrCorrupt = errors.New("stored data is corrupt")

// Sample is one sample's metadata row: what listings need, without the blob.
type Sample struct {
	ID       uuid.UUID
	Label    int
	Name     string // path relative to the dataset root, "<class>/<file>"
	Size     int64  // blob length in bytes
	Checksum [sha256.Size]byte
	Meta     map[string]string // user columns; absent or empty values are omitted
}

// Blob is the content of one sample with its label.
type Blob struct {
	Label int
	Data  []byte
}

// Store is one dataset in the database. All methods are safe for concurrent use.
type Store interface {
	// Dataset names the dataset (the keyspace) this store reads and writes.
	Dataset() string

	// AddColumns makes sure the samples table has a text column for each name (see
	// ValidColumnName); existing columns are kept.
	AddColumns(ctx context.Context, names []string) error
	// Columns lists the user's metadata columns, sorted.
	Columns(ctx context.Context) ([]string, error)

	// SetLabels stores the class names; label i is names[i].
	SetLabels(ctx context.Context, names []string) error
	// Labels returns the class names indexed by label; empty if none were stored.
	Labels(ctx context.Context) ([]string, error)

	// Put stores a sample: the blob first, then its metadata row (the commit marker). s.Size
	// and s.Checksum must describe data. Meta keys must be existing columns.
	Put(ctx context.Context, s Sample, data []byte) error
	// Get reads one blob. buf, if large enough, is reused for the data. A missing blob
	// wraps ErrNotFound.
	Get(ctx context.Context, id uuid.UUID, buf []byte) (Blob, error)
	// Scan calls fn for every listed sample (every metadata row), in no particular order, from
	// one goroutine at a time. It stops at the first error from fn or the database.
	Scan(ctx context.Context, fn func(Sample) error) error

	// Close releases connections. The Store must not be used afterwards.
	Close() error
}

// sampleNamespace is the UUID namespace of sample ids (a fixed random value; changing it
// changes every id).
var sampleNamespace = uuid.MustParse("6f1c7d0e-3b3a-4f55-9a36-3c2f8f1e0b7a")

// SampleID derives a sample's id from its dataset and its path relative to the dataset
// root, so that ingesting the same file twice writes the same rows (UUID version 5).
func SampleID(dataset, relPath string) uuid.UUID {
	return uuid.NewSHA1(sampleNamespace, []byte(dataset+"\x00"+relPath))
}

// Checksum is the checksum stored with every sample.
func Checksum(data []byte) [sha256.Size]byte { return sha256.Sum256(data) }

var identRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,47}$`)

// ValidDatasetName reports why name cannot be a dataset (keyspace) name, or nil. Names are
// lowercase letters, digits and underscores, starting with a letter, at most 48 characters:
// Cassandra's unquoted identifiers, so a name can never inject CQL.
func ValidDatasetName(name string) error {
	if !identRE.MatchString(name) {
		return fmt.Errorf("invalid dataset name %q: use 1-48 lowercase letters, digits or '_', starting with a letter", name)
	}
	if reservedKeyspace(name) {
		return fmt.Errorf("invalid dataset name %q: reserved by Cassandra", name)
	}
	return nil
}

// BuiltinColumns are the samples table's own columns; user metadata may not use them.
var BuiltinColumns = []string{"id", "label", "name", "size", "checksum", "path", "data"}

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
	if cqlReserved[name] {
		return fmt.Errorf("metadata column %q is a reserved CQL word; rename it", name)
	}
	return nil
}

func reservedKeyspace(name string) bool {
	switch name {
	case "system", "system_auth", "system_schema", "system_distributed", "system_traces",
		"system_views", "system_virtual_schema", "system_cluster_metadata":
		return true
	}
	return cqlReserved[name]
}

// cqlReserved holds CQL's reserved keywords, which cannot be unquoted identifiers.
var cqlReserved = map[string]bool{}

func init() {
	for _, w := range []string{"add", "allow", "alter", "and", "apply", "asc", "authorize", "batch",
		"begin", "by", "columnfamily", "create", "delete", "desc", "describe", "drop", "entries",
		"execute", "from", "full", "grant", "if", "in", "index", "infinity", "insert", "into",
		"is", "keyspace", "limit", "materialized", "mbean", "mbeans", "modify", "nan", "norecursive",
		"not", "null", "of", "on", "or", "order", "primary", "rename", "replace", "revoke",
		"schema", "select", "set", "table", "to", "token", "truncate", "unlogged", "unset",
		"update", "use", "using", "view", "where", "with"} {
		cqlReserved[w] = true
	}
}
