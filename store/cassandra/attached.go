package cassandra

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/cassfs/cassfs/store"
	"github.com/gocql/gocql"
	"github.com/google/uuid"
)

// Attached datasets (store's "Attached datasets"). The catalogue keyspace has the tables of
// any dataset but blobs; samples has two more columns, attach_source (the index of the
// table holding the sample's blob among the dataset's sources) and attach_version (that
// blob's WRITETIME when it was read). The info row 'kind' is 'attached' from the
// catalogue's creation on; the info row 'sources' (JSON) is written last, by SetSources:
// until it exists the dataset is not listed (Datasets) and opens only to be attached
// (Config.Attach), one row written at once, so the dataset appears whole.
//
// A blob read names the source's table, id and data column, never this keyspace. With
// one source that is all it needs; with several (a table per split), which one holds an
// id is read once, on the first read (loadSourceOf): a narrow scan of attach_source, as
// long as a metadata scan of the same dataset.

// ErrIncomplete is wrapped by Open's error for an attached dataset whose attach has not
// finished; it wraps store.ErrNotFound.
var ErrIncomplete = fmt.Errorf("%w: its attach has not finished (run the same cassfs dataset attach again, or cassfs dataset delete it)", store.ErrNotFound)

const attachedSamples = `CREATE TABLE IF NOT EXISTS DS.samples (id uuid PRIMARY KEY, label int, name text, size bigint, checksum blob, crc32c int,
	target_ext text, target_size bigint, target_checksum blob, target_crc32c int, attach_source int, attach_version bigint)`

// attachState is what open learnt of an attached dataset.
type attachState struct {
	kind    string // "attached", or "" for a dataset made by ingest
	sources []store.Source
	stmts   []string // the blob read of each source
	// blockStmts: the read of a block of each source (block.go): the id, the label if it
	// has one, the blob.
	blockStmts []string

	mu       sync.Mutex
	sourceOf map[uuid.UUID]int // guarded by mu; nil until loaded (several sources only)
}

// readAttachState reads the info rows 'kind' and 'sources'. A dataset made before the
// info table existed has none: made by ingest.
func (c *Store) readAttachState(ctx context.Context) (*attachState, error) {
	st := &attachState{}
	var sources string
	err := c.readMeta(ctx, func(rctx context.Context) error {
		iter := c.session.Query(c.cql(`SELECT key, value FROM DS.info WHERE key IN ('kind', 'sources')`)).WithContext(rctx).Idempotent(true).Iter()
		var k, v string
		for iter.Scan(&k, &v) {
			switch k {
			case "kind":
				st.kind = v
			case "sources":
				sources = v
			}
		}
		return iter.Close()
	})
	var re gocql.RequestError
	switch {
	case errors.As(err, &re) && re.Code() == gocql.ErrCodeInvalid:
		return st, nil // no info table
	case err != nil:
		return nil, fmt.Errorf("read the kind of dataset %q: %w", c.cfg.Dataset, kinded(err))
	}
	if sources != "" {
		if err := json.Unmarshal([]byte(sources), &st.sources); err != nil || len(st.sources) == 0 {
			return nil, fmt.Errorf("dataset %q: its sources %q are unreadable: %w", c.cfg.Dataset, sources, store.ErrCorrupt)
		}
		for _, s := range st.sources {
			q := "SELECT " + quote(s.DataColumn) + " FROM " + quote(s.Keyspace) + "." + quote(s.Table) + " WHERE " + quote(s.IDColumn) + " = ?"
			if s.LabelColumn != "" {
				q = "SELECT " + quote(s.LabelColumn) + ", " + quote(s.DataColumn) + " FROM " + quote(s.Keyspace) + "." + quote(s.Table) + " WHERE " + quote(s.IDColumn) + " = ?"
			}
			st.stmts = append(st.stmts, q)
			cols := quote(s.IDColumn) + ", " + quote(s.DataColumn)
			if s.LabelColumn != "" {
				cols = quote(s.IDColumn) + ", " + quote(s.LabelColumn) + ", " + quote(s.DataColumn)
			}
			st.blockStmts = append(st.blockStmts, "SELECT "+cols+" FROM "+quote(s.Keyspace)+"."+quote(s.Table)+" WHERE "+quote(s.IDColumn)+" IN ?")
		}
	}
	return st, nil
}

// checkAttachState decides whether the dataset can be opened as cfg asks. An attach may
// make its catalogue in an existing keyspace with no table: one an administrator made for
// it, granting the login all permissions there and only SELECT on the attached tables.
func (c *Store) checkAttachState(ctx context.Context, st *attachState, existed bool) error {
	if c.cfg.Attach && existed && st.kind != "attached" {
		empty, err := c.emptyKeyspace(ctx)
		if err != nil {
			return err
		}
		existed = !empty
	}
	switch {
	case c.cfg.Attach && existed && st.kind != "attached":
		return fmt.Errorf("dataset %q exists and was not made by attach (cassfs ingest made it, or another tool the keyspace): attach makes a dataset of its own; choose another name", c.cfg.Dataset)
	case !c.cfg.Attach && c.cfg.Create && st.kind == "attached":
		return fmt.Errorf("dataset %q was made by cassfs dataset attach: its blobs are read from the attached tables; ingest into another dataset", c.cfg.Dataset)
	case !c.cfg.Create && st.kind == "attached" && len(st.sources) == 0:
		return fmt.Errorf("dataset %q: %w", c.cfg.Dataset, ErrIncomplete)
	}
	return nil
}

// createAttachedTables makes the catalogue of an attached dataset: the tables of any
// dataset but blobs, and the 'kind' info row.
func (c *Store) createAttachedTables(ctx context.Context) error {
	qs := []string{
		attachedSamples,
		`CREATE TABLE IF NOT EXISTS DS.labels (label int PRIMARY KEY, name text)`,
		`CREATE TABLE IF NOT EXISTS DS.info (key text PRIMARY KEY, value text)`,
		snapshotTable,
	}
	for _, q := range append(qs, splitTables...) {
		if err := c.ddl(ctx, c.cql(q)); err != nil {
			return fmt.Errorf("create the catalogue of dataset %q: %w", c.cfg.Dataset, kinded(err))
		}
	}
	if err := c.exec(ctx, gocql.LocalQuorum, c.cql(`INSERT INTO DS.info (key, value) VALUES ('kind', 'attached')`)); err != nil {
		return fmt.Errorf("create the catalogue of dataset %q: %w", c.cfg.Dataset, kinded(err))
	}
	c.attach = &attachState{kind: "attached"}
	return nil
}

// Attached reports whether the dataset was made by attach: its blobs are read from the
// sources, and deleting it deletes the catalogue only.
func (c *Store) Attached() bool { return c.attach != nil && c.attach.kind == "attached" }

// PutEntry implements store.Attacher.
func (c *Store) PutEntry(ctx context.Context, s store.Sample, e store.Entry) error {
	if err := store.CheckEntry(s, e); err != nil {
		return err
	}
	if !c.Attached() {
		return fmt.Errorf("put entry %s: dataset %q was not made by attach", s.ID, c.cfg.Dataset)
	}
	c.mu.Lock()
	known := c.columns
	c.mu.Unlock()
	w, err := metadataWrite(s,
		[]string{"id", "label", "name", "size", "checksum", "crc32c", "attach_source", "attach_version"},
		[]any{gocql.UUID(s.ID), s.Label, s.Name, s.Size, s.Checksum[:], int32(s.CRC32C), e.Source, e.Version}, known)
	if err != nil {
		return err
	}
	if err := c.exec(ctx, gocql.LocalQuorum, c.cql(w.query), w.args...); err != nil {
		return fmt.Errorf("put entry of sample %s (%s): %w", s.ID, s.Name, kinded(err))
	}
	return nil
}

// Entries implements store.Attacher: a narrow scan of the samples table.
func (c *Store) Entries(ctx context.Context) (map[uuid.UUID]store.Entry, error) {
	t := store.Table{Keyspace: c.cfg.Dataset, Name: "samples", Columns: []store.Column{
		{Name: "id", Kind: "partition_key", Type: "uuid"},
		{Name: "attach_source", Kind: "regular", Type: "int"},
		{Name: "attach_version", Kind: "regular", Type: "bigint"},
	}}
	out := map[uuid.UUID]store.Entry{}
	err := c.Rows(ctx, t, []string{"id", "attach_source", "attach_version"}, func(vals []*string) error {
		if vals[1] == nil || vals[2] == nil {
			return nil
		}
		id, err := uuid.Parse(*vals[0])
		if err != nil {
			return err
		}
		src, err1 := strconv.Atoi(*vals[1])
		ver, err2 := strconv.ParseInt(*vals[2], 10, 64)
		if err := errors.Join(err1, err2); err != nil {
			return fmt.Errorf("sample %s: %w", id, err)
		}
		out[id] = store.Entry{Source: src, Version: ver}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the entries of dataset %q: %w", c.cfg.Dataset, err)
	}
	return out, nil
}

// SetSources implements store.Attacher: one row, so the dataset appears whole.
func (c *Store) SetSources(ctx context.Context, sources []store.Source) error {
	b, err := json.Marshal(sources)
	if err != nil {
		return err
	}
	if err := c.exec(ctx, gocql.LocalQuorum, c.cql(`INSERT INTO DS.info (key, value) VALUES ('sources', ?)`), string(b)); err != nil {
		return fmt.Errorf("record the sources of dataset %q: %w", c.cfg.Dataset, kinded(err))
	}
	return nil
}

// Sources implements store.Attacher.
func (c *Store) Sources(ctx context.Context) ([]store.Source, error) {
	st, err := c.readAttachState(ctx)
	if err != nil {
		return nil, err
	}
	return st.sources, nil
}

// getAttached is Get of an attached dataset: a point read of the source table.
func (c *Store) getAttached(ctx context.Context, id uuid.UUID, buf []byte) (store.Blob, error) {
	a := c.attach
	k := 0
	if len(a.sources) > 1 {
		var err error
		if k, err = c.sourceOf(ctx, id); err != nil {
			return store.Blob{}, fmt.Errorf("get sample %s: %w", id, err)
		}
	}
	src := a.sources[k]
	rctx, release, err := c.acquire(ctx)
	if err != nil {
		return store.Blob{}, fmt.Errorf("get sample %s: %w", id, kinded(err))
	}
	defer release()
	var label int
	data := blobBytes{buf: buf}
	dest := []any{&data}
	if src.LabelColumn != "" {
		dest = []any{&label, &data}
	}
	err = again(rctx, func() error {
		return c.session.Query(a.stmts[k], gocql.UUID(id)).WithContext(rctx).Idempotent(true).Scan(dest...)
	})
	if errors.Is(err, gocql.ErrNotFound) {
		return store.Blob{}, fmt.Errorf("get sample %s from %s: %w", id, src, store.ErrNotFound)
	}
	if err != nil {
		return store.Blob{}, fmt.Errorf("get sample %s from %s: %w", id, src, kinded(err))
	}
	return store.Blob{Label: label, Data: data.data}, nil
}

// sourceOf returns the index of the source holding id, reading them all on first use.
func (c *Store) sourceOf(ctx context.Context, id uuid.UUID) (int, error) {
	a := c.attach
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.sourceOf == nil {
		entries, err := c.Entries(ctx)
		if err != nil {
			return 0, err
		}
		a.sourceOf = make(map[uuid.UUID]int, len(entries))
		for id, e := range entries {
			a.sourceOf[id] = e.Source
		}
	}
	k, ok := a.sourceOf[id]
	if !ok || k < 0 || k >= len(a.sources) {
		return 0, fmt.Errorf("no source of it in dataset %q: %w", c.cfg.Dataset, store.ErrNotFound)
	}
	return k, nil
}

// emptyKeyspace reports whether the dataset's keyspace has no table.
func (c *Store) emptyKeyspace(ctx context.Context) (bool, error) {
	var n int
	err := c.readMeta(ctx, func(rctx context.Context) error {
		return c.session.Query(`SELECT count(*) FROM system_schema.tables WHERE keyspace_name = ?`, c.cfg.Dataset).WithContext(rctx).Idempotent(true).Scan(&n)
	})
	if err != nil {
		return false, fmt.Errorf("list the tables of dataset %q: %w", c.cfg.Dataset, kinded(err))
	}
	return n == 0, nil
}
