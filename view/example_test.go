package view_test

import (
	"fmt"

	"github.com/cassfs/cassfs/index"
	"github.com/cassfs/cassfs/splits"
	"github.com/cassfs/cassfs/store"
	"github.com/cassfs/cassfs/view"
)

// Epoch 3 of a dataset of two classes: its entry names in epoch order, its file list
// (class/name and label, as DALI reads it), and lookups in a class directory.
func Example() {
	b := index.NewBuilder([]string{"benign", "tumor"})
	for k, name := range []string{"benign/a.jpg", "benign/b.jpg", "tumor/c.jpg", "tumor/d.jpg"} {
		data := []byte("pixels of " + name)
		s := store.Sample{ID: store.SampleID("tiles", name), Label: k / 2, Name: name, Size: int64(len(data)), Checksum: store.Checksum(data)}
		if err := b.Add(s); err != nil {
			panic(err)
		}
	}
	ix, err := b.Build()
	if err != nil {
		panic(err)
	}
	set := view.New(view.Config{Index: ix, Splits: []*splits.Split{splits.All(ix)}, Seed: 7, Mode: view.Strict})

	key, ok := set.EpochKey("all", "epoch-3")
	if !ok {
		panic("epoch-3 does not resolve")
	}
	e := set.Epoch(key)
	for k := range e.Order {
		fmt.Println(e.EntryName(uint32(k)))
	}
	fmt.Print(string(e.ReadFileList(0, int(e.FileListSize(false)), false)))

	tumor, _ := set.Class("tumor")
	i, ok := set.Lookup(e, tumor, "3_d.jpg")
	fmt.Println("tumor/3_d.jpg:", ok, ix.Path(i))
	_, ok = set.Lookup(e, tumor, "1_b.jpg") // a name of the other class
	fmt.Println("tumor/1_b.jpg:", ok)
	// Output:
	// 0_c.jpg
	// 1_b.jpg
	// 2_a.jpg
	// 3_d.jpg
	// tumor/0_c.jpg 1
	// benign/1_b.jpg 0
	// benign/2_a.jpg 0
	// tumor/3_d.jpg 1
	// tumor/3_d.jpg: true tumor/d.jpg
	// tumor/1_b.jpg: false
}
