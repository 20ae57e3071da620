package splits

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/cassfs/cassfs/index"
	"github.com/cassfs/cassfs/internal/testkit"

	"github.com/cassfs/cassfs/store"
	"github.com/cassfs/cassfs/store/memstore"
	"github.com/google/uuid"
)

// tileDataset is a dataset of patients' tiles in the in-memory store: 12 tiles per patient,
// every third one of label 1; patient 2's tiles lack a slide when gap is set.
func tileDataset(t *testing.T, patients int, gap bool) (*memstore.Store, []uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	st := memstore.New("tiles", memstore.Options{})
	testkit.Check(t, st.SetLabels(ctx, []string{"normal", "tumor"}))
	testkit.Check(t, st.AddColumns(ctx, []string{"patient_id", "slide"}))
	var ids []uuid.UUID
	for p := range patients {
		for k := range 12 {
			label := min(k%3, 1) ^ 1 // 0 for k%3 == 1, 2; 1 for k%3 == 0
			name := fmt.Sprintf("%s/p%03d_%02d.jpg", []string{"normal", "tumor"}[label], p, k)
			data := []byte(name)
			meta := map[string]string{"patient_id": fmt.Sprintf("P%03d", p), "slide": fmt.Sprint(k % 2)}
			if gap && p == 2 {
				delete(meta, "slide")
			}
			s := store.Sample{ID: store.SampleID("tiles", name), Label: label, Name: name, Size: int64(len(data)), Checksum: store.Checksum(data), Meta: meta}
			testkit.Check(t, st.Put(ctx, s, data, nil))
			ids = append(ids, s.ID)
		}
	}
	slices.SortFunc(ids, compareIDs)
	return st, ids
}

func TestLoadItems(t *testing.T) {
	ctx := context.Background()
	st, ids := tileDataset(t, 5, false)
	var progress bytes.Buffer
	items, err := LoadItems(ctx, st, []string{"patient_id", "slide"}, &progress)
	testkit.Check(t, err)
	if len(items) != len(ids) || !strings.Contains(progress.String(), fmt.Sprintf("read %d samples", len(ids))) {
		t.Fatalf("%d items, progress %q; want %d", len(items), progress.String(), len(ids))
	}
	groups := map[string]int{}
	for _, it := range items {
		groups[it.Group]++
	}
	if len(groups) != 10 { // 5 patients × 2 slides
		t.Errorf("%d groups by patient and slide, want 10", len(groups))
	}
	items, err = LoadItems(ctx, st, nil, nil)
	testkit.Check(t, err)
	groups = map[string]int{}
	for _, it := range items {
		groups[it.Group]++
	}
	if len(groups) != len(ids) {
		t.Errorf("without group-by: %d groups for %d samples, want one each", len(groups), len(ids))
	}
	if _, err := LoadItems(ctx, st, []string{"patient"}, nil); !errors.Is(err, ErrUnknownColumn) || !strings.Contains(err.Error(), "patient_id, slide") {
		t.Errorf("unknown column: %v, want ErrUnknownColumn listing the columns", err)
	}
	gappy, _ := tileDataset(t, 4, true)
	if _, err := LoadItems(ctx, gappy, []string{"slide"}, nil); err == nil || !strings.Contains(err.Error(), "12 sample(s) have no value") {
		t.Errorf("samples without a group value: %v", err)
	}
}

func TestLoadStored(t *testing.T) {
	ctx := context.Background()
	st, ids := tileDataset(t, 6, false)
	testkit.Check(t, st.PutSplits(ctx, []store.NewSplit{{Name: "train", Members: ids[:40]}, {Name: "val", Members: ids[40:60]}, {Name: "bad/name", Members: ids[:1]}}, "", "", false))
	ix, err := index.Load(ctx, st)
	testkit.Check(t, err)
	st.DeleteSample(ids[45], false) // val now lists a sample the dataset lost
	ix2, err := index.Load(ctx, st)
	testkit.Check(t, err)
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	names := func(ss []*Split) (out []string) {
		for _, s := range ss {
			out = append(out, s.Name)
		}
		return out
	}
	shown, err := LoadStored(ctx, st, ix, "*", log)
	testkit.Check(t, err)
	if got := names(shown); !slices.Equal(got, []string{"all", "train", "val"}) {
		t.Errorf("shown %v, want all, train, val (bad/name cannot be a directory)", got)
	}
	for k, id := range ids[:40] {
		if i, _ := ix.Find(id); shown[1].Members[k] != i {
			t.Fatalf("train member %d is sample %d, want %d (canonical order)", k, shown[1].Members[k], i)
		}
	}
	shown, err = LoadStored(ctx, st, ix2, "*", log)
	testkit.Check(t, err)
	if got := names(shown); !slices.Equal(got, []string{"all", "train"}) || !strings.Contains(logs.String(), "split=val missing=1") {
		t.Errorf("with a member gone: shown %v, log:\n%s", got, logs.String())
	}
	for which, want := range map[string][]string{"": {"all"}, "val": {"all", "val"}, " train , val ": {"all", "train", "val"}} {
		shown, err := LoadStored(ctx, st, ix, which, log)
		if err != nil || !slices.Equal(names(shown), want) {
			t.Errorf("which %q: %v, %v; want %v", which, names(shown), err, want)
		}
	}
	if _, err := LoadStored(ctx, st, ix, "train,nope", log); !errors.Is(err, ErrUnknownSplit) || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("a split not stored: %v, want ErrUnknownSplit naming it", err)
	}
}

// membersFailing is a store whose SplitMembers fails for the splits named in fail.
type membersFailing struct {
	*memstore.Store
	fail map[string]error
}

func (m membersFailing) SplitMembers(ctx context.Context, name string) ([]uuid.UUID, error) {
	if err := m.fail[name]; err != nil {
		return nil, err
	}
	return m.Store.SplitMembers(ctx, name)
}

// TestFetchStoredReportsEveryFailure: when the members of several splits cannot be read,
// the error carries every one of their errors, not only the first.
func TestFetchStoredReportsEveryFailure(t *testing.T) {
	ctx := context.Background()
	st, ids := tileDataset(t, 3, false)
	testkit.Check(t, st.PutSplits(ctx, []store.NewSplit{{Name: "train", Members: ids[:20]}, {Name: "val", Members: ids[20:30]}, {Name: "test", Members: ids[30:]}}, "", "", false))
	errTrain, errTest := errors.New("train unreadable"), errors.New("test unreadable")
	failing := membersFailing{st, map[string]error{"train": errTrain, "test": errTest}}
	log := slog.New(slog.DiscardHandler)
	_, err := FetchStored(ctx, failing, "*", log)
	if !errors.Is(err, errTrain) || !errors.Is(err, errTest) {
		t.Errorf("error = %v, want both splits' errors", err)
	}
	f, err := FetchStored(ctx, failing, "val", log)
	if err != nil || len(f.ids) != 1 || len(f.ids[0]) != 10 {
		t.Errorf("val alone: %v, want its 10 members", err)
	}
}

func TestExportImport(t *testing.T) {
	ctx := context.Background()
	src, ids := tileDataset(t, 5, false)
	testkit.Check(t, src.PutSplits(ctx, []store.NewSplit{{Name: "train", Members: ids[:30]}, {Name: "val", Members: ids[30:]}}, `{"seed":1}`, `{"r":2}`, false))
	var file bytes.Buffer
	testkit.Check(t, Export(ctx, src, nil, &file))
	exported := file.String()
	var f ExportFile
	testkit.Check(t, json.Unmarshal([]byte(exported), &f))
	if f.Format != ExportFormat || f.Dataset != "tiles" || len(f.Splits) != 2 || string(f.Splits[0].Params) != `{"seed":1}` {
		t.Errorf("export file: %+v", f)
	}
	if err := Export(ctx, src, []string{"nope"}, &file); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("export of a missing split: %v", err)
	}
	empty, _ := tileDataset(t, 1, false)
	if err := Export(ctx, empty, nil, &file); err == nil || !strings.Contains(err.Error(), "no stored splits") {
		t.Errorf("export of a dataset without splits: %v", err)
	}

	dst, _ := tileDataset(t, 5, false) // the same samples, another store
	names, err := Import(ctx, dst, strings.NewReader(exported), "s.json", false)
	if err != nil || !slices.Equal(names, []string{"train", "val"}) {
		t.Fatalf("import: %v, %v", names, err)
	}
	for _, n := range names {
		a := testkit.Must(src.SplitMembers(ctx, n))(t)
		b := testkit.Must(dst.SplitMembers(ctx, n))(t)
		if !slices.Equal(a, b) {
			t.Errorf("split %s differs after export and import", n)
		}
	}
	infos := testkit.Must(dst.Splits(ctx))(t)
	var params map[string]any
	testkit.Check(t, json.Unmarshal([]byte(infos[0].Params), &params))
	if params["command"] != "import" || params["from_dataset"] != "tiles" || params["source"] != "s.json" || infos[0].Report != `{"r":2}` {
		t.Errorf("imported split's params %s, report %s", infos[0].Params, infos[0].Report)
	}
	if _, err := Import(ctx, dst, strings.NewReader(exported), "s.json", false); !errors.Is(err, store.ErrExists) {
		t.Errorf("second import: %v, want ErrExists", err)
	}
	if _, err := Import(ctx, dst, strings.NewReader(exported), "s.json", true); err != nil {
		t.Errorf("import with replace: %v", err)
	}
	other, _ := tileDataset(t, 2, false)
	if _, err := Import(ctx, other, strings.NewReader(exported), "s.json", false); err == nil || !strings.Contains(err.Error(), "not in dataset") {
		t.Errorf("import into a dataset lacking the samples: %v", err)
	}
	if infos := testkit.Must(other.Splits(ctx))(t); len(infos) != 0 {
		t.Errorf("a refused import stored %d splits", len(infos))
	}
	id := ids[0]
	for _, bad := range []string{
		`{"format":"other","splits":[]}`,
		`not json`,
		`{"format":"cassfs-splits/v1","splits":[]}`,
		`{"format":"cassfs-splits/v1","splits":[{"name":"x/y","members":[]}]}`,
		fmt.Sprintf(`{"format":"cassfs-splits/v1","splits":[{"name":"x","members":["%s","%s"]}]}`, id, id),
		`{"format":"cassfs-splits/v1","splits":[{"name":"x","members":["nope"]}]}`,
		`{"format":"cassfs-splits/v1","extra":1,"splits":[]}`,
	} {
		if _, err := Import(ctx, other, strings.NewReader(bad), "bad.json", false); err == nil || !strings.Contains(err.Error(), "bad.json") {
			t.Errorf("import %s: %v, want an error naming the file", bad, err)
		}
	}
}

type countScans struct {
	store.Store
	scans int
}

func (c *countScans) Scan(ctx context.Context, fn func(store.Sample) error) error {
	c.scans++
	return c.Store.Scan(ctx, fn)
}

// A current index snapshot gives split create the same items as a scan, without a scan,
// and so the same splits; a sample lacking a group value is refused alike.
func TestLoadItemsFromTheSnapshot(t *testing.T) {
	ctx := context.Background()
	for _, gap := range []bool{false, true} {
		st, _ := tileDataset(t, 5, gap)
		scanned, scanErr := LoadItems(ctx, st, []string{"patient_id", "slide"}, nil)
		testkit.Check(t, st.MarkChanged(ctx))
		if _, _, err := index.StoreSnapshot(ctx, st); err != nil {
			t.Fatal(err)
		}
		counted := &countScans{Store: st}
		fromSnap, snapErr := LoadItems(ctx, counted, []string{"patient_id", "slide"}, nil)
		if counted.scans != 0 {
			t.Errorf("gap %v: %d scans with a current snapshot", gap, counted.scans)
		}
		if fmt.Sprint(scanErr) != fmt.Sprint(snapErr) {
			t.Errorf("gap %v: error from a scan %v, from the snapshot %v", gap, scanErr, snapErr)
		}
		byID := func(a, b Item) int { return compareIDs(a.ID, b.ID) }
		slices.SortFunc(scanned, byID)
		slices.SortFunc(fromSnap, byID)
		if !slices.Equal(scanned, fromSnap) {
			t.Errorf("gap %v: items from the snapshot differ from a scan's", gap)
		}
	}
}
