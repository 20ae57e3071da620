package attach

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cassfs/cassfs/internal/testkit"
	"github.com/cassfs/cassfs/store"
	"github.com/cassfs/cassfs/store/memstore"
	"github.com/google/uuid"
)

// fakeTables are tables another tool wrote, in memory.
type fakeTables struct {
	tables map[string]Table
	rows   map[string][]map[string]string // "ks.t" → rows: column (or "writetime(c)") → value; absent: null
	blobs  map[string]map[uuid.UUID][]byte
	reads  atomic.Int64
}

func (f *fakeTables) Table(ctx context.Context, ks, name string) (Table, error) {
	t, ok := f.tables[ks+"."+name]
	if !ok {
		return t, fmt.Errorf("keyspace %s has no table %s: %w", ks, name, store.ErrNotFound)
	}
	return t, nil
}

func (f *fakeTables) Rows(ctx context.Context, t Table, cols []string, fn func([]*string) error) error {
	for _, r := range f.rows[t.String()] {
		vals := make([]*string, len(cols))
		for k, c := range cols {
			if v, ok := r[c]; ok {
				vals[k] = &v
			}
		}
		if err := fn(vals); err != nil {
			return err
		}
	}
	return nil
}

func (f *fakeTables) Blob(ctx context.Context, src store.Source, id uuid.UUID) ([]byte, error) {
	f.reads.Add(1)
	b, ok := f.blobs[src.String()][id]
	if !ok {
		return nil, store.ErrNotFound
	}
	return b, nil
}

var (
	jpeg = []byte("\xff\xd8\xff\xe0 a jpeg")
	png  = []byte("\x89PNG\r\n\x1a\n a png")
)

// pluginTables is the DALI plugin's layout: data_train and data_val with their metadata
// tables, two classes named by or_label.
func pluginTables(t *testing.T) (*fakeTables, map[string][]uuid.UUID) {
	f := &fakeTables{tables: map[string]Table{}, rows: map[string][]map[string]string{}, blobs: map[string]map[uuid.UUID][]byte{}}
	ids := map[string][]uuid.UUID{}
	for _, split := range []string{"train", "val"} {
		f.tables["ks.data_"+split] = table("data_"+split, []string{"id uuid", "label int", "data blob"})
		f.tables["ks.metadata_"+split] = table("metadata_"+split, []string{"id uuid", "label int", "or_label text", "or_split text"})
		f.blobs["ks.data_"+split] = map[uuid.UUID][]byte{}
		for k := range 6 {
			id := uuid.New()
			ids[split] = append(ids[split], id)
			label := k % 2
			data := jpeg
			if k == 5 {
				data = png
			}
			f.blobs["ks.data_"+split][id] = data
			f.rows["ks.data_"+split] = append(f.rows["ks.data_"+split], map[string]string{
				"id": id.String(), "label": fmt.Sprint(label), "writetime(data)": "1000"})
			f.rows["ks.metadata_"+split] = append(f.rows["ks.metadata_"+split], map[string]string{
				"id": id.String(), "label": fmt.Sprint(label), "or_label": []string{"tench", "church"}[label], "or_split": split})
		}
	}
	return f, ids
}

func pluginOptions() Options {
	return Options{
		Data: []TableName{{Split: "train", Keyspace: "ks", Table: "data_train"}, {Split: "val", Keyspace: "ks", Table: "data_val"}},
		Meta: []TableName{{Keyspace: "ks", Table: "metadata_train"}, {Keyspace: "ks", Table: "metadata_val"}},
	}
}

func attachAll(t *testing.T, f *fakeTables, st *memstore.Store, opts Options) Report {
	t.Helper()
	p, err := Prepare(context.Background(), f, opts)
	if err != nil {
		t.Fatalf("prepare: %v", err)
	}
	rep, err := p.Run(context.Background(), st)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return rep
}

func TestAttachThePluginsTables(t *testing.T) {
	f, ids := pluginTables(t)
	st := memstore.New("plugin", memstore.Options{})
	rep := attachAll(t, f, st, pluginOptions())
	ctx := context.Background()

	if got, want := rep.Read, int64(12); got != want {
		t.Errorf("got %d blobs read, want %d", got, want)
	}
	labels := testkit.Must(st.Labels(ctx))(t)
	if want := []string{"tench", "church"}; !slices.Equal(labels, want) {
		t.Errorf("got classes %q, want %q (from or_label)", labels, want)
	}
	cols := testkit.Must(st.Columns(ctx))(t)
	if want := []string{"or_split"}; !slices.Equal(cols, want) {
		t.Errorf("got metadata columns %q, want %q", cols, want)
	}
	for _, split := range []string{"train", "val"} {
		got, err := st.SplitMembers(ctx, split)
		want := slices.Clone(ids[split])
		slices.SortFunc(want, func(a, b uuid.UUID) int { return strings.Compare(a.String(), b.String()) })
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("split %s: got %v, %v, want %v", split, got, err, want)
		}
	}
	srcs := testkit.Must(st.Sources(ctx))(t)
	if len(srcs) != 2 || srcs[0] != (store.Source{Split: "train", Keyspace: "ks", Table: "data_train", IDColumn: "id", DataColumn: "data", LabelColumn: "label"}) {
		t.Errorf("got sources %+v", srcs)
	}
	entries := testkit.Must(st.Entries(ctx))(t)
	n := 0
	err := st.Scan(ctx, func(s store.Sample) error {
		n++
		data := f.blobs["ks.data_train"][s.ID]
		e := entries[s.ID]
		if data == nil {
			data = f.blobs["ks.data_val"][s.ID]
			if e.Source != 1 {
				t.Errorf("%s: got source %d, want 1 (data_val)", s.ID, e.Source)
			}
		}
		ext := ".jpg"
		if data[0] == 0x89 {
			ext = ".png"
		}
		if want := labels[s.Label] + "/" + s.ID.String() + ext; s.Name != want {
			t.Errorf("got name %q, want %q", s.Name, want)
		}
		if s.Size != int64(len(data)) || s.CRC32C != store.CRC32C(data) || !s.HasCRC32C || s.Checksum != store.Checksum(data) {
			t.Errorf("%s: size %d crc %x, want %d %x", s.ID, s.Size, s.CRC32C, len(data), store.CRC32C(data))
		}
		if s.Meta["or_split"] == "" || e.Version != 1000 {
			t.Errorf("%s: meta %v version %d", s.ID, s.Meta, e.Version)
		}
		return nil
	})
	if err != nil || n != 12 {
		t.Errorf("scan: %d samples, %v; want 12", n, err)
	}
	if _, err := st.Snapshot(ctx); err != nil {
		t.Errorf("no index snapshot stored: %v", err)
	}
}

// TestAttachAgainReadsOnlyWhatChanged pins that a second attach reads no blob whose write
// time is unchanged, reads a rewritten one, and records a label change without a read.
func TestAttachAgainReadsOnlyWhatChanged(t *testing.T) {
	f, ids := pluginTables(t)
	st := memstore.New("plugin", memstore.Options{})
	attachAll(t, f, st, pluginOptions())

	f.reads.Store(0)
	rep := attachAll(t, f, st, pluginOptions())
	if rep.Read != 0 || rep.Unchanged != 12 || f.reads.Load() != 0 {
		t.Errorf("again, nothing changed: got %d read (%d blob reads), %d unchanged; want 0, 12", rep.Read, f.reads.Load(), rep.Unchanged)
	}

	changed := ids["train"][0]
	f.blobs["ks.data_train"][changed] = png
	for _, r := range f.rows["ks.data_train"] {
		if r["id"] == changed.String() {
			r["writetime(data)"] = "2000"
		}
	}
	for _, r := range f.rows["ks.metadata_val"] {
		r["or_split"] = "validation"
	}
	rep = attachAll(t, f, st, pluginOptions())
	if rep.Read != 1 || rep.Updated != 6 || rep.Unchanged != 5 {
		t.Errorf("one blob rewritten, six metadata rows changed: got %d read, %d updated, %d unchanged; want 1, 6, 5", rep.Read, rep.Updated, rep.Unchanged)
	}
	err := st.Scan(context.Background(), func(s store.Sample) error {
		if s.ID == changed && (s.Size != int64(len(png)) || !strings.HasSuffix(s.Name, ".png")) {
			t.Errorf("rewritten blob: got size %d name %s, want %d, .png", s.Size, s.Name, len(png))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestAttachBadInput pins that bad input stops the attach with an error naming the row,
// and, found before the blobs are read, with nothing written.
func TestAttachBadInput(t *testing.T) {
	for _, c := range []struct {
		name       string
		damage     func(f *fakeTables, ids map[string][]uuid.UUID, o *Options)
		says       []string
		beforeRead bool
	}{
		{"missing table", func(f *fakeTables, ids map[string][]uuid.UUID, o *Options) { delete(f.tables, "ks.data_val") },
			[]string{"data table ks.data_val", "has no table data_val"}, true},
		{"null blob", func(f *fakeTables, ids map[string][]uuid.UUID, o *Options) {
			delete(f.rows["ks.data_train"][2], "writetime(data)")
		}, []string{"data table ks.data_train, row id=", "data is null"}, true},
		{"label contradicting the metadata", func(f *fakeTables, ids map[string][]uuid.UUID, o *Options) {
			f.rows["ks.metadata_val"][1]["label"] = "0"
		}, []string{"data table ks.data_val, row id=" + "", "label 1, but 0 in metadata table ks.metadata_val"}, true},
		{"no metadata row", func(f *fakeTables, ids map[string][]uuid.UUID, o *Options) {
			f.rows["ks.metadata_train"] = f.rows["ks.metadata_train"][1:]
		}, []string{"row id=", "no row of that id in metadata table"}, true},
		{"oversized blob", func(f *fakeTables, ids map[string][]uuid.UUID, o *Options) {
			f.blobs["ks.data_train"][ids["train"][3]] = append(slices.Clone(jpeg), make([]byte, 100)...)
			o.MaxSize = 50
		}, []string{"row id=", "over the size limit of 50"}, false},
		{"not an image", func(f *fakeTables, ids map[string][]uuid.UUID, o *Options) {
			f.blobs["ks.data_train"][ids["train"][3]] = []byte("\x93NUMPY")
		}, []string{"is no image the readers decode", "--name-column"}, false},
		{"empty blob", func(f *fakeTables, ids map[string][]uuid.UUID, o *Options) {
			f.blobs["ks.data_train"][ids["train"][3]] = []byte{}
		}, []string{"is empty"}, false},
	} {
		f, ids := pluginTables(t)
		opts := pluginOptions()
		opts.Workers = 1
		c.damage(f, ids, &opts)
		st := memstore.New("plugin", memstore.Options{})
		p, err := Prepare(context.Background(), f, opts)
		if err == nil {
			_, err = p.Run(context.Background(), st)
		}
		var in *InputError
		if err == nil || !errors.As(err, &in) {
			t.Errorf("%s: got %v, want an InputError", c.name, err)
			continue
		}
		for _, s := range c.says {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: got %q, want it to say %q", c.name, err, s)
			}
		}
		if c.beforeRead && f.reads.Load() > 0 {
			t.Errorf("%s: %d blobs read before the error, want none", c.name, f.reads.Load())
		}
		if srcs := testkit.Must(st.Sources(context.Background()))(t); len(srcs) > 0 {
			t.Errorf("%s: sources recorded (the dataset is visible) after bad input", c.name)
		}
	}
}

// TestAttachCassandraDLTables pins the 2021 layout: one table (the mount's "all"), no class
// column (patients span labels), every metadata column kept for split create --group-by.
func TestAttachCassandraDLTables(t *testing.T) {
	f := &fakeTables{tables: map[string]Table{}, rows: map[string][]map[string]string{}, blobs: map[string]map[uuid.UUID][]byte{"tp.data_by_uuid": {}}}
	f.tables["tp.data_by_uuid"] = Table{Keyspace: "tp", Name: "data_by_uuid", Columns: table("", []string{"patch_id uuid", "label int", "data blob"}).Columns}
	f.tables["tp.metadata_by_uuid"] = Table{Keyspace: "tp", Name: "metadata_by_uuid",
		Columns: table("", []string{"patient_id text", "slide_num int", "x int", "y int", "label int", "patch_id uuid"}, "patch_id").Columns}
	for k := range 8 {
		id := uuid.New()
		f.blobs["tp.data_by_uuid"][id] = jpeg
		f.rows["tp.data_by_uuid"] = append(f.rows["tp.data_by_uuid"], map[string]string{"patch_id": id.String(), "label": fmt.Sprint(k % 2), "writetime(data)": "5"})
		f.rows["tp.metadata_by_uuid"] = append(f.rows["tp.metadata_by_uuid"], map[string]string{"patch_id": id.String(), "label": fmt.Sprint(k % 2),
			"patient_id": fmt.Sprintf("P%d", k/4), "slide_num": "1", "x": fmt.Sprint(k * 10), "y": "0"})
	}
	st := memstore.New("tissue", memstore.Options{})
	rep := attachAll(t, f, st, Options{Data: []TableName{{Keyspace: "tp", Table: "data_by_uuid"}}, Meta: []TableName{{Keyspace: "tp", Table: "metadata_by_uuid"}}})
	ctx := context.Background()
	labels := testkit.Must(st.Labels(ctx))(t)
	cols := testkit.Must(st.Columns(ctx))(t)
	if want := []string{"class_0", "class_1"}; !slices.Equal(labels, want) {
		t.Errorf("got classes %q, want %q", labels, want)
	}
	if want := []string{"patient_id", "slide_num", "x", "y"}; !slices.Equal(cols, want) {
		t.Errorf("got columns %q, want %q", cols, want)
	}
	if len(rep.Splits) != 0 {
		t.Errorf("got splits %q, want none (the mount's all)", rep.Splits)
	}
}

// TestSplitLists pins that a split given as a list of ids is stored as given, and that an
// id in no data table, or listed twice, is refused naming its line.
func TestSplitLists(t *testing.T) {
	f, ids := pluginTables(t)
	dir := t.TempDir()
	write := func(name string, lines ...string) string {
		p := filepath.Join(dir, name)
		testkit.Check(t, os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644))
		return "mine=" + p
	}
	good := write("good", "# three of train", ids["train"][2].String(), "", ids["train"][0].String(), ids["val"][1].String())
	sl, err := ReadSplitList(good)
	if err != nil {
		t.Fatal(err)
	}
	opts := pluginOptions()
	opts.Lists = []SplitList{sl}
	st := memstore.New("plugin", memstore.Options{})
	attachAll(t, f, st, opts)
	got := testkit.Must(st.SplitMembers(context.Background(), "mine"))(t)
	if want := []uuid.UUID{ids["train"][2], ids["train"][0], ids["val"][1]}; !slices.Equal(got, want) {
		t.Errorf("split mine: got %v, want %v", got, want)
	}

	for _, c := range []struct {
		name, arg, says string
	}{
		{"unknown id", write("unknown", ids["val"][0].String(), uuid.NewString()), "split list mine, line 2: "},
		{"twice", write("twice", ids["val"][0].String(), ids["val"][0].String()), "listed twice"},
	} {
		sl, err := ReadSplitList(c.arg)
		if err != nil {
			t.Fatal(err)
		}
		opts.Lists = []SplitList{sl}
		_, err = Prepare(context.Background(), f, opts)
		if err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: got %v, want an error saying %q", c.name, err, c.says)
		}
	}
	if _, err := ReadSplitList(write("bad", "not-a-uuid")); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("a line that is no uuid: got %v, want an error naming line 1", err)
	}
}

// TestPacerBoundsTheRate pins that reads booked through a pacer average at most its rate:
// three reads of 50 kB at 1 MB/s take at least the 100 ms the first two are owed.
func TestPacerBoundsTheRate(t *testing.T) {
	p := newPacer(1_000_000)
	start := time.Now()
	for range 3 {
		testkit.Check(t, p.wait(context.Background(), 50_000))
	}
	if got, want := time.Since(start), 100*time.Millisecond; got < want {
		t.Errorf("three 50 kB reads at 1 MB/s took %v, want at least %v", got, want)
	}
	if newPacer(0) != nil {
		t.Errorf("a rate of 0 made a pacer, want none (no limit)")
	}
}
