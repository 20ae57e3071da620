// Package memstore is an in-memory store.Store for tests: a dataset in maps, with
// injectable latency and failures (Options) to emulate round trips, stragglers and faults,
// and hooks to damage it (DeleteSample). It passes the same conformance suite
// (store/storetest) as the Cassandra backend, so it cannot drift from the real thing. It
// knows nothing of FUSE or CQL.
package memstore

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cassfs/cassfs/store"
	"github.com/google/uuid"
)

// Options configure an in-memory store.
type Options struct {
	// Latency, if set, is called once per Get and the call waits that long (or until its
	// context ends) before answering: a way to emulate round trips and stragglers.
	Latency func(id uuid.UUID) time.Duration
	// FailGet, if set, makes Get return its error for the ids it chooses.
	FailGet func(id uuid.UUID) error
	// FailPut, if set, is asked before each of Put's writes — "blob", "target" (if the
	// sample has one), then "metadata", the order every backend keeps — and an error fails
	// Put there, with what was written
	// before it kept: a way to interrupt a Put between its blob and its metadata row.
	FailPut func(id uuid.UUID, write string) error
	// FailScan, if set, is asked before Scan hands over its n-th sample (from 0) and
	// again, with n the number of samples, at its end; an error ends the Scan with it.
	FailScan func(n int) error
}

// Store is an in-memory dataset. It copies data in and out, so callers may reuse their
// buffers.
type Store struct {
	dataset string
	opts    Options
	created time.Time

	mu               sync.Mutex
	blobs            map[uuid.UUID]store.Blob   // guarded by mu
	samples          map[uuid.UUID]store.Sample // guarded by mu
	columns          map[string]bool            // guarded by mu
	labels           []string                   // guarded by mu
	gets             int                        // guarded by mu
	blocks, blockIDs int                        // guarded by mu: GetBlock's calls and the ids they asked for
	splits           map[string]memSplit        // guarded by mu
	version          uuid.UUID                  // guarded by mu
	snap             []byte                     // guarded by mu; the stored snapshot
	snapOf           uuid.UUID                  // guarded by mu; the version snap was taken at
	entries          map[uuid.UUID]store.Entry  // guarded by mu; of an attached dataset
	sources          []store.Source             // guarded by mu
}

type memSplit struct {
	info    store.SplitInfo
	members []uuid.UUID
}

var _ store.Attacher = (*Store)(nil)

// New returns an empty in-memory dataset.
func New(dataset string, opts Options) *Store {
	return &Store{
		dataset: dataset,
		opts:    opts,
		created: time.Now().UTC().Truncate(time.Millisecond),
		blobs:   map[uuid.UUID]store.Blob{},
		samples: map[uuid.UUID]store.Sample{},
		columns: map[string]bool{},
		splits:  map[string]memSplit{},
		entries: map[uuid.UUID]store.Entry{},
	}
}

// Dataset implements store.Store.
func (m *Store) Dataset() string { return m.dataset }

// Created implements store.Store.
func (m *Store) Created(ctx context.Context) (time.Time, error) { return m.created, ctx.Err() }

// AddColumns implements store.Store.
func (m *Store) AddColumns(ctx context.Context, names []string) error {
	for _, n := range names {
		if err := store.ValidColumnName(n); err != nil {
			return err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, n := range names {
		m.columns[n] = true
	}
	return nil
}

// Columns implements store.Store.
func (m *Store) Columns(ctx context.Context) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for c := range m.columns {
		out = append(out, c)
	}
	slices.Sort(out)
	return out, nil
}

// SetLabels implements store.Store.
func (m *Store) SetLabels(ctx context.Context, names []string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.labels = slices.Clone(names)
	return nil
}

// Labels implements store.Store.
func (m *Store) Labels(ctx context.Context) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.labels), nil
}

// Put implements store.Store: the blob, then the metadata row (the commit marker).
func (m *Store) Put(ctx context.Context, s store.Sample, data, target []byte) error {
	if err := store.CheckPut(s, data, target); err != nil {
		return err
	}
	m.mu.Lock()
	for k := range s.Meta {
		if !m.columns[k] {
			m.mu.Unlock()
			return fmt.Errorf("put sample %s: unknown metadata column %q", s.ID, k)
		}
	}
	m.mu.Unlock()
	if err := m.failPut(s, "blob"); err != nil {
		return err
	}
	m.mu.Lock()
	m.blobs[s.ID] = store.Blob{Label: s.Label, Data: slices.Clone(data)}
	m.mu.Unlock()
	if s.Target != nil {
		if err := m.failPut(s, "target"); err != nil {
			return err
		}
		m.mu.Lock()
		m.blobs[store.TargetID(s.ID)] = store.Blob{Label: s.Label, Data: slices.Clone(target)}
		m.mu.Unlock()
		t := *s.Target
		s.Target = &t
	}
	if err := m.failPut(s, "metadata"); err != nil {
		return err
	}
	s.Meta = cloneMeta(s.Meta)
	m.mu.Lock()
	m.samples[s.ID] = s
	m.mu.Unlock()
	return nil
}

func (m *Store) failPut(s store.Sample, write string) error {
	if m.opts.FailPut == nil {
		return nil
	}
	if err := m.opts.FailPut(s.ID, write); err != nil {
		return fmt.Errorf("put %s of sample %s (%s): %w", write, s.ID, s.Name, err)
	}
	return nil
}

// Blobs counts the blobs stored, listed or not (orphans of interrupted Puts included).
func (m *Store) Blobs() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.blobs)
}

// Get implements store.Store.
func (m *Store) Get(ctx context.Context, id uuid.UUID, buf []byte) (store.Blob, error) {
	m.mu.Lock()
	m.gets++
	m.mu.Unlock()
	if err := m.wait(ctx, id); err != nil {
		return store.Blob{}, fmt.Errorf("get sample %s: %w", id, err)
	}
	return m.read(ctx, id, buf)
}

// GetBlock implements store.BlockReader: one request for the block, which waits once (the
// Latency of its first id) and answers every id; FailGet fails the ids it chooses alone.
func (m *Store) GetBlock(ctx context.Context, ids []uuid.UUID, got func(k int, b store.Blob, err error)) {
	if len(ids) == 0 {
		return
	}
	m.mu.Lock()
	m.blocks++
	m.blockIDs += len(ids)
	m.mu.Unlock()
	if err := m.wait(ctx, ids[0]); err != nil {
		for k, id := range ids {
			got(k, store.Blob{}, fmt.Errorf("get sample %s: %w", id, err))
		}
		return
	}
	for k, id := range ids {
		b, err := m.read(ctx, id, nil)
		got(k, b, err)
	}
}

// wait waits for the Latency of a request for id, or ctx.
func (m *Store) wait(ctx context.Context, id uuid.UUID) error {
	if m.opts.Latency != nil {
		t := time.NewTimer(m.opts.Latency(id))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
	return ctx.Err()
}

// read answers id's blob once its request waited.
func (m *Store) read(ctx context.Context, id uuid.UUID, buf []byte) (store.Blob, error) {
	if err := ctx.Err(); err != nil {
		return store.Blob{}, fmt.Errorf("get sample %s: %w", id, err)
	}
	if m.opts.FailGet != nil {
		if err := m.opts.FailGet(id); err != nil {
			return store.Blob{}, fmt.Errorf("get sample %s: %w", id, err)
		}
	}
	m.mu.Lock()
	b, ok := m.blobs[id]
	m.mu.Unlock()
	if !ok {
		return store.Blob{}, fmt.Errorf("get sample %s: %w", id, store.ErrNotFound)
	}
	return store.Blob{Label: b.Label, Data: append(buf[:0], b.Data...)}, nil
}

// Blocks counts the calls to GetBlock so far and the ids they asked for.
func (m *Store) Blocks() (blocks, ids int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.blocks, m.blockIDs
}

// Gets counts the calls to Get so far (for tests of deduplication).
func (m *Store) Gets() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.gets
}

// Scan implements store.Store.
func (m *Store) Scan(ctx context.Context, fn func(store.Sample) error) error {
	m.mu.Lock()
	all := make([]store.Sample, 0, len(m.samples))
	for _, s := range m.samples {
		s.Meta = cloneMeta(s.Meta)
		all = append(all, s)
	}
	m.mu.Unlock()
	for n, s := range all {
		if err := ctx.Err(); err != nil {
			return err
		}
		if m.opts.FailScan != nil {
			if err := m.opts.FailScan(n); err != nil {
				return err
			}
		}
		if err := fn(s); err != nil {
			return err
		}
	}
	if m.opts.FailScan != nil {
		return m.opts.FailScan(len(all))
	}
	return nil
}

// MarkChanged implements store.Store.
func (m *Store) MarkChanged(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.version = uuid.New()
	return ctx.Err()
}

// Version implements store.Store.
func (m *Store) Version(ctx context.Context) (uuid.UUID, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.version, ctx.Err()
}

// PutSnapshot implements store.Store.
func (m *Store) PutSnapshot(ctx context.Context, version uuid.UUID, r io.Reader) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return fmt.Errorf("store the index snapshot of dataset %q: %w", m.dataset, err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.snap, m.snapOf = data, version
	return nil
}

// Snapshot implements store.Store.
func (m *Store) Snapshot(ctx context.Context) (io.ReadCloser, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.snap == nil:
		return nil, fmt.Errorf("dataset %q has no index snapshot: %w", m.dataset, store.ErrNotFound)
	case m.snapOf != m.version:
		return nil, fmt.Errorf("the index snapshot of dataset %q is stale (the samples changed since): %w", m.dataset, store.ErrNotFound)
	}
	return io.NopCloser(bytes.NewReader(m.snap)), ctx.Err()
}

// Close implements store.Store.
func (m *Store) Close() error { return nil }

// DeleteSample removes a sample's metadata row, or its blob only, to simulate damage in tests.
func (m *Store) DeleteSample(id uuid.UUID, blobOnly bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.blobs, id)
	if !blobOnly {
		delete(m.samples, id)
	}
}

func cloneMeta(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		if v != "" {
			out[k] = v
		}
	}
	return out
}

// PutSplits implements store.Store.
func (m *Store) PutSplits(ctx context.Context, splits []store.NewSplit, params, report string, replace bool) error {
	if err := store.CheckSplits(splits); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !replace {
		for _, s := range splits {
			if _, ok := m.splits[s.Name]; ok {
				return fmt.Errorf("split %q: %w", s.Name, store.ErrExists)
			}
		}
	}
	set, now := uuid.New(), time.Now().UTC().Truncate(time.Millisecond)
	for _, s := range splits {
		m.splits[s.Name] = memSplit{
			info:    store.SplitInfo{Name: s.Name, Size: len(s.Members), Set: set, Created: now, Params: params, Report: report},
			members: slices.Clone(s.Members),
		}
	}
	return nil
}

// Splits implements store.Store.
func (m *Store) Splits(ctx context.Context) ([]store.SplitInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []store.SplitInfo
	for _, s := range m.splits {
		out = append(out, s.info)
	}
	slices.SortFunc(out, func(a, b store.SplitInfo) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// SplitMembers implements store.Store.
func (m *Store) SplitMembers(ctx context.Context, name string) ([]uuid.UUID, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.splits[name]
	if !ok {
		return nil, fmt.Errorf("split %q of dataset %q: %w", name, m.dataset, store.ErrNotFound)
	}
	return slices.Clone(s.members), nil
}

// DeleteSplits implements store.Store.
func (m *Store) DeleteSplits(ctx context.Context, names []string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, n := range names {
		if _, ok := m.splits[n]; !ok {
			return fmt.Errorf("split %q of dataset %q: %w", n, m.dataset, store.ErrNotFound)
		}
	}
	for _, n := range names {
		delete(m.splits, n)
	}
	return nil
}

// PutEntry implements store.Attacher: the metadata row only.
func (m *Store) PutEntry(ctx context.Context, s store.Sample, e store.Entry) error {
	if err := store.CheckEntry(s, e); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range s.Meta {
		if !m.columns[k] {
			return fmt.Errorf("put entry %s: unknown metadata column %q", s.ID, k)
		}
	}
	s.Meta = cloneMeta(s.Meta)
	m.samples[s.ID] = s
	m.entries[s.ID] = e
	return nil
}

// Entries implements store.Attacher.
func (m *Store) Entries(ctx context.Context) (map[uuid.UUID]store.Entry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[uuid.UUID]store.Entry, len(m.entries))
	for id, e := range m.entries {
		out[id] = e
	}
	return out, ctx.Err()
}

// SetSources implements store.Attacher.
func (m *Store) SetSources(ctx context.Context, sources []store.Source) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sources = slices.Clone(sources)
	return ctx.Err()
}

// Sources implements store.Attacher.
func (m *Store) Sources(ctx context.Context) ([]store.Source, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.sources), ctx.Err()
}
