package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cassfs/cassfs/internal/testkit"
	"github.com/cassfs/cassfs/splits"
	"github.com/cassfs/cassfs/store"
	"github.com/cassfs/cassfs/store/memstore"
	"github.com/google/uuid"
)

// tiles is a dataset of patients' tiles in the in-memory store; every 7th patient has
// tumor tiles, and patient 3's tiles lack a slide value when gap is set.
func tiles(t *testing.T, patients int, gap bool) *memstore.Store {
	t.Helper()
	ctx := context.Background()
	st := memstore.New("tiles", memstore.Options{})
	testkit.Check(t, st.SetLabels(ctx, []string{"normal", "tumor"}))
	testkit.Check(t, st.AddColumns(ctx, []string{"patient_id", "slide"}))
	for p := range patients {
		for k := range 10 + p%5 {
			label := 0
			if p%7 == 0 && k%2 == 0 {
				label = 1
			}
			name := fmt.Sprintf("%s/p%03d_%02d.jpg", []string{"normal", "tumor"}[label], p, k)
			data := []byte(name)
			meta := map[string]string{"patient_id": fmt.Sprintf("P%03d", p), "slide": fmt.Sprint(k % 2)}
			if gap && p == 3 {
				delete(meta, "slide")
			}
			if err := st.Put(ctx, store.Sample{ID: store.SampleID("tiles", name), Label: label, Name: name, Size: int64(len(data)), Checksum: store.Checksum(data), Meta: meta}, data, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	return st
}

func defaultCreate() createOpts {
	return createOpts{names: "train,val,test", ratios: "7:2:1", balance: "original", tolerance: 0.1, groupBy: "patient_id"}
}

func TestSplitCreateStoresAndReports(t *testing.T) {
	ctx := context.Background()
	st := tiles(t, 40, false)
	var out bytes.Buffer
	if err := createSplits(ctx, st, defaultCreate(), &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{"grouped by patient_id", "train", "no group is in more than one split", "stored train, val, test"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	infos := testkit.Must(st.Splits(ctx))(t)
	if len(infos) != 3 {
		t.Fatalf("stored %d splits, want 3", len(infos))
	}
	patientOf := map[uuid.UUID]string{}
	testkit.Check(t, st.Scan(ctx, func(s store.Sample) error { patientOf[s.ID] = s.Meta["patient_id"]; return nil }))
	owner := map[string]string{}
	total := 0
	for _, in := range infos {
		ids := testkit.Must(st.SplitMembers(ctx, in.Name))(t)
		total += len(ids)
		for _, id := range ids {
			p := patientOf[id]
			if o, ok := owner[p]; ok && o != in.Name {
				t.Errorf("patient %s in %s and %s", p, o, in.Name)
			}
			owner[p] = in.Name
		}
	}
	if total != len(patientOf) {
		t.Errorf("splits hold %d samples, dataset %d", total, len(patientOf))
	}

	// An existing name fails and changes nothing; --replace replaces.
	o := defaultCreate()
	o.seed = 5
	out.Reset()
	err := createSplits(ctx, st, o, &out)
	if !errors.Is(err, store.ErrExists) || !strings.Contains(err.Error(), "--replace") {
		t.Errorf("create over existing splits: %v, want ErrExists suggesting --replace", err)
	}
	if after := testkit.Must(st.Splits(ctx))(t); after[0].Set != infos[0].Set {
		t.Error("a refused create changed the stored splits")
	}
	o.replace = true
	if err := createSplits(ctx, st, o, &out); err != nil {
		t.Fatal(err)
	}

	// list and show say how they were made.
	out.Reset()
	listSplits(ctx, st, &out)
	if !strings.Contains(out.String(), "create seed=5 balance=original ratios=7:2:1 group-by=patient_id") {
		t.Errorf("list:\n%s", out.String())
	}
	out.Reset()
	if err := showSplit(ctx, st, "val", &out); err != nil || !strings.Contains(out.String(), `"seed": 5`) || !strings.Contains(out.String(), "size (asked)") {
		t.Errorf("show val: %v\n%s", err, out.String())
	}
	if err := showSplit(ctx, st, "nope", &out); !errors.Is(err, store.ErrNotFound) || !strings.Contains(err.Error(), "train, val") {
		t.Errorf("show nope: %v, want not found listing the stored splits", err)
	}
}

func TestSplitCreateBadInput(t *testing.T) {
	ctx := context.Background()
	st := tiles(t, 5, true)
	for _, tc := range []struct {
		mod   func(*createOpts)
		want  string
		usage bool
	}{
		{func(o *createOpts) { o.groupBy = "patient" }, `no metadata column "patient"; its columns are: patient_id, slide`, true},
		{func(o *createOpts) { o.groupBy = "patient_id,slide" }, "have no value in it (e.g. normal/p003_", false},
		{func(o *createOpts) { o.ratios = "7:x:1" }, "--ratios", true},
		{func(o *createOpts) { o.ratios = "0:0:0" }, "sum to zero", true},
		{func(o *createOpts) { o.ratios = "7:3" }, "one ratio per name", true},
		{func(o *createOpts) { o.names = "a,b,c,d,e,f"; o.ratios = "1:1:1:1:1:1" }, "only 5 groups", false},
		{func(o *createOpts) { o.folds = 6 }, "only 5 groups", false},
		{func(o *createOpts) { o.folds = 1 }, "at least 2", true},
		{func(o *createOpts) { o.balance = "tumor=1" }, `class "normal" has no weight`, true},
		{func(o *createOpts) { o.balance = "1:2:3" }, "2 weights", true},
		{func(o *createOpts) { o.balance = "cat=1,dog=1" }, `no class "cat"`, true},
		{func(o *createOpts) { o.names = "all,b,c" }, "reserved", false},
		{func(o *createOpts) { o.tolerance = 1 }, "--tolerance", true},
		{func(o *createOpts) { o.balance = "uniform"; o.ratios = "1:1:1" }, "--accept-shortfall", false},
	} {
		o := defaultCreate()
		tc.mod(&o)
		var out bytes.Buffer
		err := createSplits(ctx, st, o, &out)
		var u usageError
		if err == nil || !strings.Contains(err.Error(), tc.want) || errors.As(err, &u) != tc.usage {
			t.Errorf("%+v: got %v (usage error: %v), want one containing %q (usage error: %v)", o, err, errors.As(err, &u), tc.want, tc.usage)
		}
		if infos := testkit.Must(st.Splits(ctx))(t); len(infos) != 0 {
			t.Fatalf("%+v: a failed create stored %d splits", o, len(infos))
		}
	}
}

func TestSplitFoldsDryRun(t *testing.T) {
	ctx := context.Background()
	st := tiles(t, 20, false)
	o := defaultCreate()
	o.folds, o.dryRun = 4, true
	var out bytes.Buffer
	if err := createSplits(ctx, st, o, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "would store fold-0-train, fold-0-val, fold-1-train") {
		t.Errorf("dry run output:\n%s", out.String())
	}
	if infos := testkit.Must(st.Splits(ctx))(t); len(infos) != 0 {
		t.Errorf("a dry run stored %d splits", len(infos))
	}
}

// TestSplitExportImport: splits exported and imported by the commands' code paths
// (splits.Export, and importSplits around splits.Import, both tested in splits) round-trip
// created splits, and import says what it did.
func TestSplitExportImport(t *testing.T) {
	ctx := context.Background()
	src := tiles(t, 30, false)
	var out bytes.Buffer
	testkit.Check(t, createSplits(ctx, src, defaultCreate(), &out))
	var file bytes.Buffer
	testkit.Check(t, splits.Export(ctx, src, nil, &file))
	dst := tiles(t, 30, false) // the same samples, in another store
	out.Reset()
	testkit.Check(t, importSplits(ctx, dst, bytes.NewReader(file.Bytes()), "s.json", false, &out))
	if got := out.String(); got != "imported test, train, val into dataset tiles\n" {
		t.Errorf("import printed %q", got)
	}
	for _, n := range []string{"train", "val", "test"} {
		if a, b := testkit.Must(src.SplitMembers(ctx, n))(t), testkit.Must(dst.SplitMembers(ctx, n))(t); !slices.Equal(a, b) {
			t.Errorf("split %s differs after export and import", n)
		}
	}
	if err := importSplits(ctx, dst, bytes.NewReader(file.Bytes()), "s.json", false, &out); !errors.Is(err, store.ErrExists) {
		t.Errorf("second import: %v, want ErrExists", err)
	}
}
