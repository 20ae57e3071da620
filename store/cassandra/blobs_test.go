package cassandra

import (
	"bytes"
	"strings"
	"testing"

	"github.com/cassfs/cassfs/store"
	"github.com/gocql/gocql"
)

// TestPutWritesTheBlobFirst pins the commit order of Put: the blob, then the metadata row
// that makes the sample visible. Swapped, an interrupted ingest would list a sample whose
// blob does not exist.
func TestPutWritesTheBlobFirst(t *testing.T) {
	data := []byte("jpeg bytes")
	s := store.Sample{ID: store.SampleID("d", "a/1.jpg"), Label: 2, Name: "a/1.jpg", Size: int64(len(data)), Checksum: store.Checksum(data),
		Meta: map[string]string{"slide": "s1", "patient_id": "p1", "empty": ""}}
	w, err := putWrites(s, data, nil, []string{"patient_id", "slide"})
	if err != nil {
		t.Fatal(err)
	}
	if len(w) != 2 || !strings.HasPrefix(w[0].query, "INSERT INTO DS.blobs ") || !strings.HasPrefix(w[1].query, "INSERT INTO DS.samples ") {
		t.Fatalf("Put writes %+v; want the blob, then the samples row", w)
	}
	if !bytes.Equal(w[0].args[2].([]byte), data) {
		t.Errorf("the blob write does not carry the data")
	}
	if want := "INSERT INTO DS.samples (id, label, name, size, checksum, patient_id, slide) VALUES (?, ?, ?, ?, ?, ?, ?)"; w[1].query != want || len(w[1].args) != 7 {
		t.Errorf("metadata write %q with %d args; want %q with 7", w[1].query, len(w[1].args), want)
	}
	if _, err := putWrites(s, data, nil, []string{"slide"}); err == nil || !strings.Contains(err.Error(), `"patient_id"`) {
		t.Errorf("a metadata key that is no column: %v, want an error naming it", err)
	}

	// With a target: both blobs before the row.
	mask := []byte("png bytes")
	s.Target = &store.Target{Ext: ".png", Size: int64(len(mask)), Checksum: store.Checksum(mask), CRC32C: store.CRC32C(mask)}
	w, err = putWrites(s, data, mask, []string{"patient_id", "slide"})
	if err != nil {
		t.Fatal(err)
	}
	if len(w) != 3 || w[1].what != "target" || !bytes.Equal(w[1].args[2].([]byte), mask) || w[1].args[0] != gocql.UUID(store.TargetID(s.ID)) ||
		!strings.HasPrefix(w[2].query, "INSERT INTO DS.samples ") || !strings.Contains(w[2].query, "target_crc32c") {
		t.Fatalf("Put of a sample with a target writes %+v; want the blob, the target under TargetID, then the row", w)
	}
}
