//go:build e2e

package e2e

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cassfs/cassfs/internal/testkit"
	"github.com/cassfs/cassfs/store"
	"github.com/cassfs/cassfs/store/cassandra"
)

func listed(t *testing.T, dataset string) []string {
	t.Helper()
	st := openStore(t, dataset, false)
	var names []string
	if err := st.Scan(context.Background(), func(s store.Sample) error { names = append(names, s.Name); return nil }); err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	return names
}

// TestIngestSkipsBadFiles: every bad file is named with its reason, the exit status is 1,
// and exactly the good files are listed.
func TestIngestSkipsBadFiles(t *testing.T) {
	good := strings.Repeat("x", 500)
	root := testkit.WriteTree(t, map[string]string{
		"cat/ok1.jpg":        good,
		"cat/OK2.PNG":        good,
		"dog/ok3.jpeg":       good,
		"cat/empty.jpg":      "",
		"cat/big.jpg":        strings.Repeat("b", 2000),
		"cat/anim.gif":       good,
		"cat/notes.txt":      good,
		"dog/.hidden.jpg":    good,
		"dog/deep/x.jpg":     good,
		"README.txt":         good,
		"dog/trailing .jpg ": good,
	})
	if err := os.Symlink(filepath.Join(root, "nowhere.jpg"), filepath.Join(root, "dog", "gone.jpg")); err != nil {
		t.Fatal(err)
	}
	ds := newDataset(t, "badfiles")
	r := cassfs(t, "ingest", "-d", ds, "--max-size", "1000", root)
	if r.code != 1 {
		t.Fatalf("want exit status 1:\n%v", r)
	}
	for _, want := range []string{
		"skipped cat/empty.jpg: empty file",
		"skipped cat/big.jpg: 2000 bytes, over the size limit of 1000",
		`skipped cat/anim.gif: extension ".gif" is not readable by DALI and torchvision`,
		`skipped cat/notes.txt: extension ".txt"`,
		"skipped dog/.hidden.jpg: hidden name",
		"skipped dog/deep/: nested directory",
		"skipped README.txt: file directly in the dataset root",
		"skipped dog/trailing .jpg : name ends in whitespace",
		"skipped dog/gone.jpg: unreadable: no such file or directory",
		"3 files written",
		"9 skipped",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%v", want, r)
		}
	}
	if !strings.Contains(r.stderr, "9 file(s) not ingested") {
		t.Errorf("stderr lacks the failure summary:\n%v", r)
	}
	if got, want := listed(t, ds), []string{"cat/OK2.PNG", "cat/ok1.jpg", "dog/ok3.jpeg"}; !slices.Equal(got, want) {
		t.Errorf("listed %q, want exactly the good files %q", got, want)
	}
}

// TestIngestRejectsBadCSV: a CSV problem stops the ingest before anything is written.
func TestIngestRejectsBadCSV(t *testing.T) {
	tree := map[string]string{"a/1.jpg": "one", "a/2.jpg": "two", "b/3.jpg": "three"}
	for _, tc := range []struct {
		name, csv string
		want      []string
	}{
		{"missing file", "path,patient_id\na/1.jpg,p1\na/9.jpg,p2\n",
			[]string{`line 3: "a/9.jpg" names no file under`}},
		{"duplicate path", "path,patient_id\na/1.jpg,p1\nb/3.jpg,p2\na/1.jpg,p3\n",
			[]string{`line 4: path "a/1.jpg" duplicates line 2`}},
		{"builtin column", "path,label,patient_id\na/1.jpg,x,p1\n",
			[]string{`metadata column "label" clashes with the built-in column`}},
		{"invalid column", "path,Patient ID\na/1.jpg,p1\n",
			[]string{`invalid metadata column "Patient ID"`}},
		{"no key column", "file,patient_id\na/1.jpg,p1\n",
			[]string{`no "path" column`}},
		{"ragged row", "path,patient_id\na/1.jpg,p1,extra\n",
			[]string{"wrong number of fields"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := testkit.WriteTree(t, tree)
			csvPath := filepath.Join(t.TempDir(), "meta.csv")
			if err := os.WriteFile(csvPath, []byte(tc.csv), 0o644); err != nil {
				t.Fatal(err)
			}
			ds := newDataset(t, "badcsv")
			r := cassfs(t, "ingest", "-d", ds, "--csv", csvPath, root)
			if r.code != 1 {
				t.Fatalf("want exit status 1:\n%v", r)
			}
			for _, w := range append(tc.want, "meta.csv") {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr lacks %q:\n%v", w, r)
				}
			}
			// Nothing was written: the dataset was not even created.
			_, err := cassandra.Open(context.Background(), cassandra.Config{Hosts: hosts, Dataset: ds})
			if !errors.Is(err, store.ErrNotFound) {
				t.Errorf("after a rejected CSV, opening the dataset: error = %v, want ErrNotFound", err)
			}
		})
	}
}

func TestIngestRefusesChangedClasses(t *testing.T) {
	ds := newDataset(t, "classes")
	if r := cassfs(t, "ingest", "-d", ds, testkit.WriteTree(t, map[string]string{"a/1.jpg": "1", "b/2.jpg": "2"})); r.code != 0 {
		t.Fatalf("first ingest: %v", r)
	}
	r := cassfs(t, "ingest", "-d", ds, testkit.WriteTree(t, map[string]string{"a/1.jpg": "1", "aa/3.jpg": "3", "b/2.jpg": "2"}))
	if r.code != 1 || !strings.Contains(r.stderr, "classes cannot change") {
		t.Fatalf("ingest with a new class: want a refusal:\n%v", r)
	}
	if got := listed(t, ds); !slices.Equal(got, []string{"a/1.jpg", "b/2.jpg"}) {
		t.Errorf("listed %q after the refused ingest", got)
	}
}

func TestIngestUnreachableDatabase(t *testing.T) {
	root := testkit.WriteTree(t, map[string]string{"a/1.jpg": "1"})
	r := cassfs(t, "ingest", "--hosts", "127.0.0.1:1", "--timeout", "2s", "-d", "nowhere", root)
	if r.code != 1 || !strings.Contains(r.stderr, "connect to Cassandra at 127.0.0.1:1") {
		t.Fatalf("want a clear connection error:\n%v", r)
	}
}

func TestIngestUsageErrors(t *testing.T) {
	root := testkit.WriteTree(t, map[string]string{"a/1.jpg": "1"})
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"ingest", root}, "--dataset is required"},
		{[]string{"ingest", "-d", "Bad-Name", root}, `invalid dataset name "Bad-Name"`},
		{[]string{"ingest", "-d", "system", root}, "reserved"},
		{[]string{"ingest", "-d", "ok"}, "one ROOT directory"},
		{[]string{"ingest", "-d", "ok", "--max-size", "0", root}, "must be positive"},
	} {
		r := cassfs(t, tc.args...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("cassfs %q: want exit 2 and %q:\n%v", tc.args, tc.want, r)
		}
	}
	if r := cassfs(t, "ingest", "-d", "x_missing_root", filepath.Join(root, "nope")); r.code != 1 || !strings.Contains(r.stderr, "nope") {
		t.Errorf("missing root: want an error naming it:\n%v", r)
	}
}
