package mount_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cassfs/cassfs/mount"
	"github.com/cassfs/cassfs/store"
	"github.com/cassfs/cassfs/store/memstore"
)

// TestExample is the package's use in brief: a dataset of two classes, opened and served
// at a directory, read as files, unmounted. It is a test rather than an Example because
// mounting needs root and /dev/fuse: it skips without them, and runs wherever the unit
// tests may not skip (CI).
func TestExample(t *testing.T) {
	if _, err := os.Stat("/dev/fuse"); err != nil || os.Geteuid() != 0 {
		t.Skip("mounting needs root and /dev/fuse")
	}
	ctx := context.Background()
	st := memstore.New("tiles", memstore.Options{})
	if err := st.SetLabels(ctx, []string{"benign", "tumor"}); err != nil {
		t.Fatal(err)
	}
	for k, name := range []string{"benign/a.jpg", "benign/b.jpg", "tumor/c.jpg"} {
		data := []byte("pixels of " + name)
		s := store.Sample{ID: store.SampleID("tiles", name), Label: k / 2, Name: name, Size: int64(len(data)),
			Checksum: store.Checksum(data), CRC32C: store.CRC32C(data), HasCRC32C: true}
		if err := st.Put(ctx, s, data, nil); err != nil {
			t.Fatal(err)
		}
	}

	o := mount.Defaults()
	o.Seed = 7
	m, err := mount.Open(ctx, st, o, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	dir := t.TempDir()
	srv, err := m.Serve(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := srv.Unmount(); err != nil {
			t.Errorf("unmount: %v", err)
		}
	}()
	if err := srv.WaitMount(); err != nil { // only a process reading its own mount needs this
		t.Fatal(err)
	}

	list, err := os.ReadFile(filepath.Join(dir, "all", "epoch-0", "file_list.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "benign/0_b.jpg 0\nbenign/1_a.jpg 0\ntumor/2_c.jpg 1\n"; string(list) != want {
		t.Errorf("file_list.txt: got %q, want %q", list, want)
	}
	// Under the default binding (arrival) a name shows a sample of its class that has
	// arrived, not necessarily the one it is named after; each sample once an epoch.
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(string(list)), "\n") {
		name, _, _ := strings.Cut(line, " ") // "<class>/<pos>_<name> <label>"
		data, err := os.ReadFile(filepath.Join(dir, "all", "epoch-0", name))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, filepath.Dir(name)+": "+string(data))
	}
	slices.Sort(got)
	if want := []string{"benign: pixels of benign/a.jpg", "benign: pixels of benign/b.jpg", "tumor: pixels of tumor/c.jpg"}; !slices.Equal(got, want) {
		t.Errorf("epoch 0 read: got %q, want %q", got, want)
	}
}
