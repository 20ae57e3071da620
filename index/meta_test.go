package index_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/cassfs/cassfs/index"
	"github.com/cassfs/cassfs/store"
)

// The index answers every sample's metadata after reordering to canonical order, and
// omits values a sample does not have.
func TestIndexMetadata(t *testing.T) {
	b := index.NewBuilder([]string{"a", "b"})
	want := map[string]map[string]string{}
	for k := range 300 {
		name := fmt.Sprintf("%c/t%d.png", 'a'+k%2, k)
		meta := map[string]string{"patient_id": fmt.Sprintf("p%d", k%7), "x": fmt.Sprint(k * 512)}
		if k%5 == 0 {
			delete(meta, "patient_id")
		}
		if k%11 == 0 {
			meta["note"] = "tumour, margin \"clear\""
		}
		if k%13 == 0 {
			meta["x"] = "" // an empty value is no value
		}
		want[name] = meta
		if err := b.Add(store.Sample{ID: store.SampleID("ds", name), Label: k % 2, Name: name, Size: 1, Meta: meta}); err != nil {
			t.Fatal(err)
		}
	}
	ix, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if cols := ix.Columns(); !slices.Equal(cols, []string{"note", "patient_id", "x"}) {
		t.Fatalf("Columns() = %q", cols)
	}
	for i := range uint32(ix.Len()) {
		name := ix.Labels()[ix.Label(i)] + "/" + ix.Name(i)
		for c, col := range ix.Columns() {
			v, ok := ix.Meta(i, c)
			w, wok := want[name][col]
			if wok && w == "" {
				wok = false
			}
			if ok != wok || string(v) != w {
				t.Fatalf("%s: column %s = %q, %v; want %q, %v", name, col, v, ok, w, wok)
			}
		}
	}
	// 7 patients, 300 coordinates less the empty ones, 1 note: values are stored once.
	if got, max := ix.MetaBytes(), int64(3*300*4+400*4+300*6+30); got > max {
		t.Errorf("metadata takes %d bytes, want at most %d", got, max)
	}
}
