// Package index is the in-memory catalogue of a dataset that every other part reads: every
// listed sample in canonical order (ascending id) with its label, name, size, checksums,
// metadata columns and target, loaded once by the store's metadata scan (Load), from the
// snapshot a writer stored (Read, StoreSnapshot; see snapshot.go) or built sample by
// sample (Builder), and how a blob read is verified against it (Verify, VerifyBlob). After it is built, listings and lookups never touch the database. It
// programs against store.Store and knows neither FUSE nor CQL.
package index

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/cassfs/cassfs/internal/bitset"
	"github.com/cassfs/cassfs/store"
	"github.com/google/uuid"
)

// Index is the in-memory catalogue of a dataset: every listed sample in canonical order
// (ascending id), loaded once by the store's metadata scan. After it is built, listings and
// lookups never touch the database.
//
// It is laid out as parallel arrays, not a slice of structs with strings, to stay small at
// millions of samples: per sample 16 (id) + 4 (label) + 4 (size) + 32 (checksum) + 4
// (CRC32C) + 4 (name offset) bytes and a bit, plus the file name's bytes, ~90 bytes for
// names of ~25 characters.
// An Index is immutable once built and safe for concurrent use.
type Index struct {
	labels   []string
	ids      []uuid.UUID
	label    []int32
	size     []uint32
	checksum [][sha256.Size]byte
	crc      []uint32
	hasCRC   bitset.Set // sample i has a CRC32C (crc[i]); else it is verified by checksum
	nameOff  []uint32   // sample i's name is names[nameOff[i]:nameOff[i+1]]
	names    []byte
	meta     []metaColumn // the user's metadata columns, sorted by name (see meta.go)
	targets  *targetInfo  // nil: the dataset has no targets (see targets.go)
}

// MaxNameLen is the longest file name a sample may have: the mount shows it behind its
// position in the epoch (up to 10 digits and '_'), and a name may have 255 bytes.
const MaxNameLen = 255 - 11

// Builder collects samples for an Index. It is not safe for concurrent use.
type Builder struct {
	labels  []string
	samples []indexEntry
	// labelsLater: the class names come after the samples (Load reads both at once);
	// Build checks the labels then.
	labelsLater bool
	meta        map[string]*metaBuilder
}

type indexEntry struct {
	id       uuid.UUID
	label    int32
	size     uint32
	checksum [sha256.Size]byte
	crc      uint32
	hasCRC   bool
	name     string
	target   *store.Target
}

// NewBuilder starts an index of a dataset with the given class names.
func NewBuilder(labels []string) *Builder {
	return &Builder{labels: slices.Clone(labels)}
}

// Add adds one sample; its name keeps only the file name after the class directory.
func (b *Builder) Add(s store.Sample) error {
	if s.Label < 0 || s.Label >= len(b.labels) && !b.labelsLater || s.Label > math.MaxInt32 {
		return fmt.Errorf("sample %s (%s) has label %d, but the dataset has %d classes", s.ID, s.Name, s.Label, len(b.labels))
	}
	if s.Size <= 0 || s.Size > math.MaxUint32 {
		return fmt.Errorf("sample %s (%s) has size %d, outside 1..%d", s.ID, s.Name, s.Size, uint32(math.MaxUint32))
	}
	name := s.Name[strings.LastIndexByte(s.Name, '/')+1:]
	if name == "" || strings.ContainsAny(name, "\x00\n") {
		return fmt.Errorf("sample %s has an unusable name %q", s.ID, s.Name)
	}
	if len(name) > MaxNameLen {
		return fmt.Errorf("sample %s has a name of %d bytes (%.40q...); with its position in front it would pass the 255 a file name may have: rename it to %d bytes or fewer and ingest it again", s.ID, len(name), name, MaxNameLen)
	}
	k := len(b.samples)
	for col, v := range s.Meta {
		if v == "" {
			continue
		}
		m := b.meta[col]
		if m == nil {
			if b.meta == nil {
				b.meta = map[string]*metaBuilder{}
			}
			m = &metaBuilder{metaColumn: metaColumn{name: col}, ids: map[string]uint32{}}
			b.meta[col] = m
		}
		if !m.add(k, v) {
			return fmt.Errorf("metadata column %q: its distinct values exceed 4 GiB", col)
		}
	}
	b.samples = append(b.samples, indexEntry{s.ID, int32(s.Label), uint32(s.Size), s.Checksum, s.CRC32C, s.HasCRC32C, name, s.Target})
	return nil
}

// Build returns the index; the builder must not be used afterwards.
func (b *Builder) Build() (*Index, error) {
	// Sorted by id through small keys: moving the entries themselves (96 bytes) made the
	// sort a fifth of a mount's start.
	type key struct {
		hi, lo uint64
		k      uint32
	}
	n := len(b.samples)
	keys := make([]key, n)
	for k, s := range b.samples {
		keys[k] = key{binary.BigEndian.Uint64(s.id[:8]), binary.BigEndian.Uint64(s.id[8:]), uint32(k)}
	}
	slices.SortFunc(keys, func(x, y key) int {
		if c := cmp.Compare(x.hi, y.hi); c != 0 {
			return c
		}
		return cmp.Compare(x.lo, y.lo)
	})
	if n > math.MaxUint32-1 {
		return nil, fmt.Errorf("%d samples: an index holds at most %d", n, uint32(math.MaxUint32-1))
	}
	ix := &Index{
		labels:   b.labels,
		ids:      make([]uuid.UUID, n),
		label:    make([]int32, n),
		size:     make([]uint32, n),
		checksum: make([][sha256.Size]byte, n),
		crc:      make([]uint32, n),
		hasCRC:   bitset.New(n),
		nameOff:  make([]uint32, n+1),
	}
	total := 0
	for _, s := range b.samples {
		total += len(s.name)
	}
	prev := -1
	if total > math.MaxUint32 {
		return nil, errors.New("sample names exceed 4 GiB in total")
	}
	ix.names = make([]byte, 0, total)
	for i, key := range keys {
		s := &b.samples[key.k]
		if prev >= 0 && s.id == b.samples[prev].id {
			return nil, fmt.Errorf("sample %s listed twice", s.id)
		}
		if int(s.label) >= len(b.labels) {
			return nil, fmt.Errorf("sample %s (%s) has label %d, but the dataset has %d classes", s.id, s.name, s.label, len(b.labels))
		}
		prev = int(key.k)
		ix.ids[i], ix.label[i], ix.size[i], ix.checksum[i], ix.crc[i] = s.id, s.label, s.size, s.checksum, s.crc
		if s.hasCRC {
			ix.hasCRC.Put(uint32(i), true)
		}
		ix.nameOff[i] = uint32(len(ix.names))
		ix.names = append(ix.names, s.name...)
	}
	ix.nameOff[n] = uint32(len(ix.names))
	targets, err := buildTargets(b.samples, func(j int) int { return int(keys[j].k) })
	if err != nil {
		return nil, err
	}
	ix.targets = targets
	b.samples = nil
	cols := slices.Sorted(maps.Keys(b.meta))
	ix.meta = make([]metaColumn, len(cols))
	for c, name := range cols {
		ix.meta[c] = b.meta[name].done(func(j int) int { return int(keys[j].k) }, n)
		delete(b.meta, name)
	}
	return ix, nil
}

// Len is the number of samples.
func (ix *Index) Len() int { return len(ix.ids) }

// Labels returns the class names, indexed by label.
func (ix *Index) Labels() []string { return ix.labels }

// ID is sample i's id.
func (ix *Index) ID(i uint32) uuid.UUID { return ix.ids[i] }

// IDs is the ids of samples, in their order.
func (ix *Index) IDs(samples []uint32) []uuid.UUID {
	ids := make([]uuid.UUID, len(samples))
	for k, i := range samples {
		ids[k] = ix.ids[i]
	}
	return ids
}

// Label is sample i's label.
func (ix *Index) Label(i uint32) int { return int(ix.label[i]) }

// Checksum is sample i's SHA-256, as stored at ingest.
func (ix *Index) Checksum(i uint32) [sha256.Size]byte { return ix.checksum[i] }

// Size is sample i's blob size in bytes.
func (ix *Index) Size(i uint32) int64 { return int64(ix.size[i]) }

// TotalSize is the samples' sizes, summed.
func (ix *Index) TotalSize() int64 {
	var n int64
	for _, s := range ix.size {
		n += int64(s)
	}
	return n
}

// Name is sample i's file name (without its class directory).
func (ix *Index) Name(i uint32) string {
	return string(ix.names[ix.nameOff[i]:ix.nameOff[i+1]])
}

// Path is sample i's path at ingest: "<class>/<file>", the class being its label's name.
func (ix *Index) Path(i uint32) string { return ix.labels[ix.label[i]] + "/" + ix.Name(i) }

// NameLen is len(ix.Name(i)) without building the string.
func (ix *Index) NameLen(i uint32) int { return int(ix.nameOff[i+1] - ix.nameOff[i]) }

// Find returns the canonical index of the sample with the given id.
func (ix *Index) Find(id uuid.UUID) (uint32, bool) {
	i, ok := slices.BinarySearchFunc(ix.ids, id, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
	return uint32(i), ok
}

// Verify checks that a blob read for sample i is the sample that was listed: same label,
// size and checksum — its CRC32C, or its SHA-256 for samples stored without one. A
// mismatch wraps store.ErrCorrupt; wrong bytes are never served.
//
// CRC32C runs at memory speed with the CPU's CRC32 instruction, several times faster than
// SHA-256 even with SHA-NI, which would otherwise be a large share of the daemon's CPU per
// sample (bench/history/journal.md, "what a sample costs at least"). A CRC catches every burst error up to 32
// bits and any other corruption with probability 1-2^-32; what it does not give — proof
// against deliberate tampering — the SHA-256 at ingest and in cassfs's tools still does.
func (ix *Index) Verify(i uint32, b store.Blob) error {
	if err := ix.verifySizeLabel("sample", i, b, ix.Size(i)); err != nil {
		return err
	}
	switch {
	case ix.hasCRC.Has(i):
		if store.CRC32C(b.Data) != ix.crc[i] {
			return fmt.Errorf("sample %s: blob checksum differs from the one stored at ingest (CRC32C): %w", ix.ids[i], store.ErrCorrupt)
		}
	case sha256.Sum256(b.Data) != ix.checksum[i]:
		return fmt.Errorf("sample %s: blob checksum differs from the one stored at ingest (SHA-256): %w", ix.ids[i], store.ErrCorrupt)
	}
	return nil
}

// verifySizeLabel checks a blob read for sample i (what: "sample", or "target of sample")
// against the size and the label listed.
func (ix *Index) verifySizeLabel(what string, i uint32, b store.Blob, size int64) error {
	switch {
	case int64(len(b.Data)) != size:
		return fmt.Errorf("%s %s: blob has %d bytes, listed %d: %w", what, ix.ids[i], len(b.Data), size, store.ErrCorrupt)
	case b.Label != ix.Label(i):
		return fmt.Errorf("%s %s: blob has label %d, listed %d: %w", what, ix.ids[i], b.Label, ix.Label(i), store.ErrCorrupt)
	}
	return nil
}

// Load builds the index of st's dataset with one metadata scan.
func Load(ctx context.Context, st store.Store) (*Index, error) {
	// The class names and the scan at once: at long round trips each costs a few.
	var labels []string
	var labelsErr error
	read := make(chan struct{})
	go func() {
		defer close(read)
		labels, labelsErr = st.Labels(ctx)
	}()
	b := &Builder{labelsLater: true}
	scanErr := st.Scan(ctx, b.Add)
	<-read
	if labelsErr != nil {
		return nil, labelsErr
	}
	if len(labels) == 0 {
		return nil, &emptyError{fmt.Sprintf("dataset %q has no classes: ingest data into it first", st.Dataset())}
	}
	if scanErr != nil {
		return nil, fmt.Errorf("load the index of dataset %q: %w", st.Dataset(), scanErr)
	}
	b.labels = labels
	ix, err := b.Build()
	if err != nil {
		return nil, fmt.Errorf("dataset %q: %w", st.Dataset(), err)
	}
	if ix.Len() == 0 {
		return nil, &emptyError{fmt.Sprintf("dataset %q has no samples: ingest data into it first", st.Dataset())}
	}
	return ix, nil
}

// ErrEmpty is wrapped by Load's error for a dataset read completely and found to hold
// no class or no sample, as distinct from one that could not be read.
var ErrEmpty = errors.New("the dataset is empty")

type emptyError struct{ msg string }

func (e *emptyError) Error() string        { return e.msg }
func (e *emptyError) Is(target error) bool { return target == ErrEmpty }
