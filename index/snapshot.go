package index

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"log/slog"
	"math"
	"slices"

	"github.com/cassfs/cassfs/internal/bitset"
	"github.com/cassfs/cassfs/store"
	"github.com/google/uuid"
)

// Snapshots: an index is written, whole, as a snapshot (WriteTo) that a store keeps beside
// the samples (store's "Index snapshots") and a mount reads back (Decode) instead of
// scanning millions of metadata rows. The encoding is the in-memory layout, array after
// array, little-endian, so that decoding is copying:
//
//	magic "cassfs-index v1\n"
//	n, the number of classes, each class name (uint32 length, bytes)
//	ids (n×16), labels (n×4), sizes (n×4), checksums (n×32), CRC32Cs (n×4),
//	which samples have a CRC32C (a bit each), name offsets ((n+1)×4), names (length, bytes)
//	the metadata columns: their number, then each one's name, references (n×4), value
//	offsets (count, ×4) and values (length, bytes)
//	targets (a byte: 0 none, 1 some): sizes (n×4), CRC32Cs (n×4), extension indices
//	(n×1), extensions (count, each length and bytes)
//	the CRC32C of everything before it
//
// Not compressed: ids and checksums (48 of the ~100 bytes a sample takes) are random, and
// the database's own compression and a fast link do the rest. Decode checks every
// invariant the index's methods rely on, so a damaged snapshot is an error, never a
// panic later.

const snapshotMagic = "cassfs-index v1\n"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Loaded says how Read built an index.
type Loaded struct {
	// NoSnapshot, if not nil, is why no snapshot was used (none, stale, unreadable, not
	// asked for): the index came from a scan.
	NoSnapshot error
}

// FromSnapshot reports whether the index came from the stored snapshot, not a scan.
func (l Loaded) FromSnapshot() bool { return l.NoSnapshot == nil }

// Read builds the index of st's dataset from its stored snapshot if it is current and
// useSnapshot is set, else by a metadata scan (Load). A snapshot that cannot be read is
// logged and costs nothing but the time spent on it.
func Read(ctx context.Context, st store.Store, useSnapshot bool, log *slog.Logger) (*Index, Loaded, error) {
	if !useSnapshot {
		ix, err := Load(ctx, st)
		return ix, Loaded{NoSnapshot: errors.New("not asked for")}, err
	}
	ix, err := ReadSnapshot(ctx, st)
	if err == nil {
		return ix, Loaded{}, nil
	}
	if ctx.Err() != nil {
		return nil, Loaded{}, err
	}
	if !errors.Is(err, store.ErrNotFound) {
		log.Warn("index snapshot unusable, scanning the samples instead", "err", err) // err names the dataset
	}
	ix, lerr := Load(ctx, st)
	return ix, Loaded{NoSnapshot: err}, lerr
}

// ReadSnapshot reads st's index snapshot if it is current; its error wraps
// store.ErrNotFound if there is none or it is stale.
func ReadSnapshot(ctx context.Context, st store.Store) (*Index, error) {
	r, err := st.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	ix, err := Decode(r)
	if err != nil {
		return nil, fmt.Errorf("index snapshot of dataset %q: %w", st.Dataset(), err)
	}
	return ix, nil
}

// StoreSnapshot stores a snapshot of st's catalogue for mounts to start from: it reads
// the catalogue's version, builds the index by a scan begun after that, and stores its
// encoding under the version read. It returns the index and the snapshot's size.
func StoreSnapshot(ctx context.Context, st store.Store) (*Index, int64, error) {
	version, err := st.Version(ctx)
	if err != nil {
		return nil, 0, err
	}
	ix, err := Load(ctx, st)
	if err != nil {
		return nil, 0, err
	}
	pr, pw := io.Pipe()
	written := make(chan int64, 1)
	go func() {
		n, err := ix.WriteTo(pw)
		pw.CloseWithError(err)
		written <- n
	}()
	err = st.PutSnapshot(ctx, version, pr)
	pr.CloseWithError(errors.New("the store stopped reading")) // unblocks the writer on a failure
	n := <-written
	if err != nil {
		return nil, 0, err
	}
	return ix, n, nil
}

type encoder struct {
	w   *bufio.Writer
	crc hash.Hash32
	n   int64
	err error
}

func (e *encoder) raw(b []byte) {
	if e.err != nil {
		return
	}
	e.crc.Write(b)
	var k int
	k, e.err = e.w.Write(b)
	e.n += int64(k)
}

func (e *encoder) u32(v uint32) { e.raw(binary.LittleEndian.AppendUint32(nil, v)) }

func (e *encoder) bytes(b []byte) { e.u32(uint32(len(b))); e.raw(b) }

func (e *encoder) u32s(v []uint32) {
	buf := make([]byte, 0, 64<<10)
	for _, x := range v {
		buf = binary.LittleEndian.AppendUint32(buf, x)
		if len(buf) == cap(buf) {
			e.raw(buf)
			buf = buf[:0]
		}
	}
	e.raw(buf)
}

// WriteTo writes the index as a snapshot (see Snapshots); it implements io.WriterTo.
func (ix *Index) WriteTo(w io.Writer) (int64, error) {
	e := &encoder{w: bufio.NewWriterSize(w, 256<<10), crc: crc32.New(castagnoli)}
	n := ix.Len()
	e.raw([]byte(snapshotMagic))
	e.u32(uint32(n))
	e.u32(uint32(len(ix.labels)))
	for _, l := range ix.labels {
		e.bytes([]byte(l))
	}
	for i := range ix.ids {
		e.raw(ix.ids[i][:])
	}
	labels := make([]uint32, n)
	for i, l := range ix.label {
		labels[i] = uint32(l)
	}
	e.u32s(labels)
	e.u32s(ix.size)
	for i := range ix.checksum {
		e.raw(ix.checksum[i][:])
	}
	e.u32s(ix.crc)
	bits := make([]byte, (n+7)/8)
	for i := range n {
		if ix.hasCRC.Has(uint32(i)) {
			bits[i/8] |= 1 << (i % 8)
		}
	}
	e.raw(bits)
	e.u32s(ix.nameOff)
	e.bytes(ix.names)
	e.u32(uint32(len(ix.meta)))
	for _, c := range ix.meta {
		e.bytes([]byte(c.name))
		e.u32s(c.ref)
		e.u32(uint32(len(c.off)))
		e.u32s(c.off)
		e.bytes(c.vals)
	}
	if t := ix.targets; t == nil {
		e.raw([]byte{0})
	} else {
		e.raw([]byte{1})
		e.u32s(t.size)
		e.u32s(t.crc)
		e.raw(t.ext)
		e.u32(uint32(len(t.exts)))
		for _, x := range t.exts {
			e.bytes([]byte(x))
		}
	}
	sum := e.crc.Sum32()
	e.raw(binary.LittleEndian.AppendUint32(nil, sum))
	if e.err == nil {
		e.err = e.w.Flush()
	}
	return e.n, e.err
}

type decoder struct {
	r   *bufio.Reader
	crc hash.Hash32
	err error
}

func (d *decoder) full(b []byte) {
	if d.err != nil {
		return
	}
	if _, err := io.ReadFull(d.r, b); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		d.err = fmt.Errorf("truncated: %w", err)
		return
	}
	d.crc.Write(b)
}

func (d *decoder) u32() uint32 {
	var b [4]byte
	d.full(b[:])
	return binary.LittleEndian.Uint32(b[:])
}

// array reads n elements of size bytes each, decoded by get. Memory grows with what is
// read, not with n: a damaged count ends in an error, not a huge allocation.
func array[T any](d *decoder, n, size int, get func([]byte) T) []T {
	out := make([]T, 0, min(n, 1<<16))
	buf := make([]byte, (64<<10)/size*size)
	for len(out) < n && d.err == nil {
		b := buf[:min(n-len(out), len(buf)/size)*size]
		d.full(b)
		for k := 0; k+size <= len(b) && d.err == nil; k += size {
			out = append(out, get(b[k:k+size]))
		}
	}
	return slices.Clip(out)
}

func (d *decoder) u32s(n int) []uint32 { return array(d, n, 4, binary.LittleEndian.Uint32) }

// raw reads n bytes, growing what it returns with what is read (see array).
func (d *decoder) raw(n int) []byte {
	out := make([]byte, 0, min(n, 1<<20))
	for len(out) < n && d.err == nil {
		k := min(n-len(out), 1<<20)
		out = slices.Grow(out, k)
		d.full(out[len(out) : len(out)+k])
		out = out[:len(out)+k]
	}
	return out
}

func (d *decoder) bytes() []byte { return d.raw(int(d.u32())) }

// Decode reads an index written by WriteTo and checks it.
func Decode(r io.Reader) (*Index, error) {
	d := &decoder{r: bufio.NewReaderSize(r, 256<<10), crc: crc32.New(castagnoli)}
	magic := make([]byte, len(snapshotMagic))
	d.full(magic)
	if d.err == nil && string(magic) != snapshotMagic {
		return nil, fmt.Errorf("not an index snapshot of this version (starts %q): %w", magic, store.ErrCorrupt)
	}
	n := int(d.u32())
	ix := &Index{}
	for k := d.u32(); k > 0 && d.err == nil; k-- {
		ix.labels = append(ix.labels, string(d.bytes()))
	}
	ix.ids = array(d, n, 16, func(b []byte) uuid.UUID { return uuid.UUID(b) })
	ix.label = array(d, n, 4, func(b []byte) int32 { return int32(binary.LittleEndian.Uint32(b)) })
	ix.size = d.u32s(n)
	ix.checksum = array(d, n, 32, func(b []byte) [32]byte { return [32]byte(b) })
	ix.crc = d.u32s(n)
	bits := d.raw((n + 7) / 8)
	ix.nameOff = d.u32s(n + 1)
	ix.names = d.bytes()
	for k := d.u32(); k > 0 && d.err == nil; k-- {
		c := metaColumn{name: string(d.bytes())}
		c.ref = d.u32s(n)
		c.off = d.u32s(int(d.u32()))
		c.vals = d.bytes()
		ix.meta = append(ix.meta, c)
	}
	var flag [1]byte
	d.full(flag[:])
	if flag[0] == 1 {
		t := &targetInfo{size: d.u32s(n), crc: d.u32s(n)}
		t.ext = d.raw(n)
		for k := d.u32(); k > 0 && d.err == nil; k-- {
			t.exts = append(t.exts, string(d.bytes()))
		}
		ix.targets = t
	}
	want := d.crc.Sum32()
	got := d.u32()
	if d.err != nil {
		return nil, fmt.Errorf("%w: %w", d.err, store.ErrCorrupt)
	}
	if got != want {
		return nil, fmt.Errorf("checksum %08x, want %08x: %w", got, want, store.ErrCorrupt)
	}
	if _, err := d.r.ReadByte(); err != io.EOF {
		return nil, fmt.Errorf("bytes after its end: %w", store.ErrCorrupt)
	}
	ix.hasCRC = bitset.New(n)
	for i := range n {
		if bits[i/8]&(1<<(i%8)) != 0 {
			ix.hasCRC.Put(uint32(i), true)
		}
	}
	if err := ix.check(flag[0]); err != nil {
		return nil, fmt.Errorf("%w: %w", err, store.ErrCorrupt)
	}
	return ix, nil
}

// check verifies what the index's methods rely on: ids ascending (Find), labels, name
// and value offsets and target extensions within their arrays.
func (ix *Index) check(targets byte) error {
	n := len(ix.ids)
	switch {
	case n == 0 || n > math.MaxUint32-1:
		return fmt.Errorf("%d samples", n)
	case len(ix.labels) == 0:
		return errors.New("no classes")
	case targets > 1:
		return fmt.Errorf("targets flag %d", targets)
	}
	for i := 1; i < n; i++ {
		if bytes.Compare(ix.ids[i-1][:], ix.ids[i][:]) >= 0 {
			return fmt.Errorf("sample ids out of order at %d", i)
		}
	}
	for i, l := range ix.label {
		if l < 0 || int(l) >= len(ix.labels) {
			return fmt.Errorf("sample %d has label %d of %d classes", i, l, len(ix.labels))
		}
	}
	if err := checkOffsets("name", ix.nameOff, len(ix.names)); err != nil {
		return err
	}
	for k, c := range ix.meta {
		if k > 0 && ix.meta[k-1].name >= c.name {
			return fmt.Errorf("metadata columns out of order at %q", c.name)
		}
		if len(c.off) > 0 {
			if err := checkOffsets("value", c.off, len(c.vals)); err != nil {
				return fmt.Errorf("column %q: %w", c.name, err)
			}
		}
		for i, r := range c.ref {
			if r != 0 && int(r) >= len(c.off) {
				return fmt.Errorf("column %q: sample %d refers to value %d of %d", c.name, i, r, max(len(c.off)-1, 0))
			}
		}
	}
	if t := ix.targets; t != nil {
		for i, e := range t.ext {
			if int(e) >= len(t.exts) {
				return fmt.Errorf("sample %d's target has extension %d of %d", i, e, len(t.exts))
			}
		}
	}
	return nil
}

// checkOffsets checks offsets into an array of length size: from 0, never decreasing, the
// last at its end.
func checkOffsets(what string, off []uint32, size int) error {
	if off[0] != 0 || int(off[len(off)-1]) != size {
		return fmt.Errorf("%s offsets span %d..%d of %d bytes", what, off[0], off[len(off)-1], size)
	}
	for k := 1; k < len(off); k++ {
		if off[k] < off[k-1] {
			return fmt.Errorf("%s offsets decrease at %d", what, k)
		}
	}
	return nil
}
