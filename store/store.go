// Package store is the interface the rest of cassfs programs against to keep image
// datasets — blobs and their metadata — in a database: the Store interface, its types, the
// errors and their kinds, the validation every backend shares, and (in storetest) the
// conformance suite every backend passes. It knows no database: the Apache Cassandra /
// ScyllaDB backend is store/cassandra, the in-memory fake for tests store/memstore.
//
// # What a dataset is
//
// A dataset holds, per sample, a blob (the encoded image) with its label beside it, so one
// read returns both, and a metadata row with everything a listing needs without touching
// blobs: label, original path "<class>/<file>", size, SHA-256 checksum, CRC32C and the user's
// metadata columns (patient_id, slide, ...). Besides: the class names (label i is the i-th
// class in bytewise order of the class directory names) and the stored splits.
//
// # Visibility and atomicity
//
// A blob and its metadata row are not written atomically (Cassandra, for one, fails logged
// batches over 50 KiB that span partitions). Put writes the blob first and the metadata
// row second: the row is the commit marker, and Scan only lists samples whose row exists.
// An interrupted ingest leaves at most an orphan blob, which is invisible and is
// overwritten by the next run (sample ids are derived from dataset and path, see SampleID).
// A set of splits, in contrast, is stored all at once or not at all (PutSplits).
//
// # The blob read
//
// A Store does many things — ingest writes, the catalogue (Scan, columns, labels), splits —
// but a mount's hot path makes one call: Get, a point read of one blob. That call is an
// interface of its own, BlobReader, which Store embeds: the prefetcher takes a BlobReader,
// wrappers around the read (store/hedge: a read not answered in time is sent once more)
// are BlobReaders over a BlobReader, and a new read path (another driver, or one of our
// own) can be dropped in alone and tested by itself against the blob-read part of the
// conformance suite (storetest.RunBlobReader).
//
// # Index snapshots
//
// A mount needs the whole catalogue (every metadata row) before it can list anything, and
// reading millions of rows is the slowest part of its start. So a writer that is done
// stores a snapshot of the catalogue (opaque bytes: package index's encoding) and a mount
// reads those few large values instead, if the snapshot is current. Current means: taken
// at the catalogue's Version, which every writer changes (MarkChanged) before its first
// write and after its last. A snapshot is stored under the version read before the scan
// it was built from, and a scan sees every write completed before it began. So a write the
// scan missed was made after the version was read, by a writer whose closing MarkChanged
// follows that write and makes the snapshot stale: a mount started after every writer
// has ended never starts from a snapshot that misses a write.
//
// # Concurrency and deadlines
//
// All methods of a Store are safe for concurrent use. Every call takes a context; a backend
// also applies its own per-request timeout, so no call blocks longer than that bound even
// with a background context.
//
// # Errors
//
// Errors wrap ErrNotFound when a sample, dataset or split does not exist, ErrExists when a
// split to create exists, and ErrCorrupt when stored data contradicts its metadata.
// Failures of the database wrap ErrUnavailable (no node could serve the request) or
// ErrTimeout (the backend's or the server's timeout) where the backend can tell; ErrorKind
// classifies any error into the kinds metrics and logs count by. Every error names the key
// it concerns.
//
// # Attached datasets
//
// A dataset may also be made from tables another tool wrote (the CassandraDL layout,
// data_by_uuid beside metadata_by_uuid; the Cassandra DALI plugin's data_train and
// metadata_train): cassfs keeps only the catalogue (metadata rows, class names, splits,
// the index snapshot) and reads every blob from the table it was found in. Such a store
// is an Attacher besides a Store; package attach makes the catalogue.
package store

import (
	"context"
	"crypto/sha256"
	"io"
	"time"

	"github.com/google/uuid"
)

// Sample is one sample's metadata row: what listings need, without the blob.
type Sample struct {
	ID       uuid.UUID
	Label    int
	Name     string            // path relative to the dataset root, "<class>/<file>"
	Size     int64             // blob length in bytes
	Checksum [sha256.Size]byte // SHA-256 of the blob: the sample's identity, shown to users
	// CRC32C (Castagnoli) of the blob, if HasCRC32C: what readers verify blobs with, at
	// memory speed. Samples ingested before it existed have none and are verified with
	// Checksum; ingesting them again adds it.
	CRC32C    uint32
	HasCRC32C bool
	Meta      map[string]string // user columns; absent or empty values are omitted
	// Target, if set, describes the sample's target file (a segmentation mask, a label
	// vector, boxes): a blob of its own, stored under TargetID(ID) with the sample's label.
	Target *Target
}

// Target describes a sample's target file.
type Target struct {
	Ext      string            // its extension, with the dot (".png", ".npy", ".json")
	Size     int64             // blob length in bytes
	Checksum [sha256.Size]byte // SHA-256 of the blob
	CRC32C   uint32            // CRC32C of the blob: what readers verify it with
}

// Blob is the content of one sample with its label.
type Blob struct {
	Label int
	Data  []byte
}

// BlobReader reads blobs: the one call on a mount's read path (see The blob read).
type BlobReader interface {
	// Get reads one blob: a sample's (its ID) or a sample's target (TargetID of its ID). A
	// missing blob wraps ErrNotFound, a context that ended wraps its error; every error
	// names id (see Errors).
	//
	// Get is safe for concurrent use. It returns once ctx ends, and a reader applies a
	// per-request deadline of its own besides (see Concurrency and deadlines).
	//
	// buf is a hint: if it is large enough, the reader may put the data there, or it may
	// return bytes of its own; callers check which. A reader writes into buf only within
	// its capacity and only until Get returns. The bytes returned are the caller's from
	// then on: the reader neither keeps nor reuses them.
	Get(ctx context.Context, id uuid.UUID, buf []byte) (Blob, error)
}

// Store is one dataset in the database. All methods are safe for concurrent use.
type Store interface {
	// BlobReader is the blob read: Get.
	BlobReader

	// Dataset names the dataset (the keyspace) this store reads and writes.
	Dataset() string
	// Created is when the dataset was made, or the zero time if that is not known (made
	// before cassfs recorded it).
	Created(ctx context.Context) (time.Time, error)

	// AddColumns makes sure the metadata rows have a text column for each name (see
	// ValidColumnName); existing columns are kept.
	AddColumns(ctx context.Context, names []string) error
	// Columns lists the user's metadata columns, sorted.
	Columns(ctx context.Context) ([]string, error)

	// SetLabels stores the class names; label i is names[i].
	SetLabels(ctx context.Context, names []string) error
	// Labels returns the class names indexed by label; empty if none were stored.
	Labels(ctx context.Context) ([]string, error)

	// Put stores a sample: the blob first, the target's blob second (if s.Target is set),
	// then its metadata row (the commit marker). s.Size, s.Checksum and s.CRC32C (if set)
	// must describe data, s.Target target. Meta keys must be existing columns.
	Put(ctx context.Context, s Sample, data, target []byte) error
	// Scan calls fn for every listed sample (every metadata row), in no particular order, from
	// one goroutine at a time. It stops at the first error from fn or the database. It sees
	// every Put that returned before it began.
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

	// MarkChanged records that the samples or the class names are about to change or have
	// changed: it gives the catalogue a new Version, so every snapshot taken before is
	// stale from then on. Writers call it before their first write and after their last
	// (see Index snapshots).
	MarkChanged(ctx context.Context) error
	// Version returns the catalogue's version, new after every MarkChanged; the zero UUID
	// if it was never marked.
	Version(ctx context.Context) (uuid.UUID, error)
	// PutSnapshot stores the bytes r yields as the snapshot of the catalogue taken at
	// version (a Version read before the scan the snapshot was built from), replacing the
	// one stored. The snapshot becomes visible only once all of it is written.
	PutSnapshot(ctx context.Context, version uuid.UUID, r io.Reader) error
	// Snapshot opens the stored snapshot if it was taken at the current version. Its
	// error wraps ErrNotFound if there is none or it is stale; the reader's, ErrCorrupt if
	// what is read contradicts what was written. Close the reader to release it.
	Snapshot(ctx context.Context) (io.ReadCloser, error)

	// Close releases connections. The Store must not be used afterwards.
	Close() error
}

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
