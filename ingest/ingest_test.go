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
	"github.com/google/uuid"
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
	labels := must(st.Labels(context.Background()))(t)
	if !slices.Equal(labels, rep.Classes) {
		t.Errorf("stored labels %q, want %q", labels, rep.Classes)
	}
}

func TestRerunWritesNothingAndUpdatesChangedMetadata(t *testing.T) {
	root := writeTree(t, map[string]string{"a/1.jpg": "one", "a/2.jpg": "two", "b/3.jpg": "three"})
	csvPath := filepath.Join(t.TempDir(), "m.csv")
	check(t, os.WriteFile(csvPath, []byte("path,patient_id\na/1.jpg,p1\nb/3.jpg,p2\n"), 0o644))
	st := memstore.New("ds", memstore.Options{})
	rep, err := run(t, st, Options{Root: root, CSV: csvPath, Workers: 3})
	if err != nil || rep.Written != 3 {
		t.Fatalf("first run: %+v, %v", rep, err)
	}
	rep, err = run(t, st, Options{Root: root, CSV: csvPath})
	if err != nil || rep.Written != 0 || rep.Unchanged != 3 {
		t.Fatalf("second run: written %d unchanged %d (%v), want 0 and 3", rep.Written, rep.Unchanged, err)
	}
	check(t, os.WriteFile(csvPath, []byte("path,patient_id\na/1.jpg,p9\nb/3.jpg,p2\n"), 0o644))
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
		check(t, os.WriteFile(p, []byte(csv), 0o644))
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

// TestDatabaseFailureStops: a write failing between a sample's blob and its metadata row
// stops the run with an error that says how to resume; the interrupted samples leave
// orphan blobs that are never listed, and the next run lists them.
func TestDatabaseFailureStops(t *testing.T) {
	files := map[string]string{}
	for i := range 50 {
		files["a/"+strings.Repeat("x", i+1)+".jpg"] = "data"
	}
	root := writeTree(t, files)
	var mu sync.Mutex
	puts, failAfter := 0, 10
	st := memstore.New("ds", memstore.Options{FailPut: func(id uuid.UUID, write string) error {
		mu.Lock()
		defer mu.Unlock()
		if write != "metadata" {
			return nil
		}
		if puts++; puts > failAfter {
			return errDown
		}
		return nil
	}})
	rep, err := run(t, st, Options{Root: root, Workers: 4})
	if err == nil || !strings.Contains(err.Error(), "run the same ingest again to resume") || !errors.Is(err, errDown) {
		t.Fatalf("error = %v, want the database error and a resume hint", err)
	}
	if rep.Written >= 50 {
		t.Errorf("wrote %d of 50 with a failing database", rep.Written)
	}
	listed := scan(t, st)
	if st.Blobs() <= len(listed) {
		t.Errorf("%d blobs for %d listed samples: the failure did not fall between a blob and its row", st.Blobs(), len(listed))
	}
	for name, s := range listed {
		if _, err := st.Get(context.Background(), s.ID, nil); err != nil {
			t.Errorf("%s is listed but its blob is missing: %v", name, err)
		}
	}
	mu.Lock()
	failAfter = 1 << 30
	mu.Unlock()
	rep, err = run(t, st, Options{Root: root})
	if err != nil || int(rep.Written+rep.Unchanged) != 50 || len(scan(t, st)) != 50 {
		t.Fatalf("resume: %+v, %v, %d listed", rep, err, len(scan(t, st)))
	}
}

var errDown = errors.New("database down")

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

// must returns v, failing the test if err is not nil: must(f())(t).
func must[T any](v T, err error) func(t testing.TB) T {
	return func(t testing.TB) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// check fails the test if err is not nil.
func check(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
