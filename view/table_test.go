package view

import (
	"bytes"
	"encoding/csv"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/cassfs/cassfs/index"
	"github.com/cassfs/cassfs/splits"
	"github.com/cassfs/cassfs/store"
)

// samples.csv parses as CSV with one row per member of the split, every field what the
// index holds (values with commas, quotes and line breaks included), whichever pieces it is
// read in.
func TestSamplesTable(t *testing.T) {
	classes := []string{"b", "a"} // not in bytewise order: class directories get a prefix
	bld := index.NewBuilder(classes)
	meta := map[string]map[string]string{}
	for k := range 1000 {
		c := k % 2
		name := fmt.Sprintf("%s/tile %d.png", classes[c], k)
		m := map[string]string{"patient_id": fmt.Sprintf("p%d", k%9), "note": []string{"", "a, b", "say \"x\"", "two\nlines", " lead", "\u00a0nbsp", "\\.", "cr\r", "\vx", "plain"}[k%10]}
		meta[name] = m
		data := []byte(name)
		if err := bld.Add(store.Sample{ID: store.SampleID("t", name), Label: c, Name: name, Size: int64(len(data)), Checksum: store.Checksum(data), Meta: m}); err != nil {
			t.Fatal(err)
		}
	}
	ix, err := bld.Build()
	if err != nil {
		t.Fatal(err)
	}
	var members []uint32
	for i := range uint32(ix.Len()) {
		if i%3 != 1 {
			members = append(members, i)
		}
	}
	s := New(Config{Index: ix, Splits: []*splits.Split{{Name: "train", Members: members}}, Shard: splits.Shard{Rank: 1, Count: 2}})
	if _, ok := s.Table("nope"); ok {
		t.Error("a table of a split that does not exist")
	}
	tab, ok := s.Table("train")
	if !ok {
		t.Fatal("no table of train")
	}
	full := tab.Read(0, int(tab.Size())+10)
	if int64(len(full)) != tab.Size() {
		t.Fatalf("read %d bytes, Size() = %d", len(full), tab.Size())
	}
	rows, err := csv.NewReader(bytes.NewReader(full)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"uuid", "class", "label", "file", "name", "size", "sha256", "note", "patient_id"}; !slices.Equal(rows[0], want) {
		t.Fatalf("header %q, want %q", rows[0], want)
	}
	if len(rows)-1 != len(members) {
		t.Fatalf("%d rows, want one per member of the split (%d), whatever the shard", len(rows)-1, len(members))
	}
	var want bytes.Buffer // what encoding/csv writes for the same rows
	w := csv.NewWriter(&want)
	w.WriteAll(rows)
	if !bytes.Equal(full, want.Bytes()) {
		t.Errorf("samples.csv differs from what encoding/csv writes for its rows")
	}
	for k, r := range rows[1:] {
		i := members[k]
		label := ix.Label(i)
		name := classes[label] + "/" + ix.Name(i)
		sum := ix.Checksum(i)
		want := []string{ix.ID(i).String(), s.ClassNames()[label], strconv.Itoa(label), ix.Name(i), name,
			strconv.FormatInt(ix.Size(i), 10), hex.EncodeToString(sum[:]), meta[name]["note"], meta[name]["patient_id"]}
		if !slices.Equal(r, want) {
			t.Fatalf("row %d = %q, want %q", k, r, want)
		}
	}
	// Any pieces give the same bytes.
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		off := rng.IntN(len(full) + 5)
		n := 1 + rng.IntN(3*tableBlock*100)
		got := tab.Read(int64(off), n)
		want := full[min(off, len(full)):min(off+n, len(full))]
		if !bytes.Equal(got, want) {
			t.Fatalf("Read(%d, %d) = %d bytes differing from the table's", off, n, len(got))
		}
	}
}
