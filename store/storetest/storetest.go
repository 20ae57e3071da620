// Package storetest is the conformance suite every store.Store implementation passes: the
// in-memory fake in unit tests, Cassandra in the e2e tests. A behaviour the rest of cassfs
// relies on belongs here, so the fake cannot drift from the real thing.
//
// Run tests a whole Store. Its blob-read part, RunBlobReader, also runs by itself against a
// store.BlobReader over a known dataset (KnownSamples): a new read path, or a wrapper around
// one (store/hedge), passes it without being a Store.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/cassfs/cassfs/internal/testkit"
	"github.com/cassfs/cassfs/store"
	"github.com/google/uuid"
)

// NewStore returns an empty dataset for one subtest; the suite closes it.
type NewStore func(t *testing.T) store.Store

// Run runs the conformance suite.
func Run(t *testing.T, newStore NewStore) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"PutGetRoundTrip", testPutGet},
		{"PutWithoutCRC", testPutWithoutCRC},
		{"GetReusesBuffer", testGetReusesBuffer},
		{"ScanListsEveryPutOnce", testScan},
		{"PutIsIdempotent", testPutIdempotent},
		{"Columns", testColumns},
		{"Labels", testLabels},
		{"PutRejectsInconsistentSample", testPutRejects},
		{"ScanStopsOnCallbackError", testScanStops},
		{"Splits", testSplits},
		{"SplitsAllOrNothing", testSplitsAllOrNothing},
		{"Created", testCreated},
		{"Targets", testTargets},
		{"Snapshots", testSnapshots},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			t.Cleanup(func() { s.Close() })
			tc.fn(t, s)
		})
	}
	t.Run("BlobReader", func(t *testing.T) {
		s := newStore(t)
		t.Cleanup(func() { s.Close() })
		PutKnown(t, s)
		RunBlobReader(t, s)
	})
}

// MakeSample builds a sample with content derived from i.
func MakeSample(dataset string, i, label int, size int) (store.Sample, []byte) {
	name := fmt.Sprintf("class%d/img%05d.jpg", label, i)
	data := make([]byte, size)
	for j := range data {
		data[j] = byte(i*31 + j*7 + j>>8)
	}
	return store.Sample{
		ID:        store.SampleID(dataset, name),
		Label:     label,
		Name:      name,
		Size:      int64(size),
		Checksum:  store.Checksum(data),
		CRC32C:    store.CRC32C(data),
		HasCRC32C: true,
	}, data
}

func put(t *testing.T, s store.Store, smp store.Sample, data []byte) {
	t.Helper()
	if err := s.Put(context.Background(), smp, data, nil); err != nil {
		t.Fatalf("Put(%s): %v", smp.Name, err)
	}
}

func testPutGet(t *testing.T, s store.Store) {
	ctx := context.Background()
	if err := s.AddColumns(ctx, []string{"patient_id", "slide"}); err != nil {
		t.Fatal(err)
	}
	smp, data := MakeSample(s.Dataset(), 1, 3, 200_000)
	smp.Meta = map[string]string{"patient_id": "p7", "slide": "s2"}
	put(t, s, smp, data)
	b, err := s.Get(ctx, smp.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b.Data, data) {
		t.Errorf("Get returned %d bytes that differ from the %d put", len(b.Data), len(data))
	}
	if b.Label != 3 {
		t.Errorf("Get label = %d, want 3", b.Label)
	}
	var got []store.Sample
	if err := s.Scan(ctx, func(x store.Sample) error { got = append(got, x); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("Scan listed %d samples, want 1", len(got))
	}
	g := got[0]
	if g.ID != smp.ID || g.Label != 3 || g.Name != smp.Name || g.Size != smp.Size || g.Checksum != smp.Checksum || !g.HasCRC32C || g.CRC32C != smp.CRC32C {
		t.Errorf("Scan = %+v, want %+v", g, smp)
	}
	if g.Meta["patient_id"] != "p7" || g.Meta["slide"] != "s2" || len(g.Meta) != 2 {
		t.Errorf("Scan meta = %v, want patient_id=p7 slide=s2", g.Meta)
	}
}

func testPutWithoutCRC(t *testing.T, s store.Store) {
	smp, data := MakeSample(s.Dataset(), 5, 1, 300)
	smp.CRC32C, smp.HasCRC32C = 0, false
	put(t, s, smp, data)
	var got []store.Sample
	testkit.Check(t, s.Scan(context.Background(), func(x store.Sample) error { got = append(got, x); return nil }))
	if len(got) != 1 || got[0].HasCRC32C {
		t.Errorf("a sample put without a CRC32C is listed as %+v, want one without", got)
	}
}

// testGetReusesBuffer: a Store's own Get puts the blob into a buffer with room (the
// prefetcher reads a sample and its target into one buffer so). It is not part of
// RunBlobReader: a wrapper may have reason to leave buf alone (store/hedge does).
func testGetReusesBuffer(t *testing.T, s store.Store) {
	smp, data := MakeSample(s.Dataset(), 2, 0, 1000)
	put(t, s, smp, data)
	buf := make([]byte, 0, 4096)
	b, err := s.Get(context.Background(), smp.ID, buf)
	if err != nil {
		t.Fatal(err)
	}
	if &b.Data[0] != &buf[:1][0] {
		t.Errorf("Get did not reuse a buffer with enough capacity")
	}
	if !bytes.Equal(b.Data, data) {
		t.Errorf("Get into a buffer returned wrong bytes")
	}
}

func testScan(t *testing.T, s store.Store) {
	ctx := context.Background()
	want := map[uuid.UUID]string{}
	for i := range 300 {
		smp, data := MakeSample(s.Dataset(), i, i%4, 100+i)
		put(t, s, smp, data)
		want[smp.ID] = smp.Name
	}
	seen := map[uuid.UUID]int{}
	if err := s.Scan(ctx, func(x store.Sample) error {
		seen[x.ID]++
		if want[x.ID] != x.Name {
			t.Errorf("Scan: sample %s named %q, want %q", x.ID, x.Name, want[x.ID])
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(seen) != len(want) {
		t.Errorf("Scan listed %d distinct samples, want %d", len(seen), len(want))
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("Scan listed %s %d times", id, n)
		}
	}
}

func testPutIdempotent(t *testing.T, s store.Store) {
	smp, data := MakeSample(s.Dataset(), 5, 1, 500)
	put(t, s, smp, data)
	put(t, s, smp, data)
	n := 0
	if err := s.Scan(context.Background(), func(store.Sample) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("after putting one sample twice, Scan listed %d", n)
	}
}

func testColumns(t *testing.T, s store.Store) {
	ctx := context.Background()
	if err := s.AddColumns(ctx, []string{"y", "x"}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddColumns(ctx, []string{"x", "patient_id"}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Columns(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"patient_id", "x", "y"}; !slices.Equal(got, want) {
		t.Errorf("Columns = %v, want %v", got, want)
	}
	for _, bad := range []string{"label", "Name", "x;drop", "", "select"} {
		if err := s.AddColumns(ctx, []string{bad}); err == nil {
			t.Errorf("AddColumns(%q) succeeded, want an error", bad)
		}
	}
	smp, data := MakeSample(s.Dataset(), 9, 0, 10)
	smp.Meta = map[string]string{"nosuch": "v"}
	if err := s.Put(ctx, smp, data, nil); err == nil {
		t.Errorf("Put with an unknown metadata column succeeded")
	}
}

func testLabels(t *testing.T, s store.Store) {
	ctx := context.Background()
	got, err := s.Labels(ctx)
	if err != nil || len(got) != 0 {
		t.Fatalf("Labels of a new dataset = %v, %v; want none", got, err)
	}
	want := []string{"cat", "dog", "zebra fish"}
	if err := s.SetLabels(ctx, want); err != nil {
		t.Fatal(err)
	}
	got, err = s.Labels(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("Labels = %q, want %q", got, want)
	}
}

func testPutRejects(t *testing.T, s store.Store) {
	ctx := context.Background()
	smp, data := MakeSample(s.Dataset(), 3, 0, 100)
	bad := smp
	bad.Size = 99
	if err := s.Put(ctx, bad, data, nil); err == nil {
		t.Errorf("Put with a wrong size succeeded")
	}
	bad = smp
	bad.Checksum[0] ^= 1
	if err := s.Put(ctx, bad, data, nil); err == nil {
		t.Errorf("Put with a wrong checksum succeeded")
	}
	bad = smp
	bad.CRC32C ^= 1
	if err := s.Put(ctx, bad, data, nil); err == nil {
		t.Errorf("Put with a wrong CRC32C succeeded")
	}
	n := 0
	testkit.Check(t, s.Scan(ctx, func(store.Sample) error { n++; return nil }))
	if n != 0 {
		t.Errorf("rejected puts left %d listed samples", n)
	}
}

func testScanStops(t *testing.T, s store.Store) {
	for i := range 50 {
		smp, data := MakeSample(s.Dataset(), i, 0, 10)
		put(t, s, smp, data)
	}
	stop := errors.New("stop")
	n := 0
	err := s.Scan(context.Background(), func(store.Sample) error { n++; return stop })
	if !errors.Is(err, stop) {
		t.Errorf("Scan error = %v, want the callback's", err)
	}
	if n != 1 {
		t.Errorf("Scan called fn %d times after it failed, want 1", n)
	}
}

func ids(n int, salt string) []uuid.UUID {
	out := make([]uuid.UUID, n)
	for i := range out {
		out[i] = uuid.NewSHA1(uuid.NameSpaceOID, fmt.Appendf(nil, "%s%d", salt, i))
	}
	return out
}

func testSplits(t *testing.T, s store.Store) {
	ctx := context.Background()
	if got, err := s.Splits(ctx); err != nil || len(got) != 0 {
		t.Fatalf("Splits of a new dataset = %v, %v; want none", got, err)
	}
	// train spans several chunks of a backend that stores members in chunks (Cassandra's
	// hold 32,768 ids); test is small.
	train, test := ids(2*32768+5, "train"), ids(3, "test")
	if err := s.PutSplits(ctx, []store.NewSplit{{Name: "train", Members: train}, {Name: "test", Members: test}}, `{"p":1}`, `{"r":2}`, false); err != nil {
		t.Fatal(err)
	}
	infos, err := s.Splits(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 2 || infos[0].Name != "test" || infos[1].Name != "train" {
		t.Fatalf("Splits = %+v, want test and train, sorted", infos)
	}
	for _, in := range infos {
		if in.Params != `{"p":1}` || in.Report != `{"r":2}` || in.Set != infos[0].Set || in.Created.IsZero() {
			t.Errorf("split %s: params %q report %q set %v created %v", in.Name, in.Params, in.Report, in.Set, in.Created)
		}
	}
	if infos[1].Size != len(train) || infos[0].Size != len(test) {
		t.Errorf("sizes %d, %d; want %d, %d", infos[1].Size, infos[0].Size, len(train), len(test))
	}
	got, err := s.SplitMembers(ctx, "train")
	if err != nil || !slices.Equal(got, train) {
		t.Fatalf("SplitMembers(train): %d ids, %v; want the %d stored, in order", len(got), err, len(train))
	}
	if _, err := s.SplitMembers(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("SplitMembers(nope): %v, want ErrNotFound", err)
	}

	// Replacing changes the members and the set; the other split stays.
	if err := s.PutSplits(ctx, []store.NewSplit{{Name: "test", Members: test[:1]}}, "p2", "r2", true); err != nil {
		t.Fatal(err)
	}
	got = testkit.Must(s.SplitMembers(ctx, "test"))(t)
	infos = testkit.Must(s.Splits(ctx))(t)
	if !slices.Equal(got, test[:1]) || infos[0].Params != "p2" || infos[0].Set == infos[1].Set {
		t.Errorf("after replace: members %v, params %q, sets %v %v", got, infos[0].Params, infos[0].Set, infos[1].Set)
	}
	if got := testkit.Must(s.SplitMembers(ctx, "train"))(t); len(got) != len(train) {
		t.Errorf("replacing test changed train: %d members", len(got))
	}

	// Deleting: all named must exist, else nothing goes.
	if err := s.DeleteSplits(ctx, []string{"test", "nope"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("DeleteSplits(test, nope): %v, want ErrNotFound", err)
	}
	if infos := testkit.Must(s.Splits(ctx))(t); len(infos) != 2 {
		t.Errorf("a failed delete removed splits: %d left", len(infos))
	}
	if err := s.DeleteSplits(ctx, []string{"test", "train"}); err != nil {
		t.Fatal(err)
	}
	if infos := testkit.Must(s.Splits(ctx))(t); len(infos) != 0 {
		t.Errorf("after deleting all, Splits = %+v", infos)
	}
	if _, err := s.SplitMembers(ctx, "train"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("SplitMembers of a deleted split: %v, want ErrNotFound", err)
	}
	// An empty split is a split.
	if err := s.PutSplits(ctx, []store.NewSplit{{Name: "empty"}}, "", "", false); err != nil {
		t.Fatal(err)
	}
	if got, err := s.SplitMembers(ctx, "empty"); err != nil || len(got) != 0 {
		t.Errorf("empty split: %v, %v", got, err)
	}
}

func testSplitsAllOrNothing(t *testing.T, s store.Store) {
	ctx := context.Background()
	if err := s.PutSplits(ctx, []store.NewSplit{{Name: "val", Members: ids(4, "v")}}, "", "", false); err != nil {
		t.Fatal(err)
	}
	// One name exists: without replace, none of the new ones is written.
	err := s.PutSplits(ctx, []store.NewSplit{{Name: "train", Members: ids(5, "t")}, {Name: "val", Members: ids(1, "x")}}, "", "", false)
	if !errors.Is(err, store.ErrExists) {
		t.Fatalf("PutSplits over an existing name: %v, want ErrExists", err)
	}
	infos := testkit.Must(s.Splits(ctx))(t)
	if len(infos) != 1 || infos[0].Size != 4 {
		t.Errorf("a refused PutSplits changed the splits: %+v", infos)
	}
	for _, bad := range [][]store.NewSplit{nil, {{Name: ""}}, {{Name: "a"}, {Name: "a"}}} {
		if err := s.PutSplits(ctx, bad, "", "", true); err == nil {
			t.Errorf("PutSplits(%v) accepted", bad)
		}
	}
}

// testCreated: a dataset made for the test knows it was made just now.
func testCreated(t *testing.T, s store.Store) {
	created, err := s.Created(context.Background())
	testkit.Check(t, err)
	if age := time.Since(created); age < -time.Second || age > 5*time.Minute {
		t.Errorf("Created() = %v, %v ago: want the moment the dataset was made", created, age)
	}
}

// testTargets: a sample's target is a blob of its own under TargetID, with the sample's
// label, described in the sample's row; samples without one list none; a second Put of the
// same sample keeps one of each.
func testTargets(t *testing.T, s store.Store) {
	ctx := context.Background()
	smp, data := MakeSample(s.Dataset(), 1, 2, 5000)
	_, mask := MakeSample(s.Dataset(), 2, 0, 700)
	smp.Target = &store.Target{Ext: ".png", Size: int64(len(mask)), Checksum: store.Checksum(mask), CRC32C: store.CRC32C(mask)}
	plain, plainData := MakeSample(s.Dataset(), 3, 1, 900)
	for range 2 {
		testkit.Check(t, s.Put(ctx, smp, data, mask))
	}
	testkit.Check(t, s.Put(ctx, plain, plainData, nil))
	b, err := s.Get(ctx, store.TargetID(smp.ID), nil)
	testkit.Check(t, err)
	if !bytes.Equal(b.Data, mask) || b.Label != 2 {
		t.Errorf("Get(TargetID) = %d bytes, label %d; want the %d put, label 2", len(b.Data), b.Label, len(mask))
	}
	if b, err := s.Get(ctx, smp.ID, nil); err != nil || !bytes.Equal(b.Data, data) {
		t.Errorf("Get(ID) of a sample with a target: %d bytes, %v", len(b.Data), err)
	}
	got := map[uuid.UUID]store.Sample{}
	testkit.Check(t, s.Scan(ctx, func(x store.Sample) error { got[x.ID] = x; return nil }))
	if len(got) != 2 {
		t.Fatalf("Scan listed %d samples, want 2 (targets are not samples)", len(got))
	}
	if g := got[smp.ID].Target; g == nil || *g != *smp.Target {
		t.Errorf("Scan: target %+v, want %+v", g, smp.Target)
	}
	if g := got[plain.ID].Target; g != nil {
		t.Errorf("Scan: a sample put without a target lists %+v", g)
	}
	if cols, err := s.Columns(ctx); err != nil || len(cols) != 0 {
		t.Errorf("Columns() = %q, %v: the target's columns are not metadata", cols, err)
	}
}
