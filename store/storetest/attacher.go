package storetest

import (
	"context"
	"slices"
	"testing"

	"github.com/cassfs/cassfs/store"
)

// NewAttacher returns the empty catalogue of an attached dataset for one subtest; the
// suite closes it.
type NewAttacher func(t *testing.T) store.Attacher

// RunAttacher runs the conformance suite of store.Attacher: entries are listed as samples,
// with their source and version; sources round-trip; what cannot be an entry is refused.
func RunAttacher(t *testing.T, newStore NewAttacher) {
	ctx := context.Background()
	t.Run("EntriesAreListed", func(t *testing.T) {
		s := newStore(t)
		t.Cleanup(func() { s.Close() })
		if err := s.AddColumns(ctx, []string{"patient_id"}); err != nil {
			t.Fatal(err)
		}
		want := map[[16]byte]store.Entry{}
		for i := range 5 {
			smp, _ := MakeSample(s.Dataset(), i, i%2, 100+i)
			smp.Meta = map[string]string{"patient_id": "P1"}
			e := store.Entry{Source: i % 2, Version: int64(1000 + i)}
			if err := s.PutEntry(ctx, smp, e); err != nil {
				t.Fatalf("PutEntry(%s): %v", smp.Name, err)
			}
			want[smp.ID] = e
		}
		n := 0
		err := s.Scan(ctx, func(got store.Sample) error {
			n++
			want, _ := MakeSample(s.Dataset(), int(got.Size-100), got.Label, int(got.Size))
			if got.ID != want.ID || got.Name != want.Name || got.CRC32C != want.CRC32C || !got.HasCRC32C || got.Checksum != want.Checksum || got.Meta["patient_id"] != "P1" {
				t.Errorf("Scan: got %+v, want %+v with patient_id P1", got, want)
			}
			return nil
		})
		if err != nil || n != 5 {
			t.Errorf("Scan: %d samples, %v; want 5", n, err)
		}
		got, err := s.Entries(ctx)
		if err != nil || len(got) != len(want) {
			t.Fatalf("Entries: %d, %v; want %d", len(got), err, len(want))
		}
		for id, e := range want {
			if got[id] != e {
				t.Errorf("Entries[%x]: got %+v, want %+v", id, got[id], e)
			}
		}
	})
	t.Run("SourcesRoundTrip", func(t *testing.T) {
		s := newStore(t)
		t.Cleanup(func() { s.Close() })
		if got, err := s.Sources(ctx); err != nil || len(got) != 0 {
			t.Errorf("Sources before SetSources: %v, %v; want none", got, err)
		}
		want := []store.Source{
			{Split: "train", Keyspace: "ks", Table: "data_train", IDColumn: "id", DataColumn: "data", LabelColumn: "label"},
			{Split: "val", Keyspace: "ks", Table: "data_val", IDColumn: "id", DataColumn: "data"},
		}
		if err := s.SetSources(ctx, want); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Sources(ctx); err != nil || !slices.Equal(got, want) {
			t.Errorf("Sources: got %+v, %v; want %+v", got, err, want)
		}
	})
	t.Run("PutEntryRejects", func(t *testing.T) {
		s := newStore(t)
		t.Cleanup(func() { s.Close() })
		good, _ := MakeSample(s.Dataset(), 1, 0, 100)
		for name, bad := range map[string]func(*store.Sample, *store.Entry){
			"no name":         func(s *store.Sample, e *store.Entry) { s.Name = "" },
			"no size":         func(s *store.Sample, e *store.Entry) { s.Size = 0 },
			"negative label":  func(s *store.Sample, e *store.Entry) { s.Label = -1 },
			"negative source": func(s *store.Sample, e *store.Entry) { e.Source = -1 },
			"a target":        func(s *store.Sample, e *store.Entry) { s.Target = &store.Target{Ext: ".png", Size: 1} },
			"unknown column":  func(s *store.Sample, e *store.Entry) { s.Meta = map[string]string{"nope": "x"} },
		} {
			smp, e := good, store.Entry{Version: 1}
			bad(&smp, &e)
			if err := s.PutEntry(ctx, smp, e); err == nil {
				t.Errorf("%s: PutEntry accepted %+v", name, smp)
			}
		}
	})
}
