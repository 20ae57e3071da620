package mount_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/cassfs/cassfs/mount"
	"github.com/cassfs/cassfs/store"
	"github.com/cassfs/cassfs/store/memstore"
)

// A dataset of two classes, opened and served at a directory, read as files, unmounted.
// (Mounting needs root and /dev/fuse.)
func Example() {
	ctx := context.Background()
	st := memstore.New("tiles", memstore.Options{})
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

	o := mount.Defaults()
	o.Seed = 7
	m, err := mount.Open(ctx, st, o, slog.New(slog.DiscardHandler))
	if err != nil {
		panic(err)
	}
	defer m.Close()
	dir, err := os.MkdirTemp("", "cassfs-example")
	if err != nil {
		panic(err)
	}
	defer os.Remove(dir)
	srv, err := m.Serve(ctx, dir)
	if err != nil {
		panic(err)
	}
	defer srv.Unmount()
	if err := srv.WaitMount(); err != nil { // only a process reading its own mount needs this
		panic(err)
	}

	list, err := os.ReadFile(filepath.Join(dir, "all", "epoch-0", "file_list.txt"))
	if err != nil {
		panic(err)
	}
	fmt.Print(string(list))
	first, _, _ := strings.Cut(string(list), " ") // "<class>/<pos>_<name> <label>"
	data, err := os.ReadFile(filepath.Join(dir, "all", "epoch-0", first))
	if err != nil {
		panic(err)
	}
	fmt.Println(string(data))
	// Output:
	// benign/0_b.jpg 0
	// benign/1_a.jpg 0
	// tumor/2_c.jpg 1
	// pixels of benign/b.jpg
}
