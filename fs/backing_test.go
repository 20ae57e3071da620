package fs_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cassfs/cassfs/index"
	"github.com/cassfs/cassfs/internal/testkit"

	cfs "github.com/cassfs/cassfs/fs"
	"github.com/cassfs/cassfs/store"
	"github.com/cassfs/cassfs/store/memstore"
)

// backingFunc is a function used as a cfs.Backing.
type backingFunc func(i uint32) (*os.File, bool)

func (f backingFunc) Backing(i uint32) (*os.File, bool) { return f(i) }

// Where opens are not passed through (MountOptions.NoPassthrough, as where the kernel
// refuses passthrough; and always for a dataset with targets, whose entry holds the blob
// then the target), a sample with a backing file is read from that file at the right
// offsets, over several READs for a large one, and a sample without one from the store.
func TestSplicedReads(t *testing.T) {
	ctx := context.Background()
	t.Run("samples", func(t *testing.T) {
		st := memstore.New("test", memstore.Options{})
		testkit.Check(t, st.SetLabels(ctx, []string{"a"}))
		f := &fixture{st: st, blobs: map[string][]byte{}}
		for i, size := range []int{300_000, 5_000, 300_000} { // 300 KB: three 128 KiB READs
			name := fmt.Sprintf("a/s%d.jpg", i)
			data := make([]byte, size)
			for k := range data {
				data[k] = byte(k*7 + i)
			}
			testkit.Check(t, st.Put(ctx, store.Sample{ID: store.SampleID("test", name), Name: name, Size: int64(size), Checksum: store.Checksum(data)}, data, nil))
			f.blobs[name] = data
		}
		f.ix = testkit.Must(index.Load(ctx, st))(t)
		// The files hold other bytes than the store, position by position, to tell which
		// path served and from which offset.
		fileBytes := func(i uint32) []byte {
			b := make([]byte, f.ix.Size(i))
			for k := range b {
				b[k] = byte(k*31 + int(i) + 1)
			}
			return b
		}
		// Written before mounting: the READs of one file come concurrently, each asking
		// for the file.
		dir := t.TempDir()
		for i := range uint32(f.ix.Len()) {
			testkit.Check(t, os.WriteFile(filepath.Join(dir, fmt.Sprint(i)), fileBytes(i), 0o600))
		}
		backing := backingFunc(func(i uint32) (*os.File, bool) {
			if f.ix.Name(i) == "s2.jpg" {
				return nil, false
			}
			fl, err := os.Open(filepath.Join(dir, fmt.Sprint(i)))
			return fl, err == nil
		})
		var fsys *cfs.FS
		mnt := f.mount(t, mountOpts{backing: backing, noPassthrough: true, fsys: &fsys})
		for i := range uint32(f.ix.Len()) {
			want := fileBytes(i)
			if f.ix.Name(i) == "s2.jpg" {
				want = f.blobs["a/s2.jpg"]
			}
			got := testkit.Must(os.ReadFile(filepath.Join(mnt, "by-uuid", f.ix.ID(i).String()+".jpg")))(t)
			if !bytes.Equal(got, want) {
				t.Errorf("%s: read %d bytes, not the %d bytes of its %s", f.ix.Name(i), len(got), len(want), map[bool]string{true: "store entry", false: "file"}[f.ix.Name(i) == "s2.jpg"])
			}
		}
		// READs are at most 128 KiB (go-fuse's default MaxWrite sets the kernel's
		// max_pages): three for s0, one for s1.
		if s := fsys.Stats(); s.PassedThrough != 0 || s.FromFiles != 4 {
			t.Errorf("served %+v: want no open passed through and 4 READs from files", s)
		}
	})
	t.Run("targets", func(t *testing.T) {
		f := targetFixture(t, 8, memstore.Options{})
		dir := t.TempDir()
		for i := range uint32(f.ix.Len()) {
			entry := append(bytes.Repeat([]byte{'P'}, int(f.ix.Size(i))), bytes.Repeat([]byte{'T'}, int(f.ix.TargetSize(i)))...)
			testkit.Check(t, os.WriteFile(filepath.Join(dir, fmt.Sprint(i)), entry, 0o600))
		}
		backing := backingFunc(func(i uint32) (*os.File, bool) {
			fl, err := os.Open(filepath.Join(dir, fmt.Sprint(i)))
			return fl, err == nil
		})
		mnt := f.mount(t, mountOpts{backing: backing})
		for _, sub := range []struct{ dir, fill string }{{"epoch-0", "P"}, {"epoch-0.targets", "T"}} {
			root := filepath.Join(mnt, "all", sub.dir)
			list := strings.Split(strings.TrimSpace(string(testkit.Must(os.ReadFile(filepath.Join(root, "file_list.txt")))(t))), "\n")
			for _, line := range list {
				name, _ := splitLine(line)
				got := testkit.Must(os.ReadFile(filepath.Join(root, name)))(t)
				if len(got) == 0 || strings.Trim(string(got), sub.fill) != "" {
					t.Errorf("%s/%s: read %.12q... (%d bytes), want its part of the entry, all %q", sub.dir, name, got, len(got), sub.fill)
				}
			}
		}
	})
}

// With Config.Backing, a sample held in a local file is opened in passthrough mode and the
// kernel reads that file (here it holds other bytes than the store, to tell which path
// served); a sample open in cached mode keeps that mode for further opens while it is
// open, even once a file becomes available (the kernel would refuse the mixed open with
// EIO), and takes passthrough on its next first open.
func TestPassthroughOpens(t *testing.T) {
	f := newFixture(t, 6, []string{"a"}, memstore.Options{})
	dir := t.TempDir()
	var available atomic.Bool
	backing := backingFunc(func(i uint32) (*os.File, bool) {
		if i != 0 && !available.Load() {
			return nil, false
		}
		p := filepath.Join(dir, fmt.Sprint(i))
		if err := os.WriteFile(p, bytes.Repeat([]byte{'P'}, int(f.ix.Size(i))), 0o600); err != nil {
			t.Error(err)
			return nil, false
		}
		fl, err := os.Open(p)
		return fl, err == nil
	})
	mnt := f.mount(t, mountOpts{backing: backing})
	byID := filepath.Join(mnt, "by-uuid")
	path := func(i uint32) string {
		return filepath.Join(byID, f.ix.ID(i).String()+filepath.Ext(f.ix.Name(i)))
	}
	passed := bytes.Repeat([]byte{'P'}, int(f.ix.Size(0)))
	if got := testkit.Must(os.ReadFile(path(0)))(t); !bytes.Equal(got, passed) {
		t.Errorf("sample 0, backed by a file: read %.20q..., want the file's bytes", got)
	}
	// Sample 1: no file yet; open it, then let files appear and open it again meanwhile.
	first := testkit.Must(os.Open(path(1)))(t)
	available.Store(true)
	second, err := os.Open(path(1))
	if err != nil {
		t.Fatalf("a second open of a sample open in cached mode, its file now available: %v", err)
	}
	for _, fl := range []*os.File{first, second} {
		if got := testkit.Must(io.ReadAll(fl))(t); !bytes.Equal(got, f.blobs["a/"+f.ix.Name(1)]) {
			t.Errorf("sample 1 open in cached mode: read %.20q..., want the store's bytes", got)
		}
		fl.Close()
	}
	// The kernel sends RELEASE after close returns, asynchronously: once cassfs has seen
	// both, the next open is a first open again and passes through.
	want := bytes.Repeat([]byte{'P'}, int(f.ix.Size(1)))
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		got := testkit.Must(os.ReadFile(path(1)))(t)
		if bytes.Equal(got, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("sample 1 opened again after its opens closed: read %.20q..., want the file's bytes", got)
			break
		}
	}
}
