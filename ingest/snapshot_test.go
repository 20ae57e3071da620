package ingest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cassfs/cassfs/index"
	"github.com/cassfs/cassfs/internal/testkit"
	"github.com/cassfs/cassfs/store"
	"github.com/cassfs/cassfs/store/memstore"
	"github.com/google/uuid"
)

// fromSnapshot reports whether a mount would start from st's snapshot, and the samples
// it would list.
func fromSnapshot(t *testing.T, st store.Store) (bool, int) {
	t.Helper()
	ix, how, err := index.Read(context.Background(), st, true, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return how.FromSnapshot(), ix.Len()
}

// An ingest that completes leaves a current snapshot of everything stored, its own files
// and earlier ones; one that fails leaves none current (its writes are in the catalogue,
// not in the snapshot before it); the report says which.
func TestIngestStoresTheIndexSnapshot(t *testing.T) {
	files := map[string]string{}
	for k := range 40 {
		files[fmt.Sprintf("c%d/f%02d.jpg", k%3, k)] = fmt.Sprint("image ", k)
	}
	var fail atomic.Bool
	st := memstore.New("ds", memstore.Options{FailPut: func(uuid.UUID, string) error {
		if fail.Load() {
			return errDown
		}
		return nil
	}})
	rep, err := run(t, st, Options{Root: testkit.WriteTree(t, files)})
	if err != nil || rep.Snapshot.Err != nil || rep.Snapshot.Samples != 40 || rep.Snapshot.Bytes == 0 {
		t.Fatalf("ingest: %v, snapshot %+v", err, rep.Snapshot)
	}
	var out bytes.Buffer
	rep.Print(&out, "ds")
	if !strings.Contains(out.String(), "index snapshot stored for mounts to start from: 40 samples") {
		t.Errorf("report:\n%s", out.String())
	}
	if snap, n := fromSnapshot(t, st); !snap || n != 40 {
		t.Fatalf("after the ingest: from snapshot %v, %d samples", snap, n)
	}

	// More files: the snapshot covers both ingests.
	more := map[string]string{}
	for k := range 40 {
		more[fmt.Sprintf("c%d/g%02d.jpg", k%3, k)] = fmt.Sprint("more ", k)
	}
	if _, err := run(t, st, Options{Root: testkit.WriteTree(t, more)}); err != nil {
		t.Fatal(err)
	}
	if snap, n := fromSnapshot(t, st); !snap || n != 80 {
		t.Fatalf("after the second ingest: from snapshot %v, %d samples", snap, n)
	}

	// A failed ingest: the old snapshot is stale, a mount scans.
	fail.Store(true)
	failed := map[string]string{"c0/h.jpg": "new", "c1/h.jpg": "newer", "c2/h.jpg": "newest"}
	rep, err = run(t, st, Options{Root: testkit.WriteTree(t, failed)})
	if !errors.Is(err, errDown) || rep.Snapshot.Samples != 0 {
		t.Fatalf("failed ingest: %v, snapshot %+v", err, rep.Snapshot)
	}
	if snap, _ := fromSnapshot(t, st); snap {
		t.Error("a mount after a failed ingest would start from the snapshot taken before it")
	}

	// No snapshot asked for: none current.
	fail.Store(false)
	rep, err = run(t, st, Options{Root: testkit.WriteTree(t, failed), NoSnapshot: true})
	if err != nil || rep.Snapshot != (SnapshotReport{}) {
		t.Fatalf("ingest without a snapshot: %v, %+v", err, rep.Snapshot)
	}
	if snap, n := fromSnapshot(t, st); snap || n != 83 {
		t.Errorf("after an ingest without a snapshot: from snapshot %v, %d samples", snap, n)
	}
}
