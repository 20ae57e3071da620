package index_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/cassfs/cassfs/index"
	"github.com/cassfs/cassfs/internal/testkit"
	"github.com/cassfs/cassfs/store"
	"github.com/cassfs/cassfs/store/memstore"
)

// richStore is a dataset with everything an index holds: classes, metadata columns with
// missing values, samples with and without a CRC32C, targets of two extensions.
func richStore(t *testing.T) *memstore.Store {
	ctx := context.Background()
	st := memstore.New("ds", memstore.Options{})
	testkit.Check(t, st.SetLabels(ctx, []string{"benign", "malignant", "normal"}))
	testkit.Check(t, st.AddColumns(ctx, []string{"patient_id", "x"}))
	for k := range 300 {
		name := fmt.Sprintf("%s/tile_%d.jpg", []string{"benign", "malignant", "normal"}[k%3], k)
		data, mask := []byte(name), []byte(fmt.Sprint("mask of ", k))
		s := store.Sample{ID: store.SampleID("ds", name), Label: k % 3, Name: name, Size: int64(len(data)), Checksum: store.Checksum(data),
			CRC32C: store.CRC32C(data), HasCRC32C: k%7 != 0, Meta: map[string]string{"patient_id": fmt.Sprint("p", k%11), "x": fmt.Sprint(k * 512)}}
		if k%5 == 0 {
			delete(s.Meta, "patient_id")
		}
		ext := []string{".png", ".npy"}[k%2]
		s.Target = &store.Target{Ext: ext, Size: int64(len(mask)), Checksum: store.Checksum(mask), CRC32C: store.CRC32C(mask)}
		testkit.Check(t, st.Put(ctx, s, data, mask))
	}
	return st
}

func encode(t *testing.T, ix *index.Index) []byte {
	var buf bytes.Buffer
	n, err := ix.WriteTo(&buf)
	if err != nil || n != int64(buf.Len()) {
		t.Fatalf("WriteTo = %d, %v; wrote %d", n, err, buf.Len())
	}
	return buf.Bytes()
}

// A decoded snapshot answers every question as the index it was written from, and
// encodes to the same bytes.
func TestSnapshotRoundTrip(t *testing.T) {
	ix := testkit.Must(index.Load(context.Background(), richStore(t)))(t)
	enc := encode(t, ix)
	got, err := index.Decode(bytes.NewReader(enc))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(encode(t, got), enc) {
		t.Error("a decoded snapshot encodes differently")
	}
	if got.Len() != ix.Len() || strings.Join(got.Labels(), ",") != strings.Join(ix.Labels(), ",") ||
		strings.Join(got.Columns(), ",") != "patient_id,x" || !got.HasTargets() {
		t.Fatalf("decoded: %d samples, classes %q, columns %q, targets %v", got.Len(), got.Labels(), got.Columns(), got.HasTargets())
	}
	for i := range uint32(ix.Len()) {
		if got.ID(i) != ix.ID(i) || got.Path(i) != ix.Path(i) || got.Size(i) != ix.Size(i) || got.Checksum(i) != ix.Checksum(i) ||
			got.TargetName(i) != ix.TargetName(i) || got.TargetSize(i) != ix.TargetSize(i) || got.TargetCRC32C(i) != ix.TargetCRC32C(i) {
			t.Fatalf("sample %d differs: %s %s, want %s %s", i, got.ID(i), got.Path(i), ix.ID(i), ix.Path(i))
		}
		for c := range ix.NumColumns() {
			v, ok := got.Meta(i, c)
			w, wok := ix.Meta(i, c)
			if ok != wok || !bytes.Equal(v, w) {
				t.Fatalf("sample %d column %d = %q %v, want %q %v", i, c, v, ok, w, wok)
			}
		}
		// Verified as before: by CRC32C where the sample has one, by SHA-256 where not.
		data := []byte(ix.Path(i))
		if err := got.Verify(i, store.Blob{Label: ix.Label(i), Data: data}); err != nil {
			t.Fatalf("Verify sample %d: %v", i, err)
		}
	}
}

// reseal replaces a snapshot's closing checksum with the right one for its bytes.
func reseal(b []byte) []byte {
	b = bytes.Clone(b)
	binary.LittleEndian.PutUint32(b[len(b)-4:], crc32.Checksum(b[:len(b)-4], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// A damaged snapshot is an error that wraps store.ErrCorrupt, never a panic: flipped
// bits, a truncation anywhere, bytes after its end, and (with a valid checksum) every
// broken invariant the index relies on.
func TestSnapshotDamage(t *testing.T) {
	ix := testkit.Index(t, 50, 3)
	enc := encode(t, ix)
	damaged := map[string][]byte{"trailing byte": append(bytes.Clone(enc), 0)}
	for k := 0; k < len(enc); k += 7 {
		b := bytes.Clone(enc)
		b[k] ^= 0x10
		damaged[fmt.Sprint("bit flipped at ", k)] = b
		damaged[fmt.Sprint("truncated at ", k)] = enc[:k]
	}
	// Offsets of the encoding of testkit.Index(50, 3): magic, n, three class names of
	// two bytes ("c0".."c2").
	ids := 16 + 4 + 4 + 3*(4+2)
	labels := ids + 50*16
	bad := reseal(enc)
	binary.LittleEndian.PutUint32(bad[labels:], 3) // label 3 of 3 classes
	damaged["label out of range"] = reseal(bad)
	bad = bytes.Clone(enc)
	copy(bad[ids:ids+16], enc[ids+16:ids+32]) // two equal ids
	damaged["ids out of order"] = reseal(bad)
	for what, b := range damaged {
		if _, err := index.Decode(bytes.NewReader(b)); !errors.Is(err, store.ErrCorrupt) {
			t.Errorf("%s: Decode = %v, want ErrCorrupt", what, err)
		}
	}
	if _, err := index.Decode(bytes.NewReader(reseal(enc))); err != nil {
		t.Fatalf("resealing alone broke the snapshot: %v", err)
	}
}

// Read takes a current snapshot without scanning, scans when the catalogue changed since
// or the snapshot is damaged, and scans when asked to.
func TestReadFromSnapshot(t *testing.T) {
	ctx := context.Background()
	st := richStore(t)
	testkit.Check(t, st.MarkChanged(ctx))
	want, n, err := index.StoreSnapshot(ctx, st)
	if err != nil || n < 300*60 {
		t.Fatalf("StoreSnapshot = %d bytes, %v", n, err)
	}
	scans := 0
	counting := &scanCounter{Store: st, scans: &scans}
	var logs testkit.SyncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))

	ix, how, err := index.Read(ctx, counting, true, log)
	if err != nil || !how.FromSnapshot() || scans != 0 || ix.Len() != want.Len() {
		t.Fatalf("Read with a current snapshot: %v, %+v, %d scans", err, how, scans)
	}
	if _, how, err = index.Read(ctx, counting, false, log); err != nil || how.FromSnapshot() || scans != 1 {
		t.Fatalf("Read asked to scan: %v, %+v, %d scans", err, how, scans)
	}
	testkit.Check(t, st.MarkChanged(ctx))
	ix, how, err = index.Read(ctx, counting, true, log)
	if err != nil || how.FromSnapshot() || !errors.Is(how.NoSnapshot, store.ErrNotFound) || scans != 2 || ix.Len() != want.Len() {
		t.Fatalf("Read with a stale snapshot: %v, %+v, %d scans", err, how, scans)
	}
	if logs.String() != "" {
		t.Errorf("a stale snapshot was logged: %s", logs.String())
	}
	v := testkit.Must(st.Version(ctx))(t)
	testkit.Check(t, st.PutSnapshot(ctx, v, strings.NewReader("cassfs-index v1\ngarbage")))
	ix, how, err = index.Read(ctx, counting, true, log)
	if err != nil || how.FromSnapshot() || !errors.Is(how.NoSnapshot, store.ErrCorrupt) || scans != 3 || ix.Len() != want.Len() {
		t.Fatalf("Read with a damaged snapshot: %v, %+v, %d scans", err, how, scans)
	}
	if !strings.Contains(logs.String(), "index snapshot unusable") || !strings.Contains(logs.String(), `dataset \"ds\"`) {
		t.Errorf("a damaged snapshot was not logged with its dataset: %s", logs.String())
	}
}

type scanCounter struct {
	store.Store
	scans *int
}

func (s *scanCounter) Scan(ctx context.Context, fn func(store.Sample) error) error {
	*s.scans++
	return s.Store.Scan(ctx, fn)
}

var _ io.WriterTo = (*index.Index)(nil)
