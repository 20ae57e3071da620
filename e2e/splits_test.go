//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cassfs/cassfs/splits"
	"github.com/cassfs/cassfs/store"
	"github.com/gocql/gocql"
	"github.com/google/uuid"
)

// splitDataset is a generated dataset of patients' tiles with train/val/test created by
// the binary, grouped by patient.
type splitDataset struct {
	*srcDataset
	patient map[string]string      // source path → patient_id
	members map[string][]string    // split → source paths
	ids     map[string][]uuid.UUID // split → member ids
	relOf   func(i uint32) string  // canonical index → source path
	split   func(name string) *splits.Split
}

func newSplitDataset(t *testing.T) *splitDataset {
	t.Helper()
	dir := t.TempDir()
	d, err := generate(t, dir, newDataset(t, "splits"), hosts, "--count", "480", "--classes", "3", "--patients", "16", "--mean-size", "20000", "--seed", "5")
	if err != nil {
		t.Fatal(err)
	}
	r := cassfs(t, "split", "create", "-d", d.name, "--group-by", "patient_id", "--names", "train,val,test", "--ratios", "7:2:1", "--seed", "1")
	if r.code != 0 || !strings.Contains(r.stdout, "no group is in more than one split") || !strings.Contains(r.stdout, "stored train, val, test") {
		t.Fatalf("split create: %s", r)
	}
	t.Logf("split create:\n%s", r.stdout)
	sd := &splitDataset{srcDataset: d, patient: map[string]string{}, members: map[string][]string{}, ids: map[string][]uuid.UUID{}}
	header, rows := readCSV(t, filepath.Join(dir, "metadata.csv"))
	col := slices.Index(header, "patient_id")
	for rel, row := range rows {
		sd.patient[rel] = row[col]
	}
	sd.relOf = func(i uint32) string { return d.ix.Labels()[d.ix.Label(i)] + "/" + d.ix.Name(i) }
	st := openStore(t, d.name, false)
	for _, name := range []string{"train", "val", "test"} {
		ids, err := st.SplitMembers(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		sd.ids[name] = ids
		for _, id := range ids {
			i, ok := d.ix.Find(id)
			if !ok {
				t.Fatalf("split %s lists %s, not in the dataset", name, id)
			}
			sd.members[name] = append(sd.members[name], sd.relOf(i))
		}
	}
	sd.split = func(name string) *splits.Split {
		s := &splits.Split{Name: name}
		for _, id := range sd.ids[name] {
			i, _ := d.ix.Find(id)
			s.Members = append(s.Members, i)
		}
		slices.Sort(s.Members)
		return s
	}
	return sd
}

// TestSplitCreateGroupsByPatient: the stored splits partition the dataset and no patient is
// in two of them; the sizes follow the ratios within what whole patients allow.
func TestSplitCreateGroupsByPatient(t *testing.T) {
	sd := newSplitDataset(t)
	owner := map[string]string{}
	total := 0
	for name, rels := range sd.members {
		total += len(rels)
		for _, rel := range rels {
			p := sd.patient[rel]
			if o, ok := owner[p]; ok && o != name {
				t.Errorf("patient %s is in %s and %s", p, o, name)
			}
			owner[p] = name
		}
	}
	if total != len(sd.sha) {
		t.Errorf("the splits hold %d samples, the dataset %d", total, len(sd.sha))
	}
	if n := len(sd.members["train"]); n < len(sd.sha)*55/100 || n > len(sd.sha)*85/100 {
		t.Errorf("train holds %d of %d samples, asked 70%%", n, len(sd.sha))
	}

	// list, export, delete, import: the round trip keeps every member.
	if r := cassfs(t, "split", "list", "-d", sd.name); r.code != 0 || strings.Count(r.stdout, "group-by=patient_id") != 3 {
		t.Errorf("split list: %s", r)
	}
	if r := cassfs(t, "split", "show", "-d", sd.name, "val"); r.code != 0 || !strings.Contains(r.stdout, `"group_by"`) || !strings.Contains(r.stdout, "size (asked)") {
		t.Errorf("split show val: %s", r)
	}
	file := filepath.Join(t.TempDir(), "splits.json")
	if r := cassfs(t, "split", "export", "-d", sd.name, "-o", file); r.code != 0 {
		t.Fatalf("split export: %s", r)
	}
	if r := cassfs(t, "split", "delete", "-d", sd.name, "val", "nope"); r.code == 0 || !strings.Contains(r.stderr, `"nope"`) {
		t.Errorf("delete of a missing split: %s", r)
	}
	if r := cassfs(t, "split", "delete", "-d", sd.name, "val"); r.code != 0 {
		t.Fatalf("split delete: %s", r)
	}
	if r := cassfs(t, "split", "import", "-d", sd.name, file); r.code == 0 || !strings.Contains(r.stderr, "--replace") {
		t.Errorf("import over existing train and test without --replace: %s", r)
	}
	if r := cassfs(t, "split", "import", "-d", sd.name, "--replace", file); r.code != 0 {
		t.Fatalf("split import: %s", r)
	}
	st := openStore(t, sd.name, false)
	for name, want := range sd.ids {
		got, err := st.SplitMembers(context.Background(), name)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("split %s after export, delete and import: %d members, %v; want %d", name, len(got), err, len(want))
		}
	}

	// Bad input: clear errors, nothing written.
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--group-by", "patient_id"}, 1, "--replace"},
		{[]string{"--group-by", "patient", "--names", "a,b", "--ratios", "1:1"}, 2, `no metadata column "patient"`},
		{[]string{"--names", "a,b", "--ratios", "0:0"}, 2, "sum to zero"},
		{[]string{"--names", "cv", "--group-by", "patient_id", "--folds", "40"}, 1, "only 16 groups"},
		{[]string{"--names", "a,b", "--ratios", "1:1", "--balance", "3:1"}, 2, "3 weights"},
	} {
		r := cassfs(t, append([]string{"split", "create", "-d", sd.name}, tc.args...)...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("split create %v: got %s\nwant exit %d and %q", tc.args, r, tc.code, tc.want)
		}
	}
	if r := cassfs(t, "split", "list", "-d", sd.name); strings.Count(r.stdout, "\n") != 4 {
		t.Errorf("failed creates changed the stored splits:\n%s", r.stdout)
	}
	if r := cassfs(t, "split", "list", "-d", "no_such_dataset"); r.code != 1 || !strings.Contains(r.stderr, "no_such_dataset") {
		t.Errorf("split list of a missing dataset: %s", r)
	}
}

// TestShardDirectoriesWithReaders: one mount serves every rank (<split>/shard-R-of-4/);
// DALI reading the training split's epoch through each rank's directory reads every
// training sample exactly once in total per epoch, and torchvision's ImageFolder reads a
// rank's epoch directory as it reads any: the same samples as DALI, with their labels.
func TestShardDirectoriesWithReaders(t *testing.T) {
	sd := newSplitDataset(t)
	train := sd.members["train"]
	m := startMount(t, sd.name, "--seed", "7")
	entries, err := os.ReadDir(m.dir)
	if err != nil {
		t.Fatal(err)
	}
	var root []string
	for _, e := range entries {
		root = append(root, e.Name())
	}
	if want := []string{"all", "by-uuid", "test", "train", "val"}; !slices.Equal(root, want) {
		t.Errorf("mount root lists %v, want %v", root, want)
	}
	for _, epoch := range []string{"epoch-0", "epoch-1"} {
		seen := map[string]int{}
		for r := range 4 {
			dir := filepath.Join(m.dir, "train", fmt.Sprintf("shard-%d-of-4", r), epoch)
			_, items := readDALI(t, sd.srcDataset, "--file-list", filepath.Join(dir, "file_list.txt"))
			if n := len(items); n < len(train)/4 || n > len(train)/4+1 {
				t.Errorf("%s rank %d: DALI read %d samples, want %d or %d", epoch, r, n, len(train)/4, len(train)/4+1)
			}
			var rels []string
			for _, it := range items {
				if it.rel == "" || !slices.Contains(train, it.rel) {
					t.Fatalf("%s rank %d: DALI read %q, not a training sample", epoch, r, it.rel)
				}
				if want := slices.Index(sd.ix.Labels(), class(it.rel)); it.label != want {
					t.Errorf("%s: label %d, want %d", it.rel, it.label, want)
				}
				seen[it.rel]++
				rels = append(rels, it.rel)
			}
			if r == 2 && epoch == "epoch-1" {
				_, titems := readTorchvision(t, sd.srcDataset, dir)
				var got []string
				for _, it := range titems {
					got = append(got, it.rel)
					if want := slices.Index(sd.ix.Labels(), class(it.rel)); it.label != want {
						t.Errorf("torchvision: %s with label %d, want %d", it.rel, it.label, want)
					}
				}
				slices.Sort(got)
				slices.Sort(rels)
				if !slices.Equal(got, rels) {
					t.Errorf("torchvision read rank 2's epoch 1 as %d samples, DALI as %d: not the same samples", len(got), len(rels))
				}
			}
		}
		for _, rel := range train {
			if seen[rel] != 1 {
				t.Errorf("%s: training sample %s read %d times over the four ranks, want once", epoch, rel, seen[rel])
			}
		}
	}
}

// TestResumedEpochWithReaders: a job that consumed K samples of an epoch continues with
// epoch-N@K: DALI and torchvision (reading in the epoch's order) read exactly the remaining
// samples, in order; within a shard too.
func TestResumedEpochWithReaders(t *testing.T) {
	sd := newSplitDataset(t)
	sh := splits.Shard{Rank: 1, Count: 4}
	m := startMount(t, sd.name, "--seed", "7", "--shard", "1/4", "--order", "strict")
	var want []string // the documented order of rank 1's part of epoch 1 of train
	for _, i := range splits.NewEpoch(sd.ix, sd.split("train"), 7, 1, splits.View{Shard: sh}).Order {
		want = append(want, sd.relOf(i))
	}
	_, items := readDALI(t, sd.srcDataset, "--file-list", filepath.Join(m.dir, "train", "epoch-1", "file_list.txt"))
	var full []string
	for _, it := range items {
		full = append(full, it.rel)
	}
	if !slices.Equal(full, want) {
		t.Fatalf("DALI read rank 1's epoch 1 as %d samples, not the documented shard order (%d)", len(full), len(want))
	}
	const k = 29
	_, items = readDALI(t, sd.srcDataset, "--file-list", filepath.Join(m.dir, "train", "epoch-1@"+strconv.Itoa(k), "file_list.txt"))
	var rest []string
	for _, it := range items {
		rest = append(rest, it.rel)
	}
	if !slices.Equal(rest, want[k:]) {
		t.Errorf("DALI on epoch-1@%d read %d samples, want exactly the %d from position %d on, in order", k, len(rest), len(want)-k, k)
	}
	// torchvision in the epoch's order (the resume example of docs/mount-and-readers.md): the same sequence.
	_, titems := readTorchvision(t, sd.srcDataset, filepath.Join(m.dir, "train", "epoch-1@"+strconv.Itoa(k)), "--epoch-order")
	var got []string
	for _, it := range titems {
		got = append(got, it.rel)
		if want := slices.Index(sd.ix.Labels(), class(it.rel)); it.label != want {
			t.Errorf("torchvision: %s with label %d, want %d", it.rel, it.label, want)
		}
	}
	if !slices.Equal(got, want[k:]) {
		t.Errorf("torchvision on epoch-1@%d read %d samples, want exactly the %d from position %d on, in order", k, len(got), len(want)-k, k)
	}
}

// TestStoredSplitDamage: a split whose member chunk was altered or lost behind cassfs's
// back is refused as corrupt on read, never served as a different split.
func TestStoredSplitDamage(t *testing.T) {
	ctx := context.Background()
	ds := newDataset(t, "splitdmg")
	st := openStore(t, ds, true)
	members := make([]uuid.UUID, 2*32768+5) // three chunks
	for k := range members {
		members[k] = uuid.NewSHA1(uuid.NameSpaceOID, []byte(strconv.Itoa(k)))
	}
	slices.SortFunc(members, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
	if err := st.PutSplits(ctx, []store.NewSplit{{Name: "train", Members: members}}, "{}", "{}", false); err != nil {
		t.Fatal(err)
	}
	if got, err := st.SplitMembers(ctx, "train"); err != nil || !slices.Equal(got, members) {
		t.Fatalf("SplitMembers before damage: %d ids, %v", len(got), err)
	}
	s := cql(t, ds)
	defer s.Close()
	var gen gocql.UUID
	if err := s.Query(`SELECT generation FROM splits WHERE bucket = 0 AND name = 'train'`).Scan(&gen); err != nil {
		t.Fatal(err)
	}
	var ids []byte
	if err := s.Query(`SELECT ids FROM split_chunks WHERE generation = ? AND chunk = 1`, gen).Scan(&ids); err != nil {
		t.Fatal(err)
	}
	// One flipped bit in the middle chunk.
	flipped := slices.Clone(ids)
	flipped[len(flipped)/2] ^= 1
	if err := s.Query(`UPDATE split_chunks SET ids = ? WHERE generation = ? AND chunk = 1`, flipped, gen).Exec(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SplitMembers(ctx, "train"); !errors.Is(err, store.ErrCorrupt) {
		t.Errorf("SplitMembers with a flipped bit: %v, want ErrCorrupt", err)
	}
	// The chunk lost, as a torn write would leave it.
	if err := s.Query(`DELETE FROM split_chunks WHERE generation = ? AND chunk = 1`, gen).Exec(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SplitMembers(ctx, "train"); !errors.Is(err, store.ErrCorrupt) {
		t.Errorf("SplitMembers with a chunk missing: %v, want ErrCorrupt", err)
	}
}
