package memstore_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/cassfs/cassfs/store"
	"github.com/cassfs/cassfs/store/memstore"
	"github.com/google/uuid"
)

// A dataset in memory, as tests and benchmarks use it in place of Cassandra: samples put,
// listed by a scan and read back by id; a sample made to fail reads as the store's error.
func Example() {
	ctx := context.Background()
	broken := store.SampleID("tiles", "tumor/c.jpg")
	st := memstore.New("tiles", memstore.Options{
		FailGet: func(id uuid.UUID) error {
			if id == broken {
				return store.ErrUnavailable
			}
			return nil
		},
	})
	if err := st.SetLabels(ctx, []string{"benign", "tumor"}); err != nil {
		panic(err)
	}
	for k, name := range []string{"benign/a.jpg", "benign/b.jpg", "tumor/c.jpg"} {
		data := []byte("pixels of " + name)
		s := store.Sample{ID: store.SampleID("tiles", name), Label: k / 2, Name: name, Size: int64(len(data)),
			Checksum: store.Checksum(data), CRC32C: store.CRC32C(data), HasCRC32C: true}
		if err := st.Put(ctx, s, data, nil); err != nil {
			panic(err)
		}
	}

	n := 0
	if err := st.Scan(ctx, func(s store.Sample) error { n++; return nil }); err != nil {
		panic(err)
	}
	fmt.Println(n, "samples")
	b, err := st.Get(ctx, store.SampleID("tiles", "benign/b.jpg"), nil)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s, label %d\n", b.Data, b.Label)
	_, err = st.Get(ctx, broken, nil)
	fmt.Println("tumor/c.jpg unavailable:", errors.Is(err, store.ErrUnavailable))
	fmt.Println("reads:", st.Gets())
	// Output:
	// 3 samples
	// pixels of benign/b.jpg, label 0
	// tumor/c.jpg unavailable: true
	// reads: 2
}
