package cassandra

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cassfs/cassfs/store"
	"github.com/gocql/gocql"
	"github.com/google/uuid"
)

// SplitChunk is how many member ids one split_chunks partition holds (512 KiB).
const SplitChunk = 32768

// splitBucket is the one partition of the splits table (see the package doc).
const splitBucket = 0

var splitTables = []string{
	`CREATE TABLE IF NOT EXISTS DS.splits (bucket int, name text, set_id uuid, generation uuid, size bigint, chunks int, digest blob, PRIMARY KEY (bucket, name))`,
	`CREATE TABLE IF NOT EXISTS DS.split_sets (id uuid PRIMARY KEY, created timestamp, params text, report text)`,
	// Random ids do not compress.
	`CREATE TABLE IF NOT EXISTS DS.split_chunks (generation uuid, chunk int, ids blob, PRIMARY KEY ((generation, chunk))) WITH compression = {'enabled': 'false'}`,
}

// ensureSplitTables creates the split tables of a dataset ingested before they existed.
func (c *Store) ensureSplitTables(ctx context.Context) error {
	c.mu.Lock()
	done := c.splitTables
	c.mu.Unlock()
	if done {
		return nil
	}
	for _, q := range splitTables {
		if err := c.ddl(ctx, c.cql(q)); err != nil {
			return fmt.Errorf("create the split tables of dataset %q: %w", c.cfg.Dataset, kinded(err))
		}
	}
	c.mu.Lock()
	c.splitTables = true
	c.mu.Unlock()
	return nil
}

// hasSplitTables reports whether the dataset has split tables (datasets ingested by older
// versions may not).
func (c *Store) hasSplitTables(ctx context.Context) (bool, error) {
	c.mu.Lock()
	known := c.splitTables
	c.mu.Unlock()
	if known {
		return true, nil // tables are never dropped by cassfs
	}
	var n int
	err := c.readMeta(ctx, func(rctx context.Context) error {
		return c.session.Query(`SELECT count(*) FROM system_schema.tables WHERE keyspace_name = ? AND table_name IN ('splits', 'split_sets', 'split_chunks')`,
			c.cfg.Dataset).WithContext(rctx).Idempotent(true).Scan(&n)
	})
	if err != nil {
		return false, fmt.Errorf("look up the split tables of dataset %q: %w", c.cfg.Dataset, kinded(err))
	}
	if n == len(splitTables) {
		c.mu.Lock()
		c.splitTables = true
		c.mu.Unlock()
	}
	return n == len(splitTables), nil
}

type splitRow struct {
	name       string
	set        gocql.UUID
	generation gocql.UUID
	size       int64
	chunks     int
	digest     []byte
}

func (c *Store) splitRows(ctx context.Context) ([]splitRow, error) {
	ok, err := c.hasSplitTables(ctx)
	if err != nil || !ok {
		return nil, err
	}
	var rows []splitRow
	err = c.readMeta(ctx, func(rctx context.Context) error {
		// Quorum: a split just made on another machine must be seen here.
		iter := c.session.Query(c.cql(`SELECT name, set_id, generation, size, chunks, digest FROM DS.splits WHERE bucket = ?`), splitBucket).
			WithContext(rctx).Consistency(gocql.LocalQuorum).Idempotent(true).Iter()
		rows = nil
		var r splitRow
		for iter.Scan(&r.name, &r.set, &r.generation, &r.size, &r.chunks, &r.digest) {
			rows = append(rows, r)
			r = splitRow{}
		}
		return iter.Close()
	})
	if err != nil {
		return nil, fmt.Errorf("read the splits of dataset %q: %w", c.cfg.Dataset, kinded(err))
	}
	return rows, nil
}

// PutSplits implements store.Store.
func (c *Store) PutSplits(ctx context.Context, splits []store.NewSplit, params, report string, replace bool) error {
	if err := store.CheckSplits(splits); err != nil {
		return err
	}
	if err := c.ensureSplitTables(ctx); err != nil {
		return err
	}
	old, err := c.splitRows(ctx)
	if err != nil {
		return err
	}
	oldGen := map[string]splitRow{}
	for _, r := range old {
		oldGen[r.name] = r
	}
	if !replace {
		for _, s := range splits {
			if _, ok := oldGen[s.Name]; ok {
				return fmt.Errorf("split %q of dataset %q: %w", s.Name, c.cfg.Dataset, store.ErrExists)
			}
		}
	}

	// Members first, under new generations nothing points to yet.
	set := gocql.TimeUUID()
	gens := make([]gocql.UUID, len(splits))
	written := 0
	cleanup := func() {
		// Best effort: chunks nothing points to are invisible, and only take space.
		for k, g := range gens[:written] {
			c.deleteChunks(g, (len(splits[k].Members)+SplitChunk-1)/SplitChunk)
		}
	}
	for k, s := range splits {
		gens[k] = gocql.TimeUUID()
		written = k + 1
		for ch := 0; ch*SplitChunk < len(s.Members); ch++ {
			part := s.Members[ch*SplitChunk : min((ch+1)*SplitChunk, len(s.Members))]
			packed := make([]byte, 0, 16*len(part))
			for _, id := range part {
				packed = append(packed, id[:]...)
			}
			if err := c.exec(ctx, gocql.LocalQuorum, c.cql(`INSERT INTO DS.split_chunks (generation, chunk, ids) VALUES (?, ?, ?)`), gens[k], ch, packed); err != nil {
				cleanup()
				return fmt.Errorf("store split %q (chunk %d): %w", s.Name, ch, kinded(err))
			}
		}
	}
	if err := c.exec(ctx, gocql.LocalQuorum, c.cql(`INSERT INTO DS.split_sets (id, created, params, report) VALUES (?, ?, ?, ?)`),
		set, time.Now(), params, report); err != nil {
		cleanup()
		return fmt.Errorf("store the parameters of splits %s: %w", splitNames(splits), kinded(err))
	}

	// Then the rows that make them visible: one batch on one partition, atomic and isolated;
	// conditional when nothing may be replaced.
	rctx, release, err := c.acquire(ctx)
	if err != nil {
		cleanup()
		return err
	}
	b := c.session.NewBatch(gocql.LoggedBatch).WithContext(rctx)
	b.SetConsistency(gocql.LocalQuorum)
	ins := c.cql(`INSERT INTO DS.splits (bucket, name, set_id, generation, size, chunks, digest) VALUES (?, ?, ?, ?, ?, ?, ?)`)
	if !replace {
		ins += ` IF NOT EXISTS`
		b.SerialConsistency(gocql.LocalSerial)
	}
	for k, s := range splits {
		b.Query(ins, splitBucket, s.Name, set, gens[k], int64(len(s.Members)), (len(s.Members)+SplitChunk-1)/SplitChunk, splitDigest(s.Members))
	}
	if replace {
		err = c.session.ExecuteBatch(b)
	} else {
		var applied bool
		var iter *gocql.Iter
		applied, iter, err = c.session.MapExecuteBatchCAS(b, map[string]any{})
		if iter != nil {
			iter.Close()
		}
		if err == nil && !applied {
			err = fmt.Errorf("a split of the same name was created meanwhile: %w", store.ErrExists)
		}
	}
	release()
	if err != nil {
		// A timed-out batch may still be applied later; the chunks must then stay. Only a
		// definite refusal cleans up.
		if errors.Is(err, store.ErrExists) {
			cleanup()
		}
		return fmt.Errorf("store splits %s of dataset %q: %w", splitNames(splits), c.cfg.Dataset, kinded(err))
	}
	for _, s := range splits {
		if r, ok := oldGen[s.Name]; ok {
			c.deleteChunks(r.generation, r.chunks)
		}
	}
	return nil
}

func splitNames(splits []store.NewSplit) string {
	var names []string
	for _, s := range splits {
		names = append(names, s.Name)
	}
	return strings.Join(names, ",")
}

// deleteChunks removes a generation's chunks, best effort: they are unreachable already.
func (c *Store) deleteChunks(gen gocql.UUID, chunks int) {
	ctx := context.Background()
	for ch := range chunks {
		_ = c.exec(ctx, gocql.LocalQuorum, c.cql(`DELETE FROM DS.split_chunks WHERE generation = ? AND chunk = ?`), gen, ch)
	}
}

// Splits implements store.Store.
func (c *Store) Splits(ctx context.Context) ([]store.SplitInfo, error) {
	rows, err := c.splitRows(ctx)
	if err != nil {
		return nil, err
	}
	type setRow struct {
		created        time.Time
		params, report string
	}
	sets := map[gocql.UUID]setRow{}
	var out []store.SplitInfo
	for _, r := range rows {
		s, ok := sets[r.set]
		if !ok {
			err := c.readMeta(ctx, func(rctx context.Context) error {
				return c.session.Query(c.cql(`SELECT created, params, report FROM DS.split_sets WHERE id = ?`), r.set).
					WithContext(rctx).Consistency(gocql.LocalQuorum).Idempotent(true).Scan(&s.created, &s.params, &s.report)
			})
			if err != nil && !errors.Is(err, gocql.ErrNotFound) {
				return nil, fmt.Errorf("read the parameters of split %q: %w", r.name, kinded(err))
			}
			sets[r.set] = s
		}
		out = append(out, store.SplitInfo{Name: r.name, Size: int(r.size), Set: uuid.UUID(r.set), Created: s.created.UTC(), Params: s.params, Report: s.report})
	}
	slices.SortFunc(out, func(a, b store.SplitInfo) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// SplitMembers implements store.Store.
func (c *Store) SplitMembers(ctx context.Context, name string) ([]uuid.UUID, error) {
	rows, err := c.splitRows(ctx)
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(rows, func(r splitRow) bool { return r.name == name })
	if i < 0 {
		return nil, fmt.Errorf("split %q of dataset %q: %w", name, c.cfg.Dataset, store.ErrNotFound)
	}
	r := rows[i]
	ids := make([]uuid.UUID, 0, r.size)
	for ch := range r.chunks {
		var packed []byte
		err := c.readMeta(ctx, func(rctx context.Context) error {
			return c.session.Query(c.cql(`SELECT ids FROM DS.split_chunks WHERE generation = ? AND chunk = ?`), r.generation, ch).
				WithContext(rctx).Consistency(gocql.LocalQuorum).Idempotent(true).Scan(&packed)
		})
		if errors.Is(err, gocql.ErrNotFound) {
			return nil, fmt.Errorf("split %q of dataset %q: chunk %d of %d is missing: %w", name, c.cfg.Dataset, ch, r.chunks, store.ErrCorrupt)
		}
		if err != nil {
			return nil, fmt.Errorf("read split %q of dataset %q (chunk %d): %w", name, c.cfg.Dataset, ch, kinded(err))
		}
		if len(packed)%16 != 0 {
			return nil, fmt.Errorf("split %q of dataset %q: chunk %d has %d bytes, not a multiple of 16: %w", name, c.cfg.Dataset, ch, len(packed), store.ErrCorrupt)
		}
		for k := 0; k < len(packed); k += 16 {
			ids = append(ids, uuid.UUID(packed[k:k+16]))
		}
	}
	if int64(len(ids)) != r.size || !bytes.Equal(splitDigest(ids), r.digest) {
		return nil, fmt.Errorf("split %q of dataset %q: its members (%d) do not match what was stored (%d, checksum): %w", name, c.cfg.Dataset, len(ids), r.size, store.ErrCorrupt)
	}
	return ids, nil
}

// DeleteSplits implements store.Store.
func (c *Store) DeleteSplits(ctx context.Context, names []string) error {
	rows, err := c.splitRows(ctx)
	if err != nil {
		return err
	}
	var gone []splitRow
	for _, n := range names {
		i := slices.IndexFunc(rows, func(r splitRow) bool { return r.name == n })
		if i < 0 {
			return fmt.Errorf("split %q of dataset %q: %w", n, c.cfg.Dataset, store.ErrNotFound)
		}
		gone = append(gone, rows[i])
	}
	rctx, release, err := c.acquire(ctx)
	if err != nil {
		return err
	}
	b := c.session.NewBatch(gocql.LoggedBatch).WithContext(rctx)
	b.SetConsistency(gocql.LocalQuorum)
	for _, r := range gone {
		b.Query(c.cql(`DELETE FROM DS.splits WHERE bucket = ? AND name = ?`), splitBucket, r.name)
	}
	err = c.session.ExecuteBatch(b)
	release()
	if err != nil {
		return fmt.Errorf("delete splits %s of dataset %q: %w", strings.Join(names, ","), c.cfg.Dataset, kinded(err))
	}
	for _, r := range gone {
		c.deleteChunks(r.generation, r.chunks)
	}
	return nil
}
