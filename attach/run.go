package attach

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cassfs/cassfs/index"
	"github.com/cassfs/cassfs/store"
	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"
)

// Report says what an attach did.
type Report struct {
	Classes   []string
	Read      int64 // blobs read (new or changed rows)
	Updated   int64 // rows whose label, name or metadata changed, blob unchanged
	Unchanged int64
	Bytes     int64 // of the blobs read
	Splits    []string
	Sources   []string // the tables read
	Elapsed   time.Duration
	Snapshot  error // why no index snapshot was stored, if none was
}

// Run makes or updates the catalogue in st (see the package doc's decisions).
func (p *Plan) Run(ctx context.Context, st store.Attacher) (Report, error) {
	start := time.Now()
	rep := Report{Classes: p.Classes()}
	for _, s := range p.Sources() {
		rep.Sources = append(rep.Sources, s.String())
	}
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
		if o.Label == s.Label && o.Name == s.Name && store.SameMeta(o.Meta, s.Meta) {
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

// Attach prepares and runs an attach into st, reading the tables through tb, and prints
// its report on out when it is done. The catalogue of a dataset never completed before is
// dropped when bad input stops it (st is dropped if it can be: a Drop(ctx) method), so
// nothing half-made stays.
func Attach(ctx context.Context, st store.Attacher, tb Tables, opts Options, out io.Writer) (Report, error) {
	before, err := st.Sources(ctx)
	if err != nil {
		return Report{}, err
	}
	fail := func(err error) error {
		var in *InputError
		dropper, ok := st.(interface{ Drop(context.Context) error })
		switch {
		case len(before) > 0:
			return err
		case errors.As(err, &in) && ok:
			if derr := dropper.Drop(context.WithoutCancel(ctx)); derr != nil {
				return fmt.Errorf("%w (and its unfinished catalogue could not be removed: %v)", err, derr)
			}
			return fmt.Errorf("%w: dataset %s not made", err, st.Dataset())
		}
		return fmt.Errorf("%w (dataset %s is not made yet; run the same attach again to resume)", err, st.Dataset())
	}
	plan, err := Prepare(ctx, tb, opts)
	if err != nil {
		return Report{}, fail(err)
	}
	rep, err := plan.Run(ctx, st)
	if err != nil {
		return rep, fail(err)
	}
	rep.Print(out, st.Dataset())
	return rep, nil
}

// Print writes the report as cassfs dataset attach shows it.
func (rep Report) Print(w io.Writer, dataset string) {
	fmt.Fprintf(w, "dataset %s attached to %s: %d samples in %d classes; %d blobs read (%.1f MB), %d rows updated, %d unchanged; %.1fs\n",
		dataset, strings.Join(rep.Sources, ", "), rep.Read+rep.Updated+rep.Unchanged, len(rep.Classes), rep.Read, float64(rep.Bytes)/1e6, rep.Updated, rep.Unchanged, rep.Elapsed.Seconds())
	if len(rep.Splits) > 0 {
		fmt.Fprintf(w, "splits: %s\n", strings.Join(rep.Splits, ", "))
	}
	if rep.Snapshot != nil {
		fmt.Fprintf(w, "index snapshot not stored: %v\n(mounts will scan the catalogue instead; `cassfs dataset snapshot %s` stores one)\n", rep.Snapshot, dataset)
	}
}

// ReadSplitList reads SPLIT=FILE: the file holds one uuid a line; blank lines and lines
// starting with # are skipped.
func ReadSplitList(arg string) (SplitList, error) {
	name, path, ok := strings.Cut(arg, "=")
	if !ok || name == "" || path == "" {
		return SplitList{}, fmt.Errorf("%q: want SPLIT=FILE", arg)
	}
	f, err := os.Open(path)
	if err != nil {
		return SplitList{}, err
	}
	defer f.Close()
	sl := SplitList{Name: name}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		id, err := uuid.Parse(line)
		if err != nil {
			return sl, fmt.Errorf("%s, line %d: %q is no uuid", path, n, line)
		}
		sl.IDs = append(sl.IDs, id)
	}
	return sl, sc.Err()
}

// Parse sets o.Data, o.Meta and o.Lists from the command line's --data-table,
// --metadata-table and --split-list values.
func (o *Options) Parse(data, meta, lists []string) error {
	for _, s := range data {
		t, err := ParseTableName(s)
		if err != nil {
			return fmt.Errorf("--data-table %w", err)
		}
		o.Data = append(o.Data, t)
	}
	if len(o.Data) == 0 {
		return errors.New("give at least one --data-table [SPLIT=]KEYSPACE.TABLE")
	}
	for _, s := range meta {
		t, err := ParseTableName(s)
		if err != nil {
			return fmt.Errorf("--metadata-table %w", err)
		}
		o.Meta = append(o.Meta, t)
	}
	for _, l := range lists {
		sl, err := ReadSplitList(l)
		if err != nil {
			return fmt.Errorf("--split-list %w", err)
		}
		o.Lists = append(o.Lists, sl)
	}
	return nil
}
