// Package testkit holds the helpers tests of every package share: failing a test on an
// error in one call (Check, Must), a small index to build views, epochs and caches on
// (Index), a tree of files (WriteTree), the dataset and readers of the cached-epoch
// benchmarks (PutEpochSamples, LocalEpochs, MountEpochs), and a FUSE connection mounted
// as a privileged mounter hands it over (MountFUSE, MountsAt). It is imported by tests only; nothing in a built binary uses it.
package testkit

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/cassfs/cassfs/index"
	"github.com/cassfs/cassfs/store"
)

// Must returns v, failing the test if err is not nil: Must(f())(t).
func Must[T any](v T, err error) func(t testing.TB) T {
	return func(t testing.TB) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// Check fails the test if err is not nil.
func Check(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Index returns an index of n samples of dataset "ds" spread over classes c0, c1, ...
// round robin: sample "c<k>/img<i>.jpg" has label i mod classes and its name as its data.
func Index(t testing.TB, n, classes int) *index.Index {
	t.Helper()
	var labels []string
	for c := range classes {
		labels = append(labels, fmt.Sprintf("c%d", c))
	}
	b := index.NewBuilder(labels)
	for i := range n {
		name := fmt.Sprintf("c%d/img%d.jpg", i%classes, i)
		data := []byte(name)
		Check(t, b.Add(store.Sample{ID: store.SampleID("ds", name), Label: i % classes, Name: name, Size: int64(len(data)), Checksum: store.Checksum(data)}))
	}
	return Must(b.Build())(t)
}

// Future is a future of reads fixed from position 0 (an evict.ReuseFuture): sample → its
// next read and the read after it, each math.MaxUint64 (evict.Never) for none; samples not
// in it are never read.
type Future map[uint32][2]uint64

// Next implements evict.Future.
func (f Future) Next(sample uint32, now uint64) uint64 {
	if u, ok := f[sample]; ok && u[0] != math.MaxUint64 {
		return now + u[0]
	}
	return math.MaxUint64
}

// Reuse implements evict.ReuseFuture.
func (f Future) Reuse(sample uint32, now uint64) uint64 {
	if u, ok := f[sample]; ok && u[1] != math.MaxUint64 {
		return now + u[1]
	}
	return math.MaxUint64
}

// SyncBuffer is a log destination several goroutines write to.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// WriteTree writes files (slash-separated paths relative to the root, and their contents)
// under a new temporary directory and returns it.
func WriteTree(t testing.TB, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for rel, content := range files {
		p := filepath.Join(root, filepath.FromSlash(rel))
		Check(t, os.MkdirAll(filepath.Dir(p), 0o755))
		Check(t, os.WriteFile(p, []byte(content), 0o644))
	}
	return root
}
