package index_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cassfs/cassfs/index"
	"github.com/cassfs/cassfs/internal/testkit"
	"github.com/cassfs/cassfs/store/memstore"

	"github.com/cassfs/cassfs/store"
)

func TestIndexCanonicalOrderAndLookup(t *testing.T) {
	ix := testkit.Index(t, 500, 3)
	for i := range uint32(ix.Len()) {
		if prev, cur := ix.ID(max(i, 1)-1), ix.ID(i); i > 0 && bytes.Compare(prev[:], cur[:]) >= 0 {
			t.Fatalf("ids not ascending at %d", i)
		}
		j, ok := ix.Find(ix.ID(i))
		if !ok || j != i {
			t.Fatalf("Find(ID(%d)) = %d, %v", i, j, ok)
		}
		name := fmt.Sprintf("c%d/%s", ix.Label(i), ix.Name(i))
		if ix.ID(i) != store.SampleID("ds", name) || ix.NameLen(i) != len(ix.Name(i)) {
			t.Fatalf("sample %d: name %q does not belong to its id", i, name)
		}
	}
	if _, ok := ix.Find(store.SampleID("ds", "nope")); ok {
		t.Error("Find found a missing id")
	}
}

func TestIndexVerify(t *testing.T) {
	ix := testkit.Index(t, 10, 2)
	i := uint32(3)
	good := []byte(fmt.Sprintf("c%d/%s", ix.Label(i), ix.Name(i)))
	if err := ix.Verify(i, store.Blob{Label: ix.Label(i), Data: good}); err != nil {
		t.Fatalf("Verify(good) = %v", err)
	}
	bad := slices.Clone(good)
	bad[0] ^= 1
	// Each mismatch is corrupt and says what differs.
	for _, tc := range []struct {
		b    store.Blob
		says string
	}{
		{store.Blob{Label: ix.Label(i), Data: bad}, "checksum differs"},
		{store.Blob{Label: ix.Label(i), Data: good[1:]}, fmt.Sprintf("blob has %d bytes, listed %d", len(good)-1, len(good))},
		{store.Blob{Label: 1 - ix.Label(i), Data: good}, fmt.Sprintf("blob has label %d, listed %d", 1-ix.Label(i), ix.Label(i))},
	} {
		if err := ix.Verify(i, tc.b); !errors.Is(err, store.ErrCorrupt) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("Verify(%q, label %d) = %v, want ErrCorrupt saying %q", tc.b.Data, tc.b.Label, err, tc.says)
		}
	}
}

func TestIndexRejectsBadSamples(t *testing.T) {
	b := index.NewBuilder([]string{"a"})
	for _, s := range []store.Sample{
		{Label: 1, Name: "a/x.jpg", Size: 1},
		{Label: -1, Name: "a/x.jpg", Size: 1},
		{Label: 0, Name: "a/x.jpg", Size: 0},
		{Label: 0, Name: "a/", Size: 1},
		{Label: 0, Name: "a/x\n.jpg", Size: 1},
	} {
		if err := b.Add(s); err == nil {
			t.Errorf("Add(%+v) accepted a bad sample", s)
		}
	}
}

func TestIndexRejectsASampleListedTwice(t *testing.T) {
	b := index.NewBuilder([]string{"a"})
	for k, name := range []string{"a/x.jpg", "a/y.jpg", "a/z.jpg", "a/y.jpg"} {
		s := store.Sample{ID: store.SampleID("ds", name), Label: 0, Name: name, Size: int64(k + 1)}
		if err := b.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Build(); err == nil || !strings.Contains(err.Error(), "listed twice") {
		t.Errorf("Build of an index with a sample added twice: %v, want an error saying so", err)
	}
}

func TestIndexVerifyChoosesTheChecksum(t *testing.T) {
	data := []byte("the bytes of one image")
	other := slices.Clone(data)
	other[3] ^= 0x10
	b := index.NewBuilder([]string{"a"})
	with := store.Sample{ID: store.SampleID("ds", "a/with.jpg"), Name: "a/with.jpg", Size: int64(len(data)),
		Checksum: store.Checksum(data), CRC32C: store.CRC32C(data), HasCRC32C: true}
	// Listed with the CRC of other bytes but the SHA-256 of data: only the CRC can tell.
	crcOnly := store.Sample{ID: store.SampleID("ds", "a/crc.jpg"), Name: "a/crc.jpg", Size: int64(len(data)),
		Checksum: store.Checksum(data), CRC32C: store.CRC32C(other), HasCRC32C: true}
	without := store.Sample{ID: store.SampleID("ds", "a/old.jpg"), Name: "a/old.jpg", Size: int64(len(data)),
		Checksum: store.Checksum(data)}
	for _, s := range []store.Sample{with, crcOnly, without} {
		testkit.Check(t, b.Add(s))
	}
	ix, err := b.Build()
	testkit.Check(t, err)
	find := func(s store.Sample) uint32 { i, _ := ix.Find(s.ID); return i }
	for _, tc := range []struct {
		s    store.Sample
		data []byte
		ok   bool
	}{
		{with, data, true}, {with, other, false},
		{crcOnly, data, false}, {crcOnly, other, true}, // verified by the CRC alone
		{without, data, true}, {without, other, false},
	} {
		err := ix.Verify(find(tc.s), store.Blob{Data: tc.data})
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, store.ErrCorrupt)) {
			t.Errorf("Verify(%s, %q) = %v, want ok=%v", tc.s.Name, tc.data, err, tc.ok)
		}
	}
}

// index.Load reads the class names while it scans: a sample whose label has no class name
// is still refused, naming it.
func TestLoadIndexRefusesALabelWithoutAClass(t *testing.T) {
	ctx := context.Background()
	st := memstore.New("tiles", memstore.Options{})
	testkit.Check(t, st.SetLabels(ctx, []string{"normal", "tumor"}))
	for k, label := range []int{0, 1, 2} {
		name := fmt.Sprintf("c/x%d.jpg", k)
		data := []byte(name)
		s := store.Sample{ID: store.SampleID("tiles", name), Label: label, Name: name, Size: int64(len(data)), Checksum: store.Checksum(data)}
		testkit.Check(t, st.Put(ctx, s, data, nil))
	}
	if _, err := index.Load(ctx, st); err == nil || !strings.Contains(err.Error(), "x2.jpg) has label 2, but the dataset has 2 classes") {
		t.Errorf("Load of a dataset with a sample of label 2 and 2 classes: %v, want an error naming it", err)
	}
}

// TestTotalSize: the samples' sizes, summed.
func TestTotalSize(t *testing.T) {
	ix := testkit.Index(t, 10, 2)
	var want int64
	for i := range uint32(ix.Len()) {
		want += ix.Size(i)
	}
	if got := ix.TotalSize(); got != want || want == 0 {
		t.Errorf("TotalSize() = %d, want %d", got, want)
	}
}
