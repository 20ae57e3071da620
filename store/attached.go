package store

import (
	"context"
	"fmt"
	"slices"

	"github.com/google/uuid"
)

// Source is a table an attached dataset reads its blobs from: one row per sample, keyed by
// a uuid partition key (IDColumn), the encoded image in DataColumn and, unless LabelColumn
// is empty, the label beside it.
type Source struct {
	Split       string // the stored split the table's rows make ("all" for a single table)
	Keyspace    string
	Table       string
	IDColumn    string
	DataColumn  string
	LabelColumn string // "" if the table has none: every row has label 0
}

func (s Source) String() string { return s.Keyspace + "." + s.Table }

// Entry is what an attached dataset's catalogue records of a sample besides its metadata
// row: the source table holding its blob (an index into the dataset's sources) and the
// write time of that blob when it was read (the database's own, in microseconds), so that
// attaching again reads only the blobs written since.
type Entry struct {
	Source  int
	Version int64
}

// Attacher is a Store whose dataset can be attached: its blobs are read from Sources,
// never written. Its methods are safe for concurrent use, with deadlines as Store's.
type Attacher interface {
	Store
	// PutEntry stores a sample's metadata row and its Entry; no blob is written. s.Size,
	// s.Checksum and s.CRC32C describe the blob as it was read from sources[e.Source].
	PutEntry(ctx context.Context, s Sample, e Entry) error
	// Entries returns the Entry of every sample stored by PutEntry.
	Entries(ctx context.Context) (map[uuid.UUID]Entry, error)
	// SetSources records the tables the dataset reads from. It is the last write of an
	// attach: until it is done, the dataset is not listed and cannot be opened as complete.
	SetSources(ctx context.Context, sources []Source) error
	// Sources returns the tables the dataset reads from; none for a dataset made by ingest.
	Sources(ctx context.Context) ([]Source, error)
}

// CheckEntry reports why s cannot be stored by PutEntry, or nil.
func CheckEntry(s Sample, e Entry) error {
	switch {
	case s.Name == "":
		return fmt.Errorf("put entry %s: no name", s.ID)
	case s.Size <= 0:
		return fmt.Errorf("put entry %s (%s): size %d", s.ID, s.Name, s.Size)
	case s.Label < 0:
		return fmt.Errorf("put entry %s (%s): negative label %d", s.ID, s.Name, s.Label)
	case e.Source < 0:
		return fmt.Errorf("put entry %s (%s): negative source %d", s.ID, s.Name, e.Source)
	case s.Target != nil:
		return fmt.Errorf("put entry %s (%s): attached datasets have no targets", s.ID, s.Name)
	}
	return nil
}

// Table is a table as the database's schema describes it (in Cassandra,
// system_schema.columns): what attach finds a data or metadata table's columns from.
type Table struct {
	Keyspace, Name string
	Columns        []Column
}

// Column is one column of a Table.
type Column struct {
	Name     string
	Kind     string // "partition_key", "clustering", "regular" or "static"
	Type     string // the CQL type: "uuid", "int", "blob", "text", ...
	Position int    // its place in the partition key or among the clustering columns
}

func (t Table) String() string { return t.Keyspace + "." + t.Name }

// PartitionKey names the partition key's columns in order: what the token of a row is
// computed over.
func (t Table) PartitionKey() []string {
	var pk []Column
	for _, c := range t.Columns {
		if c.Kind == "partition_key" {
			pk = append(pk, c)
		}
	}
	slices.SortFunc(pk, func(a, b Column) int { return a.Position - b.Position })
	names := make([]string, len(pk))
	for k, c := range pk {
		names[k] = c.Name
	}
	return names
}

// Column returns the column named name, if the table has it.
func (t Table) Column(name string) (Column, bool) {
	i := slices.IndexFunc(t.Columns, func(c Column) bool { return c.Name == name })
	if i < 0 {
		return Column{}, false
	}
	return t.Columns[i], true
}
