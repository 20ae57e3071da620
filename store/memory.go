package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
)

// MemoryOptions configure an in-memory Store.
type MemoryOptions struct {
	// Latency, if set, is called once per Get and the call waits that long (or until its
	// context ends) before answering: a way to emulate round trips and stragglers.
	Latency func(id uuid.UUID) time.Duration
	// FailGet, if set, makes Get return its error for the ids it chooses.
	FailGet func(id uuid.UUID) error
}

// Memory is an in-memory Store for unit tests. It copies data in and out, so callers may
// reuse their buffers.
type Memory struct {
	dataset string
	opts    MemoryOptions

	mu      sync.Mutex
	blobs   map[uuid.UUID]Blob   // guarded by mu
	samples map[uuid.UUID]Sample // guarded by mu
	columns map[string]bool      // guarded by mu
	labels  []string             // guarded by mu
	gets    int                  // guarded by mu
	splits  map[string]memSplit  // guarded by mu
}

type memSplit struct {
	info    SplitInfo
	members []uuid.UUID
}

var _ Store = (*Memory)(nil)

// NewMemory returns an empty in-memory dataset.
func NewMemory(dataset string, opts MemoryOptions) *Memory {
	return &Memory{
		dataset: dataset,
		opts:    opts,
		blobs:   map[uuid.UUID]Blob{},
		samples: map[uuid.UUID]Sample{},
		columns: map[string]bool{},
		splits:  map[string]memSplit{},
	}
}

// Dataset implements Store.
func (m *Memory) Dataset() string { return m.dataset }

// AddColumns implements Store.
func (m *Memory) AddColumns(ctx context.Context, names []string) error {
	for _, n := range names {
		if err := ValidColumnName(n); err != nil {
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

// Columns implements Store.
func (m *Memory) Columns(ctx context.Context) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for c := range m.columns {
		out = append(out, c)
	}
	slices.Sort(out)
	return out, nil
}

// SetLabels implements Store.
func (m *Memory) SetLabels(ctx context.Context, names []string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.labels = slices.Clone(names)
	return nil
}

// Labels implements Store.
func (m *Memory) Labels(ctx context.Context) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.labels), nil
}

// Put implements Store.
func (m *Memory) Put(ctx context.Context, s Sample, data []byte) error {
	if err := checkPut(s, data); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range s.Meta {
		if !m.columns[k] {
			return fmt.Errorf("put sample %s: unknown metadata column %q", s.ID, k)
		}
	}
	m.blobs[s.ID] = Blob{Label: s.Label, Data: slices.Clone(data)}
	s.Meta = cloneMeta(s.Meta)
	m.samples[s.ID] = s
	return nil
}

// Get implements Store.
func (m *Memory) Get(ctx context.Context, id uuid.UUID, buf []byte) (Blob, error) {
	m.mu.Lock()
	m.gets++
	m.mu.Unlock()
	if m.opts.Latency != nil {
		t := time.NewTimer(m.opts.Latency(id))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return Blob{}, fmt.Errorf("get sample %s: %w", id, ctx.Err())
		}
	}
	if err := ctx.Err(); err != nil {
		return Blob{}, fmt.Errorf("get sample %s: %w", id, err)
	}
	if m.opts.FailGet != nil {
		if err := m.opts.FailGet(id); err != nil {
			return Blob{}, fmt.Errorf("get sample %s: %w", id, err)
		}
	}
	m.mu.Lock()
	b, ok := m.blobs[id]
	m.mu.Unlock()
	if !ok {
		return Blob{}, fmt.Errorf("get sample %s: %w", id, ErrNotFound)
	}
	return Blob{Label: b.Label, Data: append(buf[:0], b.Data...)}, nil
}

// Gets counts the calls to Get so far (for tests of deduplication).
func (m *Memory) Gets() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.gets
}

// Scan implements Store.
func (m *Memory) Scan(ctx context.Context, fn func(Sample) error) error {
	m.mu.Lock()
	all := make([]Sample, 0, len(m.samples))
	for _, s := range m.samples {
		s.Meta = cloneMeta(s.Meta)
		all = append(all, s)
	}
	m.mu.Unlock()
	for _, s := range all {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(s); err != nil {
			return err
		}
	}
	return nil
}

// Close implements Store.
func (m *Memory) Close() error { return nil }

// DeleteSample removes a sample's metadata row, or its blob only, to simulate damage in tests.
func (m *Memory) DeleteSample(id uuid.UUID, blobOnly bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.blobs, id)
	if !blobOnly {
		delete(m.samples, id)
	}
}

func checkPut(s Sample, data []byte) error {
	if int64(len(data)) != s.Size {
		return fmt.Errorf("put sample %s (%s): size %d does not match data length %d", s.ID, s.Name, s.Size, len(data))
	}
	if Checksum(data) != s.Checksum {
		return fmt.Errorf("put sample %s (%s): checksum does not match data", s.ID, s.Name)
	}
	return nil
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

// PutSplits implements Store.
func (m *Memory) PutSplits(ctx context.Context, splits []NewSplit, params, report string, replace bool) error {
	if err := checkSplits(splits); err != nil {
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
				return fmt.Errorf("split %q: %w", s.Name, ErrExists)
			}
		}
	}
	set, now := uuid.New(), time.Now().UTC().Truncate(time.Millisecond)
	for _, s := range splits {
		m.splits[s.Name] = memSplit{
			info:    SplitInfo{Name: s.Name, Size: len(s.Members), Set: set, Created: now, Params: params, Report: report},
			members: slices.Clone(s.Members),
		}
	}
	return nil
}

// Splits implements Store.
func (m *Memory) Splits(ctx context.Context) ([]SplitInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []SplitInfo
	for _, s := range m.splits {
		out = append(out, s.info)
	}
	slices.SortFunc(out, func(a, b SplitInfo) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// SplitMembers implements Store.
func (m *Memory) SplitMembers(ctx context.Context, name string) ([]uuid.UUID, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.splits[name]
	if !ok {
		return nil, fmt.Errorf("split %q of dataset %q: %w", name, m.dataset, ErrNotFound)
	}
	return slices.Clone(s.members), nil
}

// DeleteSplits implements Store.
func (m *Memory) DeleteSplits(ctx context.Context, names []string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, n := range names {
		if _, ok := m.splits[n]; !ok {
			return fmt.Errorf("split %q of dataset %q: %w", n, m.dataset, ErrNotFound)
		}
	}
	for _, n := range names {
		delete(m.splits, n)
	}
	return nil
}
