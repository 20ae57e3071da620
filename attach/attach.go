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
	"sync"
	"sync/atomic"
	"time"

	"github.com/cassfs/cassfs/index"
	"github.com/cassfs/cassfs/splits"
	"github.com/cassfs/cassfs/store"
	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"
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

// makeClasses names the classes 0..max label: from the metadata's class column, named or
// found (classColumn), else class_<label>.
func (p *Plan) makeClasses(metaRows map[uuid.UUID]*metaRow) error {
	n := 0
	for _, r := range p.rows {
		n = max(n, r.label+1)
	}
	p.classes = make([]string, n)
	for l := range p.classes {
		p.classes[l] = fmt.Sprintf("class_%d", l)
	}
	// The candidates: the named class column, else every text column of the metadata.
	var cands []string
	named := ""
	for _, m := range p.meta {
		if m.class != "" {
			named = m.class
		}
	}
	if named != "" {
		cands = []string{named}
	} else {
		for _, m := range p.meta {
			for _, c := range m.cols {
				if col, _ := m.Column(c); slices.Contains(textTypes, col.Type) && !slices.Contains(cands, c) {
					cands = append(cands, c)
				}
			}
		}
	}
	if len(cands) == 0 {
		return nil
	}
	byLabel := map[string]map[int]string{}
	byValue := map[string]map[string]int{}
	conflict := map[string]bool{}
	for _, c := range cands {
		byLabel[c], byValue[c] = map[int]string{}, map[string]int{}
	}
	for _, r := range p.rows {
		m := metaRows[r.id]
		if m == nil {
			continue
		}
		for _, c := range cands {
			v, ok := m.class[c]
			if !ok {
				v, ok = m.meta[c]
			}
			if !ok || v == "" {
				conflict[c] = true
				continue
			}
			if w, seen := byLabel[c][r.label]; seen && w != v {
				conflict[c] = true
			}
			if l, seen := byValue[c][v]; seen && l != r.label {
				conflict[c] = true
			}
			byLabel[c][r.label], byValue[c][v] = v, r.label
		}
	}
	if named != "" && conflict[named] {
		return inputErr("--class-column %s does not name the classes: a label has several values, or none, or a value several labels", named)
	}
	col, err := classColumn(metaTables(p.meta), cands, conflict)
	if err != nil || col == "" {
		return wrapInput(err)
	}
	seen := map[string]int{}
	for l, v := range byLabel[col] {
		if err := usableName(v); err != nil {
			return inputErr("class name %q (column %s, label %d): %v", v, col, l, err)
		}
		p.classes[l] = v
	}
	for l, c := range p.classes {
		if prev, dup := seen[c]; dup {
			return inputErr("labels %d and %d are both named %q", prev, l, c)
		}
		seen[c] = l
	}
	// The class names are the directories; as metadata they would say the same again.
	for k := range p.rows {
		delete(p.rows[k].meta, col)
	}
	p.columns = slices.DeleteFunc(p.columns, func(c string) bool { return c == col })
	return nil
}

// extensions are what both DALI's fn.readers.file and torchvision's ImageFolder read.
var extensions = []string{".bmp", ".jpeg", ".jpg", ".pgm", ".png", ".ppm", ".tif", ".tiff", ".webp"}

// usableName reports why s cannot be a file or directory name the readers see, or nil.
func usableName(s string) error {
	switch {
	case s == "" || s == "." || s == "..":
		return errors.New("empty or a dot name")
	case strings.HasPrefix(s, "."):
		return errors.New("hidden (leading '.'): readers skip it or count it as a class")
	case strings.ContainsAny(s, "/\x00\n\r"):
		return errors.New("holds '/', a NUL or a line break")
	case strings.TrimRightFunc(s, func(r rune) bool { return r == ' ' || r == '\t' }) != s:
		return errors.New("ends in whitespace, which file_list.txt cannot carry")
	case len(s) > index.MaxNameLen:
		return fmt.Errorf("%d bytes, over %d", len(s), index.MaxNameLen)
	}
	return nil
}

func (p *Plan) checkNames() error {
	seen := map[string]uuid.UUID{}
	for _, r := range p.rows {
		if r.name == "" {
			continue
		}
		where := fmt.Sprintf("data table %s, row %s=%s", p.data[r.src].Table, p.data[r.src].id, r.id)
		if err := usableName(r.name); err != nil {
			return inputErr("%s: file name %q: %v", where, r.name, err)
		}
		dot := strings.LastIndexByte(r.name, '.')
		if dot < 0 || !slices.Contains(extensions, strings.ToLower(r.name[dot:])) {
			return inputErr("%s: file name %q has no extension the readers decode (%s)", where, r.name, strings.Join(extensions, " "))
		}
		full := p.classes[r.label] + "/" + r.name
		if other, dup := seen[full]; dup {
			return inputErr("%s: file name %s is also row %s's; names are unique within a class", where, full, other)
		}
		seen[full] = r.id
	}
	return nil
}

func (p *Plan) makeSplits() error {
	known := map[uuid.UUID]bool{}
	bySplit := map[string][]uuid.UUID{}
	for _, r := range p.rows {
		known[r.id] = true
		if s := p.data[r.src].split; s != "" {
			bySplit[s] = append(bySplit[s], r.id)
		}
	}
	for _, d := range p.data {
		if d.split != "" {
			p.splits = append(p.splits, store.NewSplit{Name: d.split, Members: bySplit[d.split]})
		}
	}
	for _, l := range p.opts.Lists {
		if _, clash := bySplit[l.Name]; clash {
			return inputErr("split list %s: a data table makes a split of that name", l.Name)
		}
		seen := map[uuid.UUID]bool{}
		for k, id := range l.IDs {
			switch {
			case !known[id]:
				return inputErr("split list %s, line %d: %s is in no data table", l.Name, k+1, id)
			case seen[id]:
				return inputErr("split list %s, line %d: %s is listed twice", l.Name, k+1, id)
			}
			seen[id] = true
		}
		bySplit[l.Name] = l.IDs
		p.splits = append(p.splits, store.NewSplit{Name: l.Name, Members: l.IDs})
	}
	for _, s := range p.splits {
		if len(s.Members) == 0 {
			return inputErr("split %s would be empty", s.Name)
		}
	}
	return nil
}

// Report says what an attach did.
type Report struct {
	Classes   []string
	Read      int64 // blobs read (new or changed rows)
	Updated   int64 // rows whose label, name or metadata changed, blob unchanged
	Unchanged int64
	Bytes     int64 // of the blobs read
	Splits    []string
	Elapsed   time.Duration
	Snapshot  error // why no index snapshot was stored, if none was
}

// Run makes or updates the catalogue in st (see the package doc's decisions).
func (p *Plan) Run(ctx context.Context, st store.Attacher) (Report, error) {
	start := time.Now()
	rep := Report{Classes: p.Classes()}
	for _, s := range p.splits {
		rep.Splits = append(rep.Splits, s.Name)
	}
	entries, err := st.Entries(ctx)
	if err != nil {
		return rep, err
	}
	old := map[uuid.UUID]store.Sample{}
	if err := st.Scan(ctx, func(s store.Sample) error { old[s.ID] = s; return nil }); err != nil {
		return rep, fmt.Errorf("list the catalogue of dataset %q: %w", st.Dataset(), err)
	}
	if err := st.MarkChanged(ctx); err != nil {
		return rep, err
	}
	if err := st.AddColumns(ctx, p.columns); err != nil {
		return rep, err
	}
	if err := st.SetLabels(ctx, p.classes); err != nil {
		return rep, err
	}
	if p.opts.OnPlan != nil {
		p.opts.OnPlan(len(p.rows), 0)
	}
	sources := p.Sources()
	pace := newPacer(p.opts.Rate)
	var done, bytes, read, updated, same atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(p.opts.Workers)
	for _, r := range p.rows {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error {
			n, res, err := p.attachRow(gctx, st, sources, r, entries, old, pace)
			switch res {
			case resRead:
				read.Add(1)
				bytes.Add(n)
			case resUpdated:
				updated.Add(1)
			case resSame:
				same.Add(1)
			}
			if p.opts.Progress != nil {
				p.opts.Progress(Progress{Rows: done.Add(1), Bytes: bytes.Load()})
			}
			return err
		})
	}
	fatal := g.Wait()
	rep.Read, rep.Updated, rep.Unchanged, rep.Bytes = read.Load(), updated.Load(), same.Load(), bytes.Load()
	marked := st.MarkChanged(context.WithoutCancel(ctx))
	if fatal != nil {
		rep.Elapsed = time.Since(start)
		return rep, fatal
	}
	if err := ctx.Err(); err != nil {
		return rep, fmt.Errorf("attach interrupted after %d of %d rows: %w (run the same attach again to resume)", done.Load(), len(p.rows), err)
	}
	if marked != nil {
		return rep, marked
	}
	if len(p.splits) > 0 {
		params := fmt.Sprintf(`{"attached": %q}`, dataTables(p.data))
		if err := st.PutSplits(ctx, p.splits, params, `{}`, true); err != nil {
			return rep, err
		}
	}
	rep.Elapsed = time.Since(start)
	if p.opts.OnSnapshot != nil {
		p.opts.OnSnapshot()
	}
	if _, _, err := index.StoreSnapshot(ctx, st); err != nil {
		rep.Snapshot = err // mounts scan instead
	}
	if err := st.SetSources(ctx, sources); err != nil {
		return rep, err
	}
	return rep, nil
}

type result int

const (
	resRead result = iota + 1
	resUpdated
	resSame
)

// attachRow records one row: from the catalogue if its blob is unchanged (same table, same
// write time), else from the blob, read once.
func (p *Plan) attachRow(ctx context.Context, st store.Attacher, sources []store.Source, r row, entries map[uuid.UUID]store.Entry,
	old map[uuid.UUID]store.Sample, pace *pacer) (int64, result, error) {
	s := store.Sample{ID: r.id, Label: r.label, Meta: r.meta}
	e := store.Entry{Source: r.src, Version: r.version}
	class := p.classes[r.label]
	where := fmt.Sprintf("data table %s, row %s=%s", p.data[r.src].Table, p.data[r.src].id, r.id)
	if o, ok := old[r.id]; ok && entries[r.id] == e && o.HasCRC32C {
		s.Size, s.Checksum, s.CRC32C, s.HasCRC32C = o.Size, o.Checksum, o.CRC32C, true
		s.Name = class + "/" + r.name
		if r.name == "" {
			_, file, _ := strings.Cut(o.Name, "/")
			s.Name = class + "/" + file
		}
		if o.Label == s.Label && o.Name == s.Name && maps.Equal(nonEmpty(o.Meta), nonEmpty(s.Meta)) {
			return 0, resSame, nil
		}
		return 0, resUpdated, st.PutEntry(ctx, s, e)
	}
	data, err := p.tables.Blob(ctx, sources[r.src], r.id)
	if errors.Is(err, store.ErrNotFound) {
		return 0, 0, inputErr("%s: deleted while attaching; run attach again", where)
	}
	if err != nil {
		return 0, 0, err
	}
	switch size := int64(len(data)); {
	case size == 0:
		return 0, 0, inputErr("%s: %s is empty (zero bytes)", where, p.data[r.src].data)
	case size > p.opts.MaxSize:
		return 0, 0, inputErr("%s: %s is %d bytes, over the size limit of %d (--max-size)", where, p.data[r.src].data, size, p.opts.MaxSize)
	}
	ext := Extension(data)
	if r.name == "" && ext == "" {
		return 0, 0, inputErr("%s: %s is no image the readers decode (it starts % x); give file names with --name-column to attach it anyway", where, p.data[r.src].data, data[:min(8, len(data))])
	}
	if err := pace.wait(ctx, int64(len(data))); err != nil {
		return 0, 0, err
	}
	s.Size, s.Checksum, s.CRC32C, s.HasCRC32C = int64(len(data)), store.Checksum(data), store.CRC32C(data), true
	s.Name = class + "/" + r.name
	if r.name == "" {
		s.Name = class + "/" + r.id.String() + ext
	}
	return s.Size, resRead, st.PutEntry(ctx, s, e)
}

func nonEmpty(m map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		if v != "" {
			out[k] = v
		}
	}
	return out
}

// pacer spaces blob reads so that they average at most rate bytes per second.
type pacer struct {
	rate int64
	mu   sync.Mutex
	next time.Time // guarded by mu; when the next read may start
}

func newPacer(rate int64) *pacer {
	if rate <= 0 {
		return nil
	}
	return &pacer{rate: rate}
}

// wait books n bytes and waits for their turn.
func (p *pacer) wait(ctx context.Context, n int64) error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	now := time.Now()
	if p.next.Before(now) {
		p.next = now
	}
	at := p.next
	p.next = p.next.Add(time.Duration(float64(n) / float64(p.rate) * float64(time.Second)))
	p.mu.Unlock()
	t := time.NewTimer(time.Until(at))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
