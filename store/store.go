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
//   - splits((bucket), name): one row per stored split (its size, chunk count, a SHA-256 of
//     its members and the generation holding them), all in one small partition so that a
//     set of splits is created or replaced by one atomic, isolated batch (and "create only
//     if absent" by one lightweight transaction). split_sets(id): the parameters and report
//     of the splits made together. split_chunks((generation, chunk)): a split's member ids,
//     packed 16 bytes each, SplitChunk ids per partition, so a split of millions of samples
//     makes no huge partition. Chunks are written before the rows that point to them;
//     replaced or deleted chunks are removed after.
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
	"time"

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
	// Get reads one blob. buf, if large enough, may be used for the data. A missing blob
	// wraps ErrNotFound.
	Get(ctx context.Context, id uuid.UUID, buf []byte) (Blob, error)
	// Scan calls fn for every listed sample (every metadata row), in no particular order, from
	// one goroutine at a time. It stops at the first error from fn or the database.
	Scan(ctx context.Context, fn func(Sample) error) error

	// PutSplits stores splits made together, with the parameters they were made with and
	// the report of what was achieved (both opaque text, JSON by convention). Either all of
	// them become visible or none: a failure leaves no split changed. Unless replace is set,
	// a name that already exists fails the call with ErrExists and nothing is written.
	PutSplits(ctx context.Context, splits []NewSplit, params, report string, replace bool) error
	// Splits lists the stored splits, sorted by name.
	Splits(ctx context.Context) ([]SplitInfo, error)
	// SplitMembers returns a split's sample ids in the order they were stored. A missing
	// split wraps ErrNotFound; members that do not add up to what was stored wrap
	// ErrCorrupt.
	SplitMembers(ctx context.Context, name string) ([]uuid.UUID, error)
	// DeleteSplits removes splits; all named ones must exist (else ErrNotFound, and
	// nothing is deleted).
	DeleteSplits(ctx context.Context, names []string) error

	// Close releases connections. The Store must not be used afterwards.
	Close() error
}

// ErrExists is wrapped by errors for things that exist already (splits).
var ErrExists = errors.New("already exists")

// NewSplit is a split to store: a name and its members.
type NewSplit struct {
	Name    string
	Members []uuid.UUID
}

// SplitInfo describes a stored split.
type SplitInfo struct {
	Name    string
	Size    int       // members
	Set     uuid.UUID // splits stored by one PutSplits call share it
	Created time.Time
	Params  string // as given to PutSplits
	Report  string // as given to PutSplits
}

// MaxSplitName is the longest split name a store accepts.
const MaxSplitName = 255

func checkSplits(splits []NewSplit) error {
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

// splitDigest is the checksum stored with a split's members, to detect a torn or lost chunk.
func splitDigest(ids []uuid.UUID) []byte {
	h := sha256.New()
	for _, id := range ids {
		h.Write(id[:])
	}
	return h.Sum(nil)
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

// Error kinds, for metrics and logs (ErrorKind).
const (
	KindTimeout     = "timeout"     // the deadline passed
	KindUnavailable = "unavailable" // no node could serve the request
	KindMissing     = "missing"     // listed, but not in the blob table
	KindCorrupt     = "corrupt"     // blob contradicts its metadata (size, label, checksum)
	KindCanceled    = "canceled"    // the caller gave up
	KindOther       = "other"
)

// ErrorKind classifies an error of a Store call.
func ErrorKind(err error) string {
	var netErr interface{ Timeout() bool }
	switch {
	case errors.Is(err, ErrCorrupt):
		return KindCorrupt
	case errors.Is(err, ErrNotFound):
		return KindMissing
	case errors.Is(err, context.Canceled):
		return KindCanceled
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout(), isTimeout(err):
		return KindTimeout
	case isUnavailable(err):
		return KindUnavailable
	}
	return KindOther
}
