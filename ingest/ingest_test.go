package ingest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cassfs/cassfs/index"
	"github.com/cassfs/cassfs/internal/testkit"

	"github.com/cassfs/cassfs/store"
	"github.com/cassfs/cassfs/store/memstore"
	"github.com/google/uuid"
)

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
	root := testkit.WriteTree(t, map[string]string{"b/1.jpg": "1", "B/2.jpg": "2", "a/3.png": "3", "Unreadable/x.gif": "4"})
	if err := os.Mkdir(filepath.Join(root, "Empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	st := memstore.New("ds", memstore.Options{})
	rep, err := run(t, st, Options{Root: root})
	if err == nil && len(rep.Skipped) != 1 {
		t.Errorf("skipped %v, want Unreadable/x.gif", rep.Skipped)
	}
	if err != nil {
		t.Fatal(err)
	}
	// "Empty" and "Unreadable" hold no ingestible file, yet DALI and torchvision number
	// every class directory, so they are classes and shift the labels after them.
	if want := []string{"B", "Empty", "Unreadable", "a", "b"}; !slices.Equal(rep.Classes, want) {
		t.Errorf("classes = %q, want %q", rep.Classes, want)
	}
	got := scan(t, st)
	for name, label := range map[string]int{"B/2.jpg": 0, "a/3.png": 3, "b/1.jpg": 4} {
		if got[name].Label != label {
			t.Errorf("%s: label %d, want %d", name, got[name].Label, label)
		}
		if got[name].ID != store.SampleID("ds", name) {
			t.Errorf("%s: id is not derived from dataset and path", name)
		}
	}
	labels := testkit.Must(st.Labels(context.Background()))(t)
	if !slices.Equal(labels, rep.Classes) {
		t.Errorf("stored labels %q, want %q", labels, rep.Classes)
	}
}

func TestRerunWritesNothingAndUpdatesChangedMetadata(t *testing.T) {
	root := testkit.WriteTree(t, map[string]string{"a/1.jpg": "one", "a/2.jpg": "two", "b/3.jpg": "three"})
	csvPath := filepath.Join(t.TempDir(), "m.csv")
	testkit.Check(t, os.WriteFile(csvPath, []byte("path,patient_id\na/1.jpg,p1\nb/3.jpg,p2\n"), 0o644))
	st := memstore.New("ds", memstore.Options{})
	rep, err := run(t, st, Options{Root: root, CSV: csvPath, Workers: 3})
	if err != nil || rep.Written != 3 {
		t.Fatalf("first run: %+v, %v", rep, err)
	}
	rep, err = run(t, st, Options{Root: root, CSV: csvPath})
	if err != nil || rep.Written != 0 || rep.Unchanged != 3 {
		t.Fatalf("second run: written %d unchanged %d (%v), want 0 and 3", rep.Written, rep.Unchanged, err)
	}
	testkit.Check(t, os.WriteFile(csvPath, []byte("path,patient_id\na/1.jpg,p9\nb/3.jpg,p2\n"), 0o644))
	rep, err = run(t, st, Options{Root: root, CSV: csvPath})
	if err != nil || rep.Written != 1 || rep.Unchanged != 2 {
		t.Fatalf("run with changed metadata: written %d unchanged %d (%v), want 1 and 2", rep.Written, rep.Unchanged, err)
	}
	if got := scan(t, st)["a/1.jpg"].Meta["patient_id"]; got != "p9" {
		t.Errorf("patient_id after update = %q, want p9", got)
	}
}

func TestCSVErrorsWriteNothing(t *testing.T) {
	root := testkit.WriteTree(t, map[string]string{"a/1.jpg": "one"})
	for csv, want := range map[string]string{
		"path,size\na/1.jpg,3\n":               `"size" clashes`,
		"path,x,x\na/1.jpg,1,2\n":              `column "x" appears twice`,
		"":                                     "is empty",
		"\ufeffpath,x\na/1.jpg,1\na/1.jpg,2\n": `path "a/1.jpg" duplicates line 2`,
		"path,x\n./a/2.jpg,1\n":                `"a/2.jpg" names no file`,
	} {
		p := filepath.Join(t.TempDir(), "m.csv")
		testkit.Check(t, os.WriteFile(p, []byte(csv), 0o644))
		_, err := Prepare(Options{Root: root, CSV: p})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CSV %q: error %v, want one containing %q", csv, err, want)
		}
	}
}

// TestEmptyClassOfAnOlderDataset: a dataset ingested when empty class directories were not
// classes keeps its labels when the same tree is ingested again.
func TestEmptyClassOfAnOlderDataset(t *testing.T) {
	st := memstore.New("ds", memstore.Options{})
	if err := st.SetLabels(context.Background(), []string{"a", "c"}); err != nil {
		t.Fatal(err)
	}
	root := testkit.WriteTree(t, map[string]string{"a/1.jpg": "1", "c/2.jpg": "2"})
	if err := os.Mkdir(filepath.Join(root, "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	rep, err := run(t, st, Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Classes, []string{"a", "c"}) {
		t.Errorf("classes %q, want the stored [a c]", rep.Classes)
	}
	if got := scan(t, st); got["a/1.jpg"].Label != 0 || got["c/2.jpg"].Label != 1 {
		t.Errorf("labels %d and %d, want the stored 0 and 1", got["a/1.jpg"].Label, got["c/2.jpg"].Label)
	}
}

func TestChangedClassesAreRefused(t *testing.T) {
	st := memstore.New("ds", memstore.Options{})
	if _, err := run(t, st, Options{Root: testkit.WriteTree(t, map[string]string{"a/1.jpg": "1"})}); err != nil {
		t.Fatal(err)
	}
	_, err := run(t, st, Options{Root: testkit.WriteTree(t, map[string]string{"a/1.jpg": "1", "b/1.jpg": "1"})})
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
	root := testkit.WriteTree(t, files)
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

// TestFirstDatabaseFailureStopsTheRest: with the database down, only the files in flight
// at the first failure are tried; no file is started after it, every file tried is
// counted in the progress, and the run reports the database's error.
func TestFirstDatabaseFailureStopsTheRest(t *testing.T) {
	files := map[string]string{}
	for i := range 50 {
		files[fmt.Sprintf("a/%02d.jpg", i)] = "data"
	}
	root := testkit.WriteTree(t, files)
	var tried, progressed atomic.Int64
	st := memstore.New("ds", memstore.Options{FailPut: func(id uuid.UUID, write string) error {
		tried.Add(1)
		return errDown
	}})
	const workers = 4
	rep, err := run(t, st, Options{Root: root, Workers: workers, Progress: func(Progress) { progressed.Add(1) }})
	if err == nil || !errors.Is(err, errDown) || !strings.HasPrefix(err.Error(), "ingest stopped after 0 of 50 files: ") {
		t.Fatalf("error = %v, want the database error after 0 of 50 files", err)
	}
	if n := tried.Load(); n < 1 || n > workers {
		t.Errorf("%d files tried with the database down, want 1 to %d (those in flight at the first failure)", n, workers)
	}
	if p, n := progressed.Load(), tried.Load(); p != n {
		t.Errorf("progress reported %d files, want the %d tried", p, n)
	}
	if rep.Written != 0 || rep.Unchanged != 0 || len(rep.Skipped) != 0 {
		t.Errorf("report %+v, want nothing written, unchanged or skipped", rep)
	}
}

func TestUnreadableFileIsSkipped(t *testing.T) {
	root := testkit.WriteTree(t, map[string]string{"a/ok.jpg": "1"})
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

// TestIngestAddsCRC32C: every sample is stored with its CRC32C, and ingesting a dataset
// whose samples were stored without one (before it existed) writes them again with it.
func TestIngestAddsCRC32C(t *testing.T) {
	files := map[string]string{"a/1.jpg": "one", "a/2.jpg": "two", "b/3.jpg": "three"}
	root := testkit.WriteTree(t, files)
	st := memstore.New("ds", memstore.Options{})
	ctx := context.Background()
	testkit.Check(t, st.SetLabels(ctx, []string{"a", "b"}))
	// "a/1.jpg" as an older cassfs stored it: no CRC32C.
	old := []byte("one")
	testkit.Check(t, st.Put(ctx, store.Sample{ID: store.SampleID("ds", "a/1.jpg"), Label: 0, Name: "a/1.jpg", Size: 3, Checksum: store.Checksum(old)}, old, nil))
	rep, err := run(t, st, Options{Root: root})
	if err != nil || rep.Written != 3 || rep.Unchanged != 0 {
		t.Fatalf("ingest over a sample without CRC32C: %+v, %v; want all 3 written", rep, err)
	}
	for name, s := range scan(t, st) {
		if !s.HasCRC32C || s.CRC32C != store.CRC32C([]byte(files[name])) {
			t.Errorf("%s stored with CRC32C %v %08x, want %08x", name, s.HasCRC32C, s.CRC32C, store.CRC32C([]byte(files[name])))
		}
	}
	if rep, err := run(t, st, Options{Root: root}); err != nil || rep.Unchanged != 3 {
		t.Errorf("ingest again: %+v, %v; want all unchanged", rep, err)
	}
}

// TestUnusableFilesAreSkipped: files that cannot be samples are skipped with a reason naming
// what is wrong, the rest is ingested, and the report lists them.
func TestUnusableFilesAreSkipped(t *testing.T) {
	long := strings.Repeat("n", index.MaxNameLen) + ".jpg"
	root := testkit.WriteTree(t, map[string]string{
		"a/ok.jpg":        "fine",
		"a/empty.jpg":     "",
		"a/big.jpg":       strings.Repeat("x", 100),
		"a/" + long:       "long",
		"a/trailing.jpg ": "space",
		"a/.hidden.jpg":   "hidden",
		"a/deeper/x.jpg":  "nested",
	})
	st := memstore.New("ds", memstore.Options{})
	rep, err := run(t, st, Options{Root: root, MaxSize: 50})
	if err != nil || rep.Written != 1 {
		t.Fatalf("ingest: %+v, %v; want the one usable file written", rep, err)
	}
	want := map[string]string{
		"a/empty.jpg":     "empty",
		"a/big.jpg":       "over the size limit of 50",
		"a/" + long:       "name",
		"a/trailing.jpg ": "space",
		"a/.hidden.jpg":   "hidden",
		"a/deeper/":       "nested directory",
	}
	got := map[string]string{}
	for _, s := range rep.Skipped {
		got[s.Path] = s.Reason
	}
	for path, reason := range want {
		if !strings.Contains(got[path], reason) {
			t.Errorf("%q skipped with %q, want a reason with %q", path, got[path], reason)
		}
	}
	if len(got) != len(want) {
		t.Errorf("skipped %v, want %d", got, len(want))
	}
	if n := len(scan(t, st)); n != 1 {
		t.Errorf("%d samples listed, want 1", n)
	}
}

// TestFileGoneBeforeItsTurn: a file removed between the walk and its ingest is skipped,
// not an error of the run.
func TestFileGoneBeforeItsTurn(t *testing.T) {
	root := testkit.WriteTree(t, map[string]string{"a/1.jpg": "one", "a/2.jpg": "two"})
	p, err := Prepare(Options{Root: root})
	testkit.Check(t, err)
	testkit.Check(t, os.Remove(filepath.Join(root, "a", "2.jpg")))
	st := memstore.New("ds", memstore.Options{})
	rep, err := p.Run(context.Background(), st)
	if err != nil || rep.Written != 1 || len(rep.Skipped) != 1 || rep.Skipped[0].Path != "a/2.jpg" || !strings.Contains(rep.Skipped[0].Reason, "unreadable") {
		t.Errorf("run after a file vanished: %+v, %v; want it skipped as unreadable", rep, err)
	}
}
