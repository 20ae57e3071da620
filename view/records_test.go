package view

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/cassfs/cassfs/index"
	"github.com/cassfs/cassfs/splits"
	"github.com/cassfs/cassfs/store"
)

// recordIndex has samples of varied sizes (some a multiple of 512, some of a page), names
// with and without an extension, metadata on some, and targets if asked.
func recordIndex(t *testing.T, n int, targets bool) *index.Index {
	t.Helper()
	classes := []string{"cat", "dog", "eel"}
	b := index.NewBuilder(classes)
	for k := range n {
		c := k % len(classes)
		name := fmt.Sprintf("%s/img %04d.jpg", classes[c], k)
		if k%5 == 4 {
			name = fmt.Sprintf("%s/raw%04d", classes[c], k)
		}
		size := []int64{1, 511, 512, 513, 4096, 4095, 9000, 130_000}[k%8] + int64(k/8)
		s := store.Sample{ID: store.SampleID("r", name), Label: c, Name: name, Size: size}
		if k%3 == 0 {
			s.Meta = map[string]string{"patient_id": "p" + strconv.Itoa(k%4), "note": `a "quoted" <value>`}
		}
		if targets {
			s.Target = &store.Target{Ext: ".png", Size: int64(7 + k), CRC32C: 1}
		}
		if err := b.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	ix, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return ix
}

// blobOf is sample i's content in the test: its bytes then its target's, distinct per sample.
func blobOf(ix *index.Index, i uint32) []byte {
	b := make([]byte, ix.BlobSize(i))
	for k := range b {
		b[k] = byte(int(i)*7 + k)
	}
	return b
}

// writeTar is what archive/tar writes for the shard's samples, made without the record
// view's layout: the reference ReadAt must match byte for byte.
func writeTar(t *testing.T, s *Set, sh *RecordShard) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := tar.NewWriter(&buf)
	e := sh.r.e
	ix := s.Index()
	add := func(name string, data []byte) {
		if err := w.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Size: int64(len(data)), Mode: 0o444, ModTime: s.ModTime()}); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	for j := range sh.Len() {
		i := sh.Sample(j)
		key := padInt(uint64(sh.first+j), e.width)
		ext := "bin"
		if dot := strings.LastIndexByte(ix.Name(i), '.'); dot >= 0 {
			ext = ix.Name(i)[dot+1:]
		}
		blob := blobOf(ix, i)
		add(key+"."+ext, blob[:ix.Size(i)])
		add(key+".cls", []byte(strconv.Itoa(ix.Label(i))))
		meta := map[string]any{"uuid": ix.ID(i).String(), "label": ix.Label(i), "class": ix.Labels()[ix.Label(i)], "name": ix.Path(i)}
		for c, col := range ix.Columns() {
			if v, ok := ix.Meta(i, c); ok {
				meta[col] = string(v)
			}
		}
		js := s.sampleJSON(i)
		var got map[string]any
		if err := json.Unmarshal(js, &got); err != nil {
			t.Fatalf("sample %d's JSON %s: %v", i, js, err)
		}
		var want map[string]any
		wantJSON, err := json.Marshal(meta)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(wantJSON, &want); err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("sample %d's JSON = %s, want the fields of %s", i, js, wantJSON)
		}
		add(key+".json", js)
		if ix.HasTargets() {
			add(key+".target.png", blob[ix.Size(i):])
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestRecordShardsAreWhatArchiveTarWrites: every shard of an epoch's record view, read
// whole and in random ranges, is byte for byte what archive/tar writes for its samples in
// the epoch's order; the shards hold every sample once; the index file gives each member's
// data offset and size in the tar.
func TestRecordShardsAreWhatArchiveTarWrites(t *testing.T) {
	for _, targets := range []bool{false, true} {
		t.Run(fmt.Sprintf("targets=%v", targets), func(t *testing.T) {
			ix := recordIndex(t, 300, targets)
			s := New(Config{Index: ix, Splits: []*splits.Split{splits.All(ix)}, Seed: 3, ShardBytes: 1 << 20})
			key, ok := s.RecordsKeyIn("all", splits.Shard{}, "epoch-2.wds")
			if !ok {
				t.Fatal("epoch-2.wds did not resolve")
			}
			e := s.Epoch(key)
			r := e.Records()
			if r.Len() < 3 {
				t.Fatalf("%d shards of a %d-byte split at 1 MiB each", r.Len(), ix.TotalSize())
			}
			seen := map[uint32]int{}
			blob := func(sh *RecordShard) func(j int) ([]byte, error) {
				return func(j int) ([]byte, error) { return blobOf(ix, sh.Sample(j)), nil }
			}
			rng := rand.New(rand.NewPCG(1, 2))
			for k := range r.Len() {
				sh := r.Shard(k)
				for j := range sh.Len() {
					seen[sh.Sample(j)]++
					if sh.Sample(j) != e.Order[sh.first+j] {
						t.Fatalf("shard %d sample %d is not the epoch's position %d", k, j, sh.first+j)
					}
				}
				want := writeTar(t, s, sh)
				if int64(len(want)) != sh.Size() {
					t.Fatalf("shard %d: Size %d, archive/tar wrote %d", k, sh.Size(), len(want))
				}
				got := make([]byte, sh.Size())
				for i := range got {
					got[i] = 0xAA // ReadAt must write every byte
				}
				if err := sh.ReadAt(got, 0, blob(sh)); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("shard %d differs from archive/tar's at byte %d", k, firstDiff(got, want))
				}
				for range 200 {
					off := rng.Int64N(sh.Size())
					n := rng.Int64N(min(sh.Size()-off, 3*4096)) + 1
					part := bytes.Repeat([]byte{0x55}, int(n))
					if err := sh.ReadAt(part, off, blob(sh)); err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(part, want[off:off+n]) {
						t.Fatalf("shard %d [%d, +%d) differs at byte %d", k, off, n, off+int64(firstDiff(part, want[off:off+n])))
					}
				}
				checkIndex(t, sh, want)
			}
			if len(seen) != ix.Len() {
				t.Fatalf("shards hold %d samples of %d", len(seen), ix.Len())
			}
			for i, c := range seen {
				if c != 1 {
					t.Fatalf("sample %d in %d shards", i, c)
				}
			}
		})
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// checkIndex reads the tar with archive/tar and checks that the index file lists each
// sample's members with their data offsets and sizes, a line per sample.
func checkIndex(t *testing.T, sh *RecordShard, tarBytes []byte) {
	t.Helper()
	r := tar.NewReader(bytes.NewReader(tarBytes))
	var want strings.Builder
	fmt.Fprintf(&want, "v1.2 %d", sh.Len())
	last := ""
	for {
		h, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		key, ext, _ := strings.Cut(h.Name, ".")
		if key != last {
			want.WriteString("\n")
			last = key
		} else {
			want.WriteString(" ")
		}
		fmt.Fprintf(&want, "%s %d %d %s", ext, dataOffset(t, tarBytes, h.Name), h.Size, h.Name)
	}
	want.WriteString("\n")
	if got := string(sh.Index()); got != want.String() {
		t.Fatalf("index of shard %d:\n%.300s\nwant\n%.300s", sh.K, got, want.String())
	}
}

// dataOffset finds where member name's data starts by walking the headers.
func dataOffset(t *testing.T, b []byte, name string) int64 {
	var pos int64
	for pos+512 <= int64(len(b)) {
		h, err := tar.NewReader(bytes.NewReader(b[pos:])).Next()
		if err != nil {
			t.Fatalf("no member %s: %v", name, err)
		}
		if h.Name == name {
			return pos + 512
		}
		pos += 512 + (h.Size+511)/512*512
	}
	t.Fatalf("no member %s", name)
	return 0
}

// TestRecordNames: shard file names round-trip, and only whole epochs have record views.
func TestRecordNames(t *testing.T) {
	for _, n := range []int{1, 7, 100000, 123456} {
		for _, k := range []int{0, n - 1} {
			for _, idx := range []bool{false, true} {
				name := ShardFileName(k, n, idx)
				if gk, gi, ok := ParseShardFileName(name, n); !ok || gk != k || gi != idx {
					t.Errorf("ParseShardFileName(%q, %d) = %d, %v, %v", name, n, gk, gi, ok)
				}
			}
		}
	}
	for _, bad := range []string{"shard-00007.tar", "shard-0.tar", "shard-00001.tgz", "shard-00001", "x-00001.tar", "shard-+0001.tar"} {
		if _, _, ok := ParseShardFileName(bad, 7); ok {
			t.Errorf("ParseShardFileName(%q, 7) resolved", bad)
		}
	}
	ix := testIndex(t, 20, []string{"a"})
	s := New(Config{Index: ix, Splits: []*splits.Split{splits.All(ix)}})
	for _, bad := range []string{"epoch-1@3.wds", "epoch-1@0.wds", "epoch-1", "epoch-1.wds.wds", "epoch-01.wds"} {
		if _, ok := s.RecordsKeyIn("all", splits.Shard{}, bad); ok {
			t.Errorf("RecordsKeyIn(%q) resolved", bad)
		}
	}
}

// TestRecordShardsReportProgress: reading a shard advances the shard's own stream, whose
// order is the shard's samples and those after it in each epoch, by the samples newly
// passed.
func TestRecordShardsReportProgress(t *testing.T) {
	ix := recordIndex(t, 200, false)
	rec := &recorder{}
	s := New(Config{Index: ix, Splits: []*splits.Split{splits.All(ix)}, Progress: rec, ShardBytes: 1 << 20})
	e := s.Epoch(Key{Split: "all", Epoch: 4})
	sh := e.Records().Shard(1)
	// The first READ starts the stream before it is answered, counting nothing.
	if from, to := sh.ReadBegins(0); from != 0 || to != 0 || rec.starts != 1 {
		t.Fatalf("ReadBegins(0) = %d, %d with %d starts", from, to, rec.starts)
	}
	if from, to := sh.ReadEnds(0, 0, true); from != 0 || to != 1 {
		t.Fatalf("ReadEnds(0, 0) = %d, %d", from, to)
	}
	// A READ in flight counts the samples before it.
	if from, to := sh.ReadBegins(3); from != 1 || to != 3 {
		t.Fatalf("ReadBegins(3) = %d, %d", from, to)
	}
	// A READ answered further on counts nothing past a READ still in flight (DALI reads
	// a batch's samples in parallel: the ones before wait for their blobs).
	if from, to := sh.ReadBegins(9); from != 3 || to != 3 {
		t.Fatalf("ReadBegins(9) with 3 in flight = %d, %d", from, to)
	}
	if from, to := sh.ReadEnds(9, 10, true); from != 3 || to != 3 {
		t.Fatalf("ReadEnds(9, 10) with 3 in flight = %d, %d", from, to)
	}
	// Once it is answered, up to the furthest answered.
	if from, to := sh.ReadEnds(3, 4, true); from != 3 || to != 11 {
		t.Fatalf("ReadEnds(3, 4) after 9..10 = %d, %d", from, to)
	}
	// A failed READ counts nothing; an earlier one nothing either.
	sh.ReadBegins(20)
	if from, to := sh.ReadEnds(20, 30, false); from != 20 || to != 20 {
		t.Fatalf("failed ReadEnds(20, 30) = %d, %d", from, to)
	}
	sh.ReadBegins(2)
	if from, to := sh.ReadEnds(2, 2, true); from != 20 || to != 20 {
		t.Fatalf("ReadEnds(2, 2) after 20 = %d, %d", from, to)
	}
	sh.ReadBegins(sh.Len())
	sh.ReadEnds(sh.Len(), sh.Len(), true)
	if len(rec.accesses) != sh.Len() || rec.accesses[0] != "all.wds/1 4" {
		t.Fatalf("accesses %d (%v...), want %d of all.wds/1 4", len(rec.accesses), rec.accesses[:1], sh.Len())
	}
	if rec.starts != 1 {
		t.Fatalf("%d starts, want 1", rec.starts)
	}
	for st := range rec.streams {
		for _, epoch := range []uint64{4, 5} {
			o := st.Order(epoch)
			e := s.Epoch(Key{Split: "all", Epoch: epoch})
			sh := e.Records().Shard(1)
			if len(o) != len(e.Order)-sh.first || o[0] != sh.Sample(0) || o[sh.Len()-1] != sh.Sample(sh.Len()-1) || o[len(o)-1] != e.Order[len(e.Order)-1] {
				t.Fatalf("stream order of epoch %d is not shard 1's samples and the rest of the epoch", epoch)
			}
		}
	}
}
