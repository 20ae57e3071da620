package ingest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cassfs/cassfs/store"
	"github.com/cassfs/cassfs/store/memstore"
)

func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for rel, content := range files {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func run(t *testing.T, st store.Store, opts Options) (Report, error) {
	t.Helper()
	p, err := Prepare(opts)
	if err != nil {
		return Report{}, err
	}
	return p.Run(context.Background(), st)
}

func scan(t *testing.T, st store.Store) map[string]store.Sample {
	t.Helper()
	out := map[string]store.Sample{}
	if err := st.Scan(context.Background(), func(s store.Sample) error { out[s.Name] = s; return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestLabelsFollowBytewiseClassOrder(t *testing.T) {
	root := writeTree(t, map[string]string{"b/1.jpg": "1", "B/2.jpg": "2", "a/3.png": "3", "empty/x.gif": "4"})
	st := memstore.New("ds", memstore.Options{})
	rep, err := run(t, st, Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	// "empty" has no ingestible file, so it is no class.
	if want := []string{"B", "a", "b"}; !slices.Equal(rep.Classes, want) {
		t.Errorf("classes = %q, want %q", rep.Classes, want)
	}
	got := scan(t, st)
	for name, label := range map[string]int{"B/2.jpg": 0, "a/3.png": 1, "b/1.jpg": 2} {
		if got[name].Label != label {
			t.Errorf("%s: label %d, want %d", name, got[name].Label, label)
		}
		if got[name].ID != store.SampleID("ds", name) {
			t.Errorf("%s: id is not derived from dataset and path", name)
		}
	}
	labels, _ := st.Labels(context.Background())
	if !slices.Equal(labels, rep.Classes) {
		t.Errorf("stored labels %q, want %q", labels, rep.Classes)
	}
}

func TestRerunWritesNothingAndUpdatesChangedMetadata(t *testing.T) {
	root := writeTree(t, map[string]string{"a/1.jpg": "one", "a/2.jpg": "two", "b/3.jpg": "three"})
	csvPath := filepath.Join(t.TempDir(), "m.csv")
	os.WriteFile(csvPath, []byte("path,patient_id\na/1.jpg,p1\nb/3.jpg,p2\n"), 0o644)
	st := memstore.New("ds", memstore.Options{})
	rep, err := run(t, st, Options{Root: root, CSV: csvPath, Workers: 3})
	if err != nil || rep.Written != 3 {
		t.Fatalf("first run: %+v, %v", rep, err)
	}
	rep, err = run(t, st, Options{Root: root, CSV: csvPath})
	if err != nil || rep.Written != 0 || rep.Unchanged != 3 {
		t.Fatalf("second run: written %d unchanged %d (%v), want 0 and 3", rep.Written, rep.Unchanged, err)
	}
	os.WriteFile(csvPath, []byte("path,patient_id\na/1.jpg,p9\nb/3.jpg,p2\n"), 0o644)
	rep, err = run(t, st, Options{Root: root, CSV: csvPath})
	if err != nil || rep.Written != 1 || rep.Unchanged != 2 {
		t.Fatalf("run with changed metadata: written %d unchanged %d (%v), want 1 and 2", rep.Written, rep.Unchanged, err)
	}
	if got := scan(t, st)["a/1.jpg"].Meta["patient_id"]; got != "p9" {
		t.Errorf("patient_id after update = %q, want p9", got)
	}
}

func TestCSVErrorsWriteNothing(t *testing.T) {
	root := writeTree(t, map[string]string{"a/1.jpg": "one"})
	for csv, want := range map[string]string{
		"path,size\na/1.jpg,3\n":               `"size" clashes`,
		"path,x,x\na/1.jpg,1,2\n":              `column "x" appears twice`,
		"":                                     "is empty",
		"\ufeffpath,x\na/1.jpg,1\na/1.jpg,2\n": `path "a/1.jpg" duplicates line 2`,
		"path,x\n./a/2.jpg,1\n":                `"a/2.jpg" names no file`,
	} {
		p := filepath.Join(t.TempDir(), "m.csv")
		os.WriteFile(p, []byte(csv), 0o644)
		_, err := Prepare(Options{Root: root, CSV: p})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CSV %q: error %v, want one containing %q", csv, err, want)
		}
	}
}

func TestChangedClassesAreRefused(t *testing.T) {
	st := memstore.New("ds", memstore.Options{})
	if _, err := run(t, st, Options{Root: writeTree(t, map[string]string{"a/1.jpg": "1"})}); err != nil {
		t.Fatal(err)
	}
	_, err := run(t, st, Options{Root: writeTree(t, map[string]string{"a/1.jpg": "1", "b/1.jpg": "1"})})
	if err == nil || !strings.Contains(err.Error(), "classes cannot change") {
		t.Fatalf("error = %v, want a refusal", err)
	}
	if n := len(scan(t, st)); n != 1 {
		t.Errorf("refused ingest changed the dataset: %d samples", n)
	}
}

// TestDatabaseFailureStops: a failing write stops the run with an error that says how to
// resume, and no half-written sample is listed.
func TestDatabaseFailureStops(t *testing.T) {
	files := map[string]string{}
	for i := range 50 {
		files["a/"+strings.Repeat("x", i+1)+".jpg"] = "data"
	}
	root := writeTree(t, files)
	st := &failingStore{Store: memstore.New("ds", memstore.Options{}), failAfter: 10}
	rep, err := run(t, st, Options{Root: root, Workers: 4})
	if err == nil || !strings.Contains(err.Error(), "run the same ingest again to resume") || !errors.Is(err, errDown) {
		t.Fatalf("error = %v, want the database error and a resume hint", err)
	}
	if rep.Written >= 50 {
		t.Errorf("wrote %d of 50 with a failing database", rep.Written)
	}
	for name, s := range scan(t, st) {
		if _, err := st.Get(context.Background(), s.ID, nil); err != nil {
			t.Errorf("%s is listed but its blob is missing: %v", name, err)
		}
	}
	st.mu.Lock()
	st.failAfter = 1 << 30
	st.mu.Unlock()
	rep, err = run(t, st, Options{Root: root})
	if err != nil || int(rep.Written+rep.Unchanged) != 50 {
		t.Fatalf("resume: %+v, %v", rep, err)
	}
}

var errDown = errors.New("database down")

// failingStore fails every Put after the first failAfter.
type failingStore struct {
	*memstore.Store
	mu        sync.Mutex
	failAfter int // guarded by mu
	n         int // guarded by mu
}

func (f *failingStore) Put(ctx context.Context, s store.Sample, data []byte) error {
	f.mu.Lock()
	f.n++
	fail := f.n > f.failAfter
	f.mu.Unlock()
	if fail {
		return errDown
	}
	return f.Store.Put(ctx, s, data)
}

func TestUnreadableFileIsSkipped(t *testing.T) {
	root := writeTree(t, map[string]string{"a/ok.jpg": "1"})
	os.Symlink("/nonexistent/x", filepath.Join(root, "a", "dangling.jpg"))
	st := memstore.New("ds", memstore.Options{})
	rep, err := run(t, st, Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Skipped) != 1 || rep.Skipped[0].Path != "a/dangling.jpg" || !strings.Contains(rep.Skipped[0].Reason, "unreadable") {
		t.Errorf("skipped = %+v, want a/dangling.jpg as unreadable", rep.Skipped)
	}
}
