//go:build e2e

package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/cassfs/cassfs/internal/testkit"
	"github.com/gocql/gocql"
	"github.com/google/uuid"
)

// written is what writers/dl_tables.py wrote: a row per file.
type written struct {
	Rows []struct {
		ID      string `json:"id"`
		Rel     string `json:"rel"`
		Label   int    `json:"label"`
		Split   string `json:"split"`
		Patient string `json:"patient"`
	} `json:"rows"`
}

// writeTables writes the tree at root into keyspace ks in layout (plugin or cassandradl)
// with the Python cassandra-driver, as those tools' writers do.
func writeTables(t *testing.T, ks, layout, root string, extra ...string) written {
	t.Helper()
	var w written
	runPython(t, &w, "../writers/dl_tables.py", append([]string{"--hosts", strings.Join(hosts, ","), "--keyspace", ks, "--layout", layout}, append(extra, root)...)...)
	return w
}

// tableRows counts the rows of every table of keyspace ks, with the latest write time of
// each: what must not change while cassfs attaches and mounts.
func tableRows(t *testing.T, ks string) map[string]string {
	t.Helper()
	s := cql(t, "")
	defer s.Close()
	var tables []string
	iter := s.Query(`SELECT table_name FROM system_schema.tables WHERE keyspace_name = ?`, ks).Iter()
	var name string
	for iter.Scan(&name) {
		tables = append(tables, name)
	}
	if err := iter.Close(); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, tb := range tables {
		var n int
		if err := s.Query(`SELECT count(*) FROM ` + ks + `.` + tb).Scan(&n); err != nil {
			t.Fatal(err)
		}
		out[tb] = fmt.Sprint(n)
	}
	return out
}

// splitTree copies the ImageFolder tree at root into dir/<split>/<class>/<file>, every
// fifth file of a class into val, the others into train: the layout the DALI plugin's
// writer reads.
func splitTree(t *testing.T, root, dir string) map[string]*srcDataset {
	t.Helper()
	out := map[string]*srcDataset{}
	for _, split := range []string{"train", "val"} {
		out[split] = &srcDataset{root: filepath.Join(dir, split), sha: map[string]string{}, byHash: map[string]string{}}
	}
	classes, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range classes {
		files, err := os.ReadDir(filepath.Join(root, c.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for k, f := range files {
			split := "train"
			if k%5 == 0 {
				split = "val"
			}
			data, err := os.ReadFile(filepath.Join(root, c.Name(), f.Name()))
			if err != nil {
				t.Fatal(err)
			}
			d := out[split]
			if err := os.MkdirAll(filepath.Join(d.root, c.Name()), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(d.root, c.Name(), f.Name()), data, 0o644); err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(data)
			rel := c.Name() + "/" + f.Name()
			d.sha[rel], d.byHash[hex.EncodeToString(sum[:])] = hex.EncodeToString(sum[:]), rel
		}
	}
	return out
}

// sourceTree reads an ImageFolder tree as a srcDataset (no index: the checks here name
// the classes themselves).
func sourceTree(t *testing.T, root string) *srcDataset {
	t.Helper()
	d := &srcDataset{root: root}
	var err error
	if d.sha, d.byHash, err = hashTree(root); err != nil {
		t.Fatal(err)
	}
	return d
}

// classesOf returns the class directory names of a tree, sorted: label i is the i-th.
func classesOf(t *testing.T, root string) []string {
	t.Helper()
	es, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out
}

// eachOnce checks that a reader's items are every file of d exactly once, each with the
// label of its class in classes.
func eachOnce(t *testing.T, d *srcDataset, classes []string, reader string, items []readSample) {
	t.Helper()
	seen := map[string]bool{}
	for _, it := range items {
		if it.rel == "" || seen[it.rel] {
			t.Fatalf("%s read unknown or repeated content (%q)", reader, it.rel)
		}
		seen[it.rel] = true
		if want := slices.Index(classes, class(it.rel)); it.label != want {
			t.Errorf("%s: %s with label %d, want %d", reader, it.rel, it.label, want)
		}
	}
	if len(seen) != len(d.sha) {
		t.Errorf("%s read %d files, want %d", reader, len(seen), len(d.sha))
	}
}

// readEpochs reads epoch 0 of a split of the mount with DALI (file_root) and torchvision,
// and epoch 1 with DALI (file_list), checking every file once with its label (the index of
// its source class in classes) and the class directories (dirs).
func readEpochs(t *testing.T, d *srcDataset, classes, dirs []string, split string) {
	t.Helper()
	e0, e1 := filepath.Join(split, "epoch-0"), filepath.Join(split, "epoch-1")
	if got := classesOf(t, e0); !slices.Equal(got, dirs) {
		t.Errorf("%s: class directories %q, want %q", e0, got, dirs)
	}
	_, items := readDALI(t, d, "--file-root", e0)
	eachOnce(t, d, classes, "DALI file_root "+e0, items)
	_, items = readDALI(t, d, "--file-list", filepath.Join(e1, "file_list.txt"))
	eachOnce(t, d, classes, "DALI file_list "+e1, items)
	got, items := readTorchvision(t, d, e0)
	if !slices.Equal(got, dirs) {
		t.Errorf("torchvision ImageFolder classes %q, want %q", got, dirs)
	}
	eachOnce(t, d, classes, "torchvision "+e0, items)
}

// TestAttachDALIPluginTables attaches the Cassandra DALI plugin's example tables, written
// by the plugin's way (cassandra-driver, one INSERT per file, uuid4), as splits train and
// val, and reads every epoch through the mount with DALI and torchvision: every file once,
// its label and class name, its bytes. Nothing is written into the plugin's keyspace; a
// blob rewritten there afterwards is refused as corrupt; attaching again reads only it.
func TestAttachDALIPluginTables(t *testing.T) {
	dir := t.TempDir()
	if r := cassfs(t, "gen", "--out", dir, "--count", "60", "--classes", "3", "--mean-size", "4000", "--seed", "40", "--progress", "none"); r.code != 0 {
		t.Fatal(r)
	}
	trees := splitTree(t, filepath.Join(dir, "images"), filepath.Join(dir, "plugin"))
	ks, ds := newDataset(t, "plugin_src"), newDataset(t, "plugin_att")
	w := writeTables(t, ks, "plugin", filepath.Join(dir, "plugin"))
	before := tableRows(t, ks)

	r := cassfs(t, "dataset", "attach", ds, "--progress", "none",
		"--data-table", "train="+ks+".data_train", "--data-table", "val="+ks+".data_val",
		"--metadata-table", ks+".metadata_train", "--metadata-table", ks+".metadata_val")
	if r.code != 0 || !strings.Contains(r.stdout, "60 samples in 3 classes; 60 blobs read") || !strings.Contains(r.stdout, "splits: train, val") {
		t.Fatalf("attach: %s", r)
	}
	// Other tests' datasets may be half-made meanwhile: only this one's line matters.
	if r := cassfs(t, "dataset", "list"); !strings.Contains(r.stdout, ds) {
		t.Errorf("dataset list does not list %s: %s", ds, r)
	}
	if r := cassfs(t, "dataset", "show", ds); r.code != 0 || !strings.Contains(r.stdout, "or_split") {
		t.Errorf("dataset show: %s", r)
	}

	m := startMount(t, ds, "--metrics-addr", "127.0.0.1:0", "--timeout", "3s")
	classes := classesOf(t, trees["train"].root)
	for _, split := range []string{"train", "val"} {
		readEpochs(t, trees[split], classes, classes, filepath.Join(m.dir, split))
	}
	if got := tableRows(t, ks); !maps.Equal(got, before) {
		t.Errorf("the plugin's tables after attach and mount: %v, before %v", got, before)
	}
	// Prefetched in blocks from the plugin's tables, a block per table.
	if v, _ := metricValue(scrape(t, metricsURL(t, m)), "cassfs_fetch_block_samples_total"); v < 30 {
		t.Errorf("%v samples of the attached tables read in blocks, want most of the 60", v)
	}

	// A blob rewritten behind cassfs's back is never served.
	var victim string
	for _, row := range w.Rows {
		if row.Split == "val" {
			victim = row.ID
			break
		}
	}
	s := cql(t, ks)
	defer s.Close()
	id := gocql.UUID(uuid.MustParse(victim))
	var data []byte
	if err := s.Query(`SELECT data FROM data_val WHERE id = ?`, id).Scan(&data); err != nil {
		t.Fatal(err)
	}
	data[len(data)-1] ^= 0xff
	if err := s.Query(`UPDATE data_val SET data = ? WHERE id = ?`, data, id).Exec(); err != nil {
		t.Fatal(err)
	}
	m2 := startMount(t, ds, "--metrics-addr", "127.0.0.1:0", "--timeout", "3s")
	matches := testkit.Must(filepath.Glob(filepath.Join(m2.dir, "by-uuid", victim+".*")))(t)
	if len(matches) != 1 {
		t.Fatalf("by-uuid/%s.*: %v", victim, matches)
	}
	if _, err := os.ReadFile(matches[0]); !errors.Is(err, syscall.EIO) {
		t.Errorf("read of a blob rewritten after attach: %v, want EIO", err)
	}
	if v, ok := metricValue(scrape(t, metricsURL(t, m2)), `cassfs_fetch_errors_total\{kind="corrupt"\}`); !ok || v != 1 {
		t.Errorf("cassfs_fetch_errors_total{kind=\"corrupt\"} = %v, want 1", v)
	}
	m2.stop(t)
	m.stop(t)

	// Attaching again reads the rewritten blob only.
	r = cassfs(t, "dataset", "attach", ds, "--progress", "none",
		"--data-table", "train="+ks+".data_train", "--data-table", "val="+ks+".data_val",
		"--metadata-table", ks+".metadata_train", "--metadata-table", ks+".metadata_val")
	if r.code != 0 || !strings.Contains(r.stdout, "1 blobs read") || !strings.Contains(r.stdout, "59 unchanged") {
		t.Errorf("attach again: %s", r)
	}

	r = cassfs(t, "dataset", "delete", ds, "--yes")
	if r.code != 0 || !strings.Contains(r.stdout, "catalogue only") {
		t.Errorf("dataset delete: %s", r)
	}
	if got := tableRows(t, ks); len(got) != len(before) || got["data_val"] != before["data_val"] {
		t.Errorf("the plugin's tables after dataset delete: %v, before %v", got, before)
	}
}

// TestAttachCassandraDLTables attaches the 2021 paper's data_by_uuid and metadata_by_uuid,
// reads the whole dataset with DALI and torchvision, and makes patient-disjoint splits
// from the attached metadata.
func TestAttachCassandraDLTables(t *testing.T) {
	dir := t.TempDir()
	if r := cassfs(t, "gen", "--out", dir, "--count", "60", "--classes", "2", "--patients", "6", "--mean-size", "4000", "--seed", "41", "--progress", "none"); r.code != 0 {
		t.Fatal(r)
	}
	root := filepath.Join(dir, "images")
	src := sourceTree(t, root)
	ks, ds := newDataset(t, "cdl_src"), newDataset(t, "cdl_att")
	w := writeTables(t, ks, "cassandradl", root, "--csv", filepath.Join(dir, "metadata.csv"))
	before := tableRows(t, ks)

	// Bad input first: a metadata row whose label contradicts the data row.
	s := cql(t, ks)
	defer s.Close()
	bad := gocql.UUID(uuid.MustParse(w.Rows[0].ID))
	if err := s.Query(`UPDATE metadata_by_uuid SET label = 7 WHERE patch_id = ?`, bad).Exec(); err != nil {
		t.Fatal(err)
	}
	r := cassfs(t, "dataset", "attach", ds, "--progress", "none", "--data-table", ks+".data_by_uuid", "--metadata-table", ks+".metadata_by_uuid")
	if r.code == 0 || !strings.Contains(r.stderr, w.Rows[0].ID) || !strings.Contains(r.stderr, "label") || !strings.Contains(r.stderr, "not made") {
		t.Errorf("attach with a contradicting label: %s", r)
	}
	if r := cassfs(t, "dataset", "list"); strings.Contains(r.stdout, ds) {
		t.Errorf("dataset list shows %s after a failed attach: %s", ds, r)
	}
	var left int
	if err := s.Query(`SELECT count(*) FROM system_schema.keyspaces WHERE keyspace_name = ?`, ds).Scan(&left); err != nil || left != 0 {
		t.Errorf("keyspace %s after a first attach stopped by bad input: %d, %v; want it gone", ds, left, err)
	}
	if got := tableRows(t, ks); !maps.Equal(got, before) {
		t.Errorf("CassandraDL's tables after a failed attach: %v, before %v", got, before)
	}
	if err := s.Query(`UPDATE metadata_by_uuid SET label = ? WHERE patch_id = ?`, w.Rows[0].Label, bad).Exec(); err != nil {
		t.Fatal(err)
	}
	before = tableRows(t, ks)

	r = cassfs(t, "dataset", "attach", ds, "--progress", "none", "--data-table", ks+".data_by_uuid", "--metadata-table", ks+".metadata_by_uuid")
	if r.code != 0 {
		t.Fatalf("attach: %s", r)
	}
	m := startMount(t, ds)
	// No text column has one value per label: the classes are named by their labels.
	classes := classesOf(t, root)
	var dirs []string
	for l := range classes {
		dirs = append(dirs, fmt.Sprintf("class_%d", l))
	}
	readEpochs(t, src, classes, dirs, filepath.Join(m.dir, "all"))
	// The metadata table's columns are the samples' metadata.
	csv := string(testkit.Must(os.ReadFile(filepath.Join(m.dir, "all", "samples.csv")))(t))
	for _, want := range []string{"patient_id", "slide_num", w.Rows[5].ID + ",", "," + w.Rows[5].Patient + ","} {
		if !strings.Contains(csv, want) {
			t.Errorf("all/samples.csv lacks %q:\n%.400s", want, csv)
		}
	}
	m.stop(t)

	if r := cassfs(t, "split", "create", "-d", ds, "--names", "train,val", "--ratios", "2:1", "--group-by", "patient_id"); r.code != 0 {
		t.Fatalf("split create --group-by patient_id: %s", r)
	}
	patient := map[uuid.UUID]string{}
	for _, row := range w.Rows {
		patient[uuid.MustParse(row.ID)] = row.Patient
	}
	st := openStore(t, ds, false)
	owner := map[string]string{}
	total := 0
	for _, name := range []string{"train", "val"} {
		ids, err := st.SplitMembers(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		total += len(ids)
		for _, id := range ids {
			p := patient[id]
			if o, ok := owner[p]; ok && o != name {
				t.Errorf("patient %s is in %s and %s", p, o, name)
			}
			owner[p] = name
		}
	}
	if total != len(w.Rows) {
		t.Errorf("the splits hold %d samples, the tables %d", total, len(w.Rows))
	}
	if got := tableRows(t, ks); !maps.Equal(got, before) {
		t.Errorf("CassandraDL's tables after attach, mount and split: %v, before %v", got, before)
	}
}
