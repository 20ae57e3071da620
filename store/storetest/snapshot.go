package storetest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/cassfs/cassfs/store"
	"github.com/google/uuid"
)

// readSnapshot reads the stored snapshot whole.
func readSnapshot(ctx context.Context, s store.Store) ([]byte, error) {
	r, err := s.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

type failingReader struct {
	r     io.Reader
	after int
}

func (f *failingReader) Read(p []byte) (int, error) {
	if f.after <= 0 {
		return 0, errors.New("the snapshot's writer broke")
	}
	n, err := f.r.Read(p[:min(len(p), f.after)])
	f.after -= n
	return n, err
}

// testSnapshots: a snapshot is read back byte for byte while the version it was taken at
// is current, and is not found once the catalogue changes; a snapshot whose writing fails
// leaves the one stored before.
func testSnapshots(t *testing.T, s store.Store) {
	ctx := context.Background()
	if _, err := readSnapshot(ctx, s); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Snapshot of a new dataset: %v, want ErrNotFound", err)
	}
	v0, err := s.Version(ctx)
	if err != nil || v0 != (uuid.UUID{}) {
		t.Fatalf("Version of a new dataset = %v, %v; want the zero UUID", v0, err)
	}
	if err := s.MarkChanged(ctx); err != nil {
		t.Fatal(err)
	}
	v1, err := s.Version(ctx)
	if err != nil || v1 == v0 {
		t.Fatalf("Version after MarkChanged = %v, %v; want a new one", v1, err)
	}
	// Spans chunks of a megabyte, with a short last one.
	data := make([]byte, 2<<20+12345)
	for i := range data {
		data[i] = byte(rand.Uint32())
	}
	if err := s.PutSnapshot(ctx, v1, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	if got, err := readSnapshot(ctx, s); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Snapshot = %d bytes, %v; want the %d put", len(got), err, len(data))
	}
	// A failed write leaves the snapshot before it.
	if err := s.PutSnapshot(ctx, v1, &failingReader{r: bytes.NewReader(data), after: 1<<20 + 10}); err == nil {
		t.Error("PutSnapshot from a failing reader succeeded")
	}
	if got, err := readSnapshot(ctx, s); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Snapshot after a failed PutSnapshot = %d bytes, %v; want the %d put before", len(got), err, len(data))
	}
	if err := s.MarkChanged(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := readSnapshot(ctx, s); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Snapshot after the catalogue changed: %v, want ErrNotFound (stale)", err)
	}
	v2, err := s.Version(ctx)
	if err != nil || v2 == v1 {
		t.Fatalf("Version after a second MarkChanged = %v, %v; want a new one", v2, err)
	}
	if err := s.PutSnapshot(ctx, v2, bytes.NewReader(data[:100])); err != nil {
		t.Fatal(err)
	}
	if got, err := readSnapshot(ctx, s); err != nil || !bytes.Equal(got, data[:100]) {
		t.Fatalf("Snapshot after it was replaced = %d bytes, %v; want the 100 put", len(got), err)
	}
}
