//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/csv"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cassfs/cassfs/internal/testkit"
	"github.com/cassfs/cassfs/store"
	"github.com/cassfs/cassfs/store/cassandra"
	"github.com/cassfs/cassfs/store/storetest"
	"github.com/gocql/gocql"
)

func TestStoreConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		return openStore(t, newDataset(t, "conf"), true)
	})
}

func TestAttacherConformance(t *testing.T) {
	storetest.RunAttacher(t, func(t *testing.T) store.Attacher {
		st, err := cassandra.Open(context.Background(), cassandra.Config{
			Hosts: hosts, Dataset: newDataset(t, "confatt"), Create: true, Attach: true, Timeout: 20 * time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
		return st
	})
}

func TestOpenMissingDataset(t *testing.T) {
	_, err := cassandra.Open(context.Background(), cassandra.Config{Hosts: hosts, Dataset: "no_such_dataset_x"})
	if err == nil || !strings.Contains(err.Error(), "no_such_dataset_x") {
		t.Fatalf("open missing dataset: error = %v, want one naming the dataset", err)
	}
}

// countRows counts a table's rows behind cassfs's back, paging through ids only: an
// aggregate over the blob table would pull pages of whole blobs into Cassandra's heap.
func countRows(t *testing.T, dataset, table string) int {
	t.Helper()
	s := cql(t, dataset)
	defer s.Close()
	iter := s.Query("SELECT id FROM " + table).PageSize(100).Iter()
	n := 0
	var id gocql.UUID
	for iter.Scan(&id) {
		n++
	}
	if err := iter.Close(); err != nil {
		t.Fatalf("count %s.%s: %v", dataset, table, err)
	}
	return n
}

func readCSV(t *testing.T, path string) (header []string, rows map[string][]string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	rows = map[string][]string{}
	for _, r := range recs[1:] {
		rows[r[0]] = r
	}
	return recs[0], rows
}

func TestIngestRoundTrip(t *testing.T) {
	const count = 2000
	dir := t.TempDir()
	if r := cassfs(t, "gen", "--out", dir, "--count", "2000", "--seed", "7"); r.code != 0 {
		t.Fatalf("gen: %v", r)
	}
	root, csvPath := filepath.Join(dir, "images"), filepath.Join(dir, "metadata.csv")
	ds := newDataset(t, "roundtrip")
	r := cassfs(t, "ingest", "-d", ds, "--csv", csvPath, root)
	if r.code != 0 {
		t.Fatalf("ingest: %v", r)
	}
	if !strings.Contains(r.stdout, "2000 files written") {
		t.Errorf("ingest summary does not report 2000 files written:\n%s", r.stdout)
	}

	st := openStore(t, ds, false)
	ctx := context.Background()
	labels, err := st.Labels(ctx)
	if err != nil {
		t.Fatal(err)
	}
	classDirs := testkit.Must(os.ReadDir(root))(t)
	var wantLabels []string
	for _, d := range classDirs {
		wantLabels = append(wantLabels, d.Name())
	}
	if !slices.Equal(labels, wantLabels) {
		t.Fatalf("labels = %q, want the class directories %q", labels, wantLabels)
	}
	header, rows := readCSV(t, csvPath)
	var samples []store.Sample
	if err := st.Scan(ctx, func(s store.Sample) error { samples = append(samples, s); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(samples) != count {
		t.Fatalf("listed %d samples, want %d", len(samples), count)
	}
	for _, s := range samples {
		want, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(s.Name)))
		if err != nil {
			t.Fatalf("sample %s names %q, which is not in the tree: %v", s.ID, s.Name, err)
		}
		b, err := st.Get(ctx, s.ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		if sha256.Sum256(b.Data) != sha256.Sum256(want) || !bytes.Equal(b.Data, want) {
			t.Errorf("%s: stored bytes differ from the file", s.Name)
		}
		if s.Checksum != sha256.Sum256(want) || s.Size != int64(len(want)) {
			t.Errorf("%s: listed size/checksum do not describe the file", s.Name)
		}
		class := strings.Split(s.Name, "/")[0]
		if labels[b.Label] != class || s.Label != b.Label {
			t.Errorf("%s: label %d (listed %d), want %d (%s)", s.Name, b.Label, s.Label, slices.Index(labels, class), class)
		}
		row := rows[s.Name]
		for i, col := range header[1:] {
			if got := s.Meta[col]; got != row[i+1] {
				t.Errorf("%s: metadata %s = %q, want %q", s.Name, col, got, row[i+1])
			}
		}
	}

	// The same ingest again changes nothing.
	blobs, metas := countRows(t, ds, "blobs"), countRows(t, ds, "samples")
	r = cassfs(t, "ingest", "-d", ds, "--csv", csvPath, root)
	if r.code != 0 {
		t.Fatalf("second ingest: %v", r)
	}
	if !strings.Contains(r.stdout, "0 files written") || !strings.Contains(r.stdout, "2000 unchanged") {
		t.Errorf("second ingest summary: want 0 written, 2000 unchanged:\n%s", r.stdout)
	}
	if b2, m2 := countRows(t, ds, "blobs"), countRows(t, ds, "samples"); b2 != blobs || m2 != metas || m2 != count {
		t.Errorf("after re-ingest: %d blobs, %d samples; before: %d, %d", b2, m2, blobs, metas)
	}
}

// TestIngestResume interrupts nothing by hand: it simulates the state an interrupted ingest
// leaves (some samples stored, an orphan blob without its row) and checks that a re-run
// completes the dataset without duplicates.
func TestIngestResume(t *testing.T) {
	dir := t.TempDir()
	if r := cassfs(t, "gen", "--out", dir, "--count", "60", "--mean-size", "5000"); r.code != 0 {
		t.Fatalf("gen: %v", r)
	}
	root := filepath.Join(dir, "images")
	ds := newDataset(t, "resume")
	if r := cassfs(t, "ingest", "-d", ds, root); r.code != 0 {
		t.Fatalf("ingest: %v", r)
	}
	s := cql(t, ds)
	defer s.Close()
	// Remove 20 metadata rows (the commit markers): as if the run died between blob and row.
	var names []string
	iter := s.Query("SELECT name FROM samples LIMIT 20").Iter()
	var n string
	for iter.Scan(&n) {
		names = append(names, n)
	}
	if err := iter.Close(); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if err := s.Query("DELETE FROM samples WHERE id = ?", store.SampleID(ds, n).String()).Exec(); err != nil {
			t.Fatal(err)
		}
	}
	if got := countRows(t, ds, "samples"); got != 40 {
		t.Fatalf("after deleting 20 rows: %d samples listed, want 40", got)
	}
	r := cassfs(t, "ingest", "-d", ds, root)
	if r.code != 0 {
		t.Fatalf("resumed ingest: %v", r)
	}
	if !strings.Contains(r.stdout, "20 files written") || !strings.Contains(r.stdout, "40 unchanged") {
		t.Errorf("resumed ingest: want 20 written, 40 unchanged:\n%s", r.stdout)
	}
	if b, m := countRows(t, ds, "blobs"), countRows(t, ds, "samples"); b != 60 || m != 60 {
		t.Errorf("after resume: %d blobs, %d samples, want 60 and 60", b, m)
	}
}
