package fs_test

import (
	"bytes"
	"encoding/csv"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/cassfs/cassfs/store"
	"github.com/cassfs/cassfs/store/memstore"
)

// getxattr reads one extended attribute the way getfattr and os.getxattr do: the size
// first, then the value.
func getxattr(path, name string) (string, error) {
	n, err := syscall.Getxattr(path, name, nil)
	if err != nil {
		return "", err
	}
	buf := make([]byte, n)
	n, err = syscall.Getxattr(path, name, buf)
	return string(buf[:n]), err
}

func listxattr(path string) ([]string, error) {
	n, err := syscall.Listxattr(path, nil)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, n)
	n, err = syscall.Listxattr(path, buf)
	if err != nil {
		return nil, err
	}
	return strings.Split(strings.TrimSuffix(string(buf[:n]), "\x00"), "\x00"), nil
}

func fixtureMeta(i int) map[string]string {
	m := map[string]string{"slide": fmt.Sprintf("s%d", i%4), "x": strconv.Itoa(i * 256)}
	if i%3 != 0 {
		m["patient_id"] = fmt.Sprintf("p%d", i%5)
	}
	return m
}

// Every sample file carries its id, label, class, name, checksum and metadata as extended
// attributes, from memory, under both bindings and in by-uuid; unknown names are ENODATA
// and writes EROFS.
func TestXattrs(t *testing.T) {
	const n = 40
	f := newFixtureMeta(t, n, classes, memstore.Options{}, []string{"patient_id", "slide", "x"}, fixtureMeta)
	want := map[string]map[string]string{} // sample name → attribute → value
	for i := range n {
		c := (i * 7 / 3) % len(classes)
		ext := ".jpg"
		if i%5 == 0 {
			ext = ".png"
		}
		name := fmt.Sprintf("%s/img %04d%s", classes[c], i, ext)
		sum := store.Checksum(f.blobs[name])
		a := map[string]string{
			"user.cassfs.uuid":   store.SampleID("test", name).String(),
			"user.cassfs.label":  strconv.Itoa(c),
			"user.cassfs.class":  classes[c],
			"user.cassfs.name":   name,
			"user.cassfs.sha256": hex.EncodeToString(sum[:]),
		}
		for k, v := range fixtureMeta(i) {
			a["user."+k] = v
		}
		want[name] = a
	}
	byContent := map[string]string{}
	for name, blob := range f.blobs {
		byContent[string(blob)] = name
	}
	check := func(t *testing.T, path string) {
		t.Helper()
		content, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		sample := byContent[string(content)] // the sample the name is bound to
		names, err := listxattr(path)
		if err != nil {
			t.Fatal(err)
		}
		if w := slices.Sorted(maps.Keys(want[sample])); !slices.Equal(slices.Sorted(slices.Values(names)), w) {
			t.Errorf("%s (%s): listxattr = %q, want %q", path, sample, names, w)
		}
		for attr, w := range want[sample] {
			if got, err := getxattr(path, attr); err != nil || got != w {
				t.Errorf("%s (%s): %s = %q, %v; want %q", path, sample, attr, got, err, w)
			}
		}
	}
	for _, arrival := range []bool{false, true} {
		t.Run(fmt.Sprintf("arrival=%v", arrival), func(t *testing.T) {
			mnt := f.mount(t, mountOpts{arrival: arrival})
			root := filepath.Join(mnt, "all", "epoch-1")
			list, err := os.ReadFile(filepath.Join(root, "file_list.txt"))
			if err != nil {
				t.Fatal(err)
			}
			for _, line := range strings.Split(strings.TrimSpace(string(list)), "\n") {
				check(t, filepath.Join(root, line[:strings.LastIndexByte(line, ' ')]))
			}
			uuids, err := os.ReadDir(filepath.Join(mnt, "by-uuid"))
			if err != nil || len(uuids) != n {
				t.Fatalf("by-uuid: %d entries, %v", len(uuids), err)
			}
			check(t, filepath.Join(mnt, "by-uuid", uuids[0].Name()))

			file := filepath.Join(mnt, "by-uuid", uuids[1].Name())
			if _, err := getxattr(file, "user.nope"); !errors.Is(err, syscall.ENODATA) {
				t.Errorf("unknown attribute: %v, want ENODATA", err)
			}
			if _, err := getxattr(file, "user.cassfs.uuidx"); !errors.Is(err, syscall.ENODATA) {
				t.Errorf("unknown attribute: %v, want ENODATA", err)
			}
			if _, err := getxattr(root, "user.cassfs.uuid"); !errors.Is(err, syscall.ENODATA) {
				t.Errorf("attribute of a directory: %v, want ENODATA", err)
			}
			if _, err := syscall.Getxattr(file, "user.cassfs.uuid", make([]byte, 10)); !errors.Is(err, syscall.ERANGE) {
				t.Errorf("uuid into 10 bytes: %v, want ERANGE", err)
			}
			if err := syscall.Setxattr(file, "user.patient_id", []byte("p9"), 0); !errors.Is(err, syscall.EROFS) {
				t.Errorf("setxattr: %v, want EROFS", err)
			}
			if err := syscall.Removexattr(file, "user.slide"); !errors.Is(err, syscall.EROFS) {
				t.Errorf("removexattr: %v, want EROFS", err)
			}
			if v, err := getxattr(file, "user.slide"); err != nil || !bytes.HasPrefix([]byte(v), []byte("s")) {
				t.Errorf("user.slide after the refused writes: %q, %v", v, err)
			}
		})
	}
}

// samples.csv of a split has its exact size from the first stat, and joins with an epoch's
// file_list.txt on class and file: every line finds its sample's row, with the uuid its file
// carries.
func TestSamplesCSV(t *testing.T) {
	f := newFixtureMeta(t, 600, classes, memstore.Options{}, []string{"patient_id", "slide", "x"}, fixtureMeta)
	mnt := f.mount(t, mountOpts{arrival: true})
	path := filepath.Join(mnt, "all", "samples.csv")
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil || int64(len(data)) != fi.Size() {
		t.Fatalf("read %d bytes (%v), stat says %d", len(data), err, fi.Size())
	}
	rows, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 601 || !slices.Equal(rows[0][:4], []string{"uuid", "class", "label", "file"}) {
		t.Fatalf("%d rows, header %q", len(rows), rows[0])
	}
	byFile := map[[2]string][]string{}
	for _, r := range rows[1:] {
		byFile[[2]string{r[1], r[3]}] = r
	}
	root := filepath.Join(mnt, "all", "epoch-2")
	list, err := os.ReadFile(filepath.Join(root, "file_list.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(list)), "\n") {
		entry := line[:strings.LastIndexByte(line, ' ')]
		class, file, _ := strings.Cut(entry, "/")
		_, file, _ = strings.Cut(file, "_")
		r, ok := byFile[[2]string{class, file}]
		if !ok {
			t.Fatalf("%s: no row in samples.csv", entry)
		}
		if strict := store.SampleID("test", class+"/"+file).String(); r[0] != strict {
			t.Fatalf("%s: row uuid %s, want %s", entry, r[0], strict)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "samples.csv")); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("samples.csv inside an epoch root: %v, want ENOENT", err)
	}
}
