// Package attach makes a dataset of tables another tool wrote, without copying a blob: the
// CassandraDL layout (data_by_uuid(patch_id uuid PRIMARY KEY, label int, data blob) beside
// metadata_by_uuid) and the Cassandra DALI plugin's (data_train, metadata_train, ...). It
// programs against store.Attacher (the catalogue cassfs keeps in its own keyspace) and
// Tables (the user's tables, read only); it knows neither CQL nor FUSE.
//
// # What is found, what is named
//
// A data table's columns are found from its schema where it says enough: the id is its one
// uuid partition key, the image its blob column, the label an int column named label (none:
// one class). Flags name them where a table has several candidates (Columns); a table that
// cannot work is refused with an error that names the table, the column and what would
// work (findDataColumns). A metadata table is joined on the id: its label is checked
// against the data table's, a text column with one value per label names the classes
// (the plugin's or_label; else class_<label>), every other column becomes metadata.
//
// # Decisions
//
//   - Nothing is written into the user's tables; the catalogue records, per sample, the
//     table its blob is in and the blob's write time (the database's WRITETIME, in
//     microseconds), besides the size, SHA-256 and CRC32C every dataset has. A blob
//     changed afterwards no longer matches them and is never served (the mount's verify
//     counts it corrupt); attaching again reads only the blobs whose write time changed,
//     and rewrites only the rows whose label, name or metadata changed.
//   - Validate first. The schema, every metadata row and the id, label and write time of
//     every data row (no blob) are read and checked before the first write: a null blob, a
//     label that contradicts the metadata table, a duplicated id or name stops the attach
//     with nothing written. What only the blob shows (an empty or oversized blob, bytes
//     that are no image) stops it while the blobs are read; the caller drops the catalogue
//     of a first attach then (InputError), so nothing half-made stays.
//   - Visible when complete. The sources are the catalogue's last write
//     (store.Attacher.SetSources): a dataset is listed and mounted only from then on. An
//     interrupted attach resumes: the rows it recorded are not read again.
//   - Labels are the tables' own numbers, 0..max (a label without rows is an empty class),
//     so the label a blob read returns is the one the catalogue lists.
package attach

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/cassfs/cassfs/splits"
	"github.com/cassfs/cassfs/store"
	"github.com/google/uuid"
)

// Tables reads the tables other tools wrote. All methods are safe for concurrent use and
// have deadlines (store's "Concurrency and deadlines").
type Tables interface {
	// Table describes keyspace.name from the database's schema. A missing keyspace or
	// table wraps store.ErrNotFound.
	Table(ctx context.Context, keyspace, name string) (Table, error)
	// Rows calls fn for every row of t, in no order, one call at a time, with the values of
	// cols as text (nil for null). A column given as "writetime(c)" yields c's write time
	// in microseconds.
	Rows(ctx context.Context, t Table, cols []string, fn func(vals []*string) error) error
	// Blob reads the blob of one row of src; a missing row wraps store.ErrNotFound.
	Blob(ctx context.Context, src store.Source, id uuid.UUID) ([]byte, error)
}

// TableName is a table given on the command line: [SPLIT=]KEYSPACE.TABLE.
type TableName struct {
	Split, Keyspace, Table string
}

func (t TableName) String() string { return t.Keyspace + "." + t.Table }

// ParseTableName reads [SPLIT=]KEYSPACE.TABLE.
func ParseTableName(s string) (TableName, error) {
	var t TableName
	rest := s
	if sp, r, ok := strings.Cut(s, "="); ok {
		t.Split, rest = sp, r
		if err := splits.ValidName(sp); err != nil {
			return t, fmt.Errorf("%q: %v", s, err)
		}
	}
	ks, tb, ok := strings.Cut(rest, ".")
	if !ok || ks == "" || tb == "" || strings.Contains(tb, ".") {
		return t, fmt.Errorf("%q: want [SPLIT=]KEYSPACE.TABLE, e.g. train=imagenette.data_train", s)
	}
	t.Keyspace, t.Table = strings.ToLower(ks), strings.ToLower(tb)
	return t, nil
}

// SplitList is a split given as a list of sample ids (one uuid a line).
type SplitList struct {
	Name string
	IDs  []uuid.UUID
}

// Options configure an attach.
type Options struct {
	// Data are the tables holding the images; Meta the metadata tables joined with them.
	Data, Meta []TableName
	// Columns fixes columns of the data tables (and Name of the metadata tables).
	Columns Columns
	// MetaColumns fixes columns of the metadata tables.
	MetaColumns MetaColumns
	// Lists are splits to store besides those of the data tables.
	Lists []SplitList
	// MaxSize is the largest blob accepted (default ingest's, 15 MiB).
	MaxSize int64
	// Workers is the number of blobs read at once (default 16).
	Workers int
	// Rate, if positive, bounds the blob reads in bytes per second.
	Rate int64
	// OnPlan, if set, is called once the rows are known: how many blobs are to be read.
	OnPlan func(rows int, bytes int64)
	// Progress, if set, is called after every row (from several goroutines at once).
	Progress func(Progress)
	// OnSnapshot, if set, is called when the index snapshot begins.
	OnSnapshot func()
}

// Progress counts the rows done so far.
type Progress struct {
	Rows  int64
	Bytes int64 // of the blobs read
}

// InputError is a problem of the tables or of the options, not of the database: the
// catalogue of a first attach that ends with one is to be dropped.
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

func inputErr(format string, args ...any) error {
	return &InputError{fmt.Errorf(format, args...)}
}

// row is one data row, as the narrow scan read it and the metadata joined it.
type row struct {
	id      uuid.UUID
	src     int // index into Plan.data
	version int64
	label   int
	name    string // the file name if a column gives it, else "" (made from the id)
	meta    map[string]string
}

// Plan is a validated attach: every table's schema and row read, nothing written yet.
type Plan struct {
	opts    Options
	tables  Tables
	data    []dataTable
	meta    []metaTable
	rows    []row
	classes []string
	columns []string
	splits  []store.NewSplit
}

// Rows is the number of samples the dataset will have.
func (p *Plan) Rows() int { return len(p.rows) }

// Classes are the class names, indexed by label.
func (p *Plan) Classes() []string { return slices.Clone(p.classes) }

// Sources are the tables the dataset will read its blobs from.
func (p *Plan) Sources() []store.Source {
	var out []store.Source
	for _, d := range p.data {
		out = append(out, store.Source{Split: d.split, Keyspace: d.Keyspace, Table: d.Name, IDColumn: d.id, DataColumn: d.data, LabelColumn: d.label})
	}
	return out
}

// maxLabels bounds the labels: class i is a directory for every i up to the largest label.
const maxLabels = 1 << 16

// Prepare reads the schema of every table and every row but the blobs, and checks them.
func Prepare(ctx context.Context, tb Tables, opts Options) (*Plan, error) {
	if opts.MaxSize == 0 {
		opts.MaxSize = 15 << 20
	}
	if opts.Workers <= 0 {
		opts.Workers = 16
	}
	if len(opts.Data) == 0 {
		return nil, inputErr("no data table given (--data-table KEYSPACE.TABLE)")
	}
	p := &Plan{opts: opts, tables: tb}
	if err := p.findTables(ctx); err != nil {
		return nil, err
	}
	metaRows, err := p.readMeta(ctx)
	if err != nil {
		return nil, err
	}
	if err := p.readData(ctx, metaRows); err != nil {
		return nil, err
	}
	if err := p.makeClasses(metaRows); err != nil {
		return nil, err
	}
	if err := p.checkNames(); err != nil {
		return nil, err
	}
	if err := p.makeSplits(); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *Plan) findTables(ctx context.Context) error {
	seenSplit := map[string]bool{}
	for _, tn := range p.opts.Data {
		t, err := p.tables.Table(ctx, tn.Keyspace, tn.Table)
		if err != nil {
			return wrapInput(fmt.Errorf("data table %s: %w", tn, err))
		}
		d, err := findDataColumns(t, p.opts.Columns)
		if err != nil {
			return &InputError{err}
		}
		switch {
		case tn.Split != "":
			d.split = tn.Split
		case len(p.opts.Data) == 1:
			d.split = "" // the mount's own "all"
		default:
			d.split = strings.TrimPrefix(tn.Table, "data_")
			if err := splits.ValidName(d.split); err != nil {
				return inputErr("data table %s: no SPLIT= given and its name makes no split name: %v", tn, err)
			}
		}
		if d.split != "" && seenSplit[d.split] {
			return inputErr("data table %s: split %s is given twice; give each table a split of its own ([SPLIT=]KEYSPACE.TABLE)", tn, d.split)
		}
		seenSplit[d.split] = true
		p.data = append(p.data, d)
	}
	for _, tn := range p.opts.Meta {
		t, err := p.tables.Table(ctx, tn.Keyspace, tn.Table)
		if err != nil {
			return wrapInput(fmt.Errorf("metadata table %s: %w", tn, err))
		}
		want := p.opts.MetaColumns
		want.Label, want.Name = p.opts.Columns.Label, p.opts.Columns.Name
		m, err := findMetaColumns(t, want, p.data[0].id)
		if err != nil {
			return &InputError{err}
		}
		m.split = tn.Split
		p.meta = append(p.meta, m)
	}
	if n := p.opts.Columns.Name; n != "" {
		found := false
		for _, d := range p.data {
			found = found || d.name != ""
		}
		for _, m := range p.meta {
			found = found || m.name != ""
		}
		if !found {
			return inputErr("--name-column %s: no data or metadata table has a text column of that name", n)
		}
	}
	return nil
}

// wrapInput marks a missing table as bad input.
func wrapInput(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return &InputError{err}
	}
	return err
}

// metaRow is one metadata row.
type metaRow struct {
	table int
	label *int
	name  string
	class map[string]string // candidate class columns' values
	meta  map[string]string
}

func (p *Plan) readMeta(ctx context.Context) (map[uuid.UUID]*metaRow, error) {
	out := map[uuid.UUID]*metaRow{}
	for k, m := range p.meta {
		cols := []string{m.id}
		if m.label != "" {
			cols = append(cols, m.label)
		}
		if m.name != "" {
			cols = append(cols, m.name)
		}
		cols = append(cols, m.cols...)
		if m.class != "" {
			cols = append(cols, m.class)
		}
		err := p.tables.Rows(ctx, m.Table, cols, func(vals []*string) error {
			if vals[0] == nil {
				return nil // a row of another kind, without an id: not joined
			}
			id, err := uuid.Parse(*vals[0])
			if err != nil {
				return inputErr("metadata table %s: %s %q is no uuid", m.Table, m.id, *vals[0])
			}
			if prev, dup := out[id]; dup {
				return inputErr("metadata table %s: %s %s has two rows (also in %s); join needs one per id", m.Table, m.id, id, p.meta[prev.table].Table)
			}
			r := &metaRow{table: k, class: map[string]string{}, meta: map[string]string{}}
			i := 1
			if m.label != "" {
				if vals[i] != nil {
					l, err := strconv.Atoi(*vals[i])
					if err != nil {
						return inputErr("metadata table %s, row %s=%s: label %q is no integer", m.Table, m.id, id, *vals[i])
					}
					r.label = &l
				}
				i++
			}
			if m.name != "" {
				if vals[i] != nil {
					r.name = *vals[i]
				}
				i++
			}
			for _, c := range m.cols {
				if vals[i] != nil && *vals[i] != "" {
					r.meta[c] = *vals[i]
				}
				i++
			}
			if m.class != "" && vals[i] != nil {
				r.class[m.class] = *vals[i]
			}
			out[id] = r
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("read metadata table %s: %w", m.Table, err)
		}
	}
	return out, nil
}

func (p *Plan) readData(ctx context.Context, metaRows map[uuid.UUID]*metaRow) error {
	seen := map[uuid.UUID]int{}
	for k, d := range p.data {
		cols := []string{d.id, "writetime(" + d.data + ")"}
		if d.label != "" {
			cols = append(cols, d.label)
		}
		if d.name != "" {
			cols = append(cols, d.name)
		}
		cols = append(cols, d.meta...)
		err := p.tables.Rows(ctx, d.Table, cols, func(vals []*string) error {
			id, err := uuid.Parse(*vals[0])
			if err != nil {
				return inputErr("data table %s: id %q is no uuid", d.Table, *vals[0])
			}
			where := fmt.Sprintf("data table %s, row %s=%s", d.Table, d.id, id)
			if prev, dup := seen[id]; dup {
				return inputErr("%s: the id is also in data table %s; a sample lives in one table", where, p.data[prev].Table)
			}
			seen[id] = k
			if vals[1] == nil {
				return inputErr("%s: %s is null; every row needs its image", where, d.data)
			}
			r := row{id: id, src: k, meta: map[string]string{}}
			if r.version, err = strconv.ParseInt(*vals[1], 10, 64); err != nil {
				return fmt.Errorf("%s: write time %q: %w", where, *vals[1], err)
			}
			i := 2
			if d.label != "" {
				if vals[i] == nil {
					return inputErr("%s: %s is null; every row needs a label (or attach with --no-label, as one class)", where, d.label)
				}
				if r.label, err = strconv.Atoi(*vals[i]); err != nil || r.label < 0 || r.label >= maxLabels {
					return inputErr("%s: label %s is not in 0..%d", where, *vals[i], maxLabels-1)
				}
				i++
			}
			if d.name != "" {
				if vals[i] != nil {
					r.name = *vals[i]
				}
				i++
			}
			for _, c := range d.meta {
				if vals[i] != nil && *vals[i] != "" {
					r.meta[c] = *vals[i]
				}
				i++
			}
			if len(p.meta) > 0 {
				m, ok := metaRows[id]
				if !ok {
					return inputErr("%s: no row of that id in metadata table %s", where, metaTables(p.meta))
				}
				if m.label != nil && d.label != "" && *m.label != r.label {
					return inputErr("%s: label %d, but %d in metadata table %s", where, r.label, *m.label, p.meta[m.table].Table)
				}
				if r.name == "" {
					r.name = m.name
				}
				for c, v := range m.meta {
					if _, clash := r.meta[c]; clash && r.meta[c] != v {
						return inputErr("%s: column %s is %q here but %q in metadata table %s", where, c, r.meta[c], v, p.meta[m.table].Table)
					}
					r.meta[c] = v
				}
			}
			p.rows = append(p.rows, r)
			return nil
		})
		if err != nil {
			return fmt.Errorf("read data table %s: %w", d.Table, err)
		}
	}
	if len(p.rows) == 0 {
		return inputErr("the data tables (%s) hold no row", dataTables(p.data))
	}
	// A stable order: the report, the splits and the writes do not depend on the scan's.
	slices.SortFunc(p.rows, func(a, b row) int { return strings.Compare(a.id.String(), b.id.String()) })
	cols := map[string]bool{}
	for _, r := range p.rows {
		for c := range r.meta {
			cols[c] = true
		}
	}
	for c := range cols {
		if err := store.ValidColumnName(c); err != nil {
			return inputErr("column %s cannot be a metadata column: %v", c, err)
		}
	}
	p.columns = slices.Sorted(maps.Keys(cols))
	return nil
}

func metaTables(ms []metaTable) string {
	var s []string
	for _, m := range ms {
		s = append(s, m.Table.String())
	}
	return strings.Join(s, ", ")
}

func dataTables(ds []dataTable) string {
	var s []string
	for _, d := range ds {
		s = append(s, d.Table.String())
	}
	return strings.Join(s, ", ")
}
