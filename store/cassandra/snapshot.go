package cassandra

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sync"

	"github.com/cassfs/cassfs/store"
	"github.com/gocql/gocql"
	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"
)

// Index snapshots (store's "Index snapshots"): the catalogue's version is the info row
// 'version'; the stored snapshot is described by the info row 'snapshot' (snapshotHeader,
// JSON) and its bytes are index_chunks((id, chunk)), SnapshotChunk bytes each with their
// CRC32C, each chunk a partition of its own so that they spread over the cluster and are
// read at once. The chunks are written before the row that points to them, and the
// chunks of the snapshot replaced are deleted after, so a snapshot is visible whole or not
// at all. Everything is read and written at LOCAL_QUORUM: a mount must not take a replica
// that missed the last MarkChanged for the current version.

// SnapshotChunk is the size of a snapshot's chunks: a few per 10,000 samples, far below
// the database's limits on a value and a mutation.
const SnapshotChunk = 1 << 20

// snapshotWrites and snapshotReadAhead bound the chunks written and read at once: at
// 150 ms round trips a 130 MiB snapshot (1.28M samples) is read in about eight of them.
const (
	snapshotWrites    = 8
	snapshotReadAhead = 16
)

// snapshotHeader describes a stored snapshot: taken at version Of, stored under ID in
// Chunks chunks of Bytes bytes in all.
type snapshotHeader struct {
	Of     uuid.UUID `json:"of"`
	ID     uuid.UUID `json:"id"`
	Chunks int       `json:"chunks"`
	Bytes  int64     `json:"bytes"`
}

const snapshotTable = `CREATE TABLE IF NOT EXISTS DS.index_chunks (id uuid, chunk int, crc32c int, data blob, PRIMARY KEY ((id, chunk)))`

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// MarkChanged implements store.Store.
func (c *Store) MarkChanged(ctx context.Context) error {
	if err := c.exec(ctx, gocql.LocalQuorum, c.cql(`INSERT INTO DS.info (key, value) VALUES ('version', ?)`), uuid.NewString()); err != nil {
		return fmt.Errorf("mark dataset %q as changed: %w", c.cfg.Dataset, kinded(err))
	}
	return nil
}

// Version implements store.Store.
func (c *Store) Version(ctx context.Context) (uuid.UUID, error) {
	v, _, err := c.versionAndSnapshot(ctx)
	return v, err
}

// versionAndSnapshot reads the catalogue's version and the stored snapshot's header (nil:
// none) with one query.
func (c *Store) versionAndSnapshot(ctx context.Context) (uuid.UUID, *snapshotHeader, error) {
	var rows map[string]string
	err := c.readMeta(ctx, func(rctx context.Context) error {
		rows = map[string]string{}
		iter := c.session.Query(c.cql(`SELECT key, value FROM DS.info WHERE key IN ('version', 'snapshot')`)).
			WithContext(rctx).Consistency(gocql.LocalQuorum).Idempotent(true).Iter()
		var k, v string
		for iter.Scan(&k, &v) {
			rows[k] = v
		}
		return iter.Close()
	})
	var re gocql.RequestError
	switch {
	case errors.As(err, &re) && re.Code() == gocql.ErrCodeInvalid:
		return uuid.UUID{}, nil, nil // a dataset made before the info table: never marked
	case err != nil:
		return uuid.UUID{}, nil, fmt.Errorf("read the catalogue version of dataset %q: %w", c.cfg.Dataset, kinded(err))
	}
	var version uuid.UUID
	if s, ok := rows["version"]; ok {
		if version, err = uuid.Parse(s); err != nil {
			return uuid.UUID{}, nil, fmt.Errorf("dataset %q: its catalogue version %q is unreadable: %w", c.cfg.Dataset, s, store.ErrCorrupt)
		}
	}
	s, ok := rows["snapshot"]
	if !ok {
		return version, nil, nil
	}
	h := new(snapshotHeader)
	if err := json.Unmarshal([]byte(s), h); err != nil || h.Chunks < 0 || h.Bytes < 0 || int64(h.Chunks) != (h.Bytes+SnapshotChunk-1)/SnapshotChunk {
		return version, nil, fmt.Errorf("dataset %q: its index snapshot's description %q is unreadable: %w", c.cfg.Dataset, s, store.ErrCorrupt)
	}
	return version, h, nil
}

// PutSnapshot implements store.Store: the chunks first, then the row that points to them,
// then the chunks of the snapshot it replaced are deleted.
func (c *Store) PutSnapshot(ctx context.Context, version uuid.UUID, r io.Reader) error {
	if !c.cfg.Create {
		// A dataset made before snapshots existed has no table for them yet.
		if err := c.ddl(ctx, c.cql(snapshotTable)); err != nil {
			return fmt.Errorf("make the index snapshot table of dataset %q: %w", c.cfg.Dataset, kinded(err))
		}
	}
	_, old, err := c.versionAndSnapshot(ctx)
	if err != nil && !errors.Is(err, store.ErrCorrupt) {
		return err
	}
	h := snapshotHeader{Of: version, ID: uuid.New()}
	fail := func(err error) error {
		return fmt.Errorf("store the index snapshot of dataset %q: %w", c.cfg.Dataset, err)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(snapshotWrites)
	for {
		buf := make([]byte, SnapshotChunk)
		n, rerr := io.ReadFull(r, buf)
		if n > 0 {
			chunk, data := h.Chunks, buf[:n]
			h.Chunks++
			h.Bytes += int64(n)
			g.Go(func() error {
				return kinded(c.exec(gctx, gocql.LocalQuorum, c.cql(`INSERT INTO DS.index_chunks (id, chunk, crc32c, data) VALUES (?, ?, ?, ?)`),
					gocql.UUID(h.ID), chunk, int32(crc32.Checksum(data, castagnoli)), data))
			})
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			werr := g.Wait() // the chunks in flight land before they are deleted
			c.deleteSnapshotChunks(ctx, h.ID, h.Chunks)
			return errors.Join(fail(rerr), werr)
		}
		if gctx.Err() != nil {
			break // a write failed: Wait reports it
		}
	}
	if err := g.Wait(); err != nil {
		c.deleteSnapshotChunks(ctx, h.ID, h.Chunks)
		return fail(err)
	}
	desc, err := json.Marshal(h)
	if err != nil {
		return fail(err)
	}
	if err := c.exec(ctx, gocql.LocalQuorum, c.cql(`INSERT INTO DS.info (key, value) VALUES ('snapshot', ?)`), string(desc)); err != nil {
		c.deleteSnapshotChunks(ctx, h.ID, h.Chunks)
		return fail(kinded(err))
	}
	if old != nil {
		c.deleteSnapshotChunks(ctx, old.ID, old.Chunks)
	}
	return nil
}

// deleteSnapshotChunks removes a snapshot's chunks, as far as it can: one left behind costs only
// its space (no row points to it), and a reader of the replaced snapshot that loses a
// chunk falls back to a scan.
func (c *Store) deleteSnapshotChunks(ctx context.Context, id uuid.UUID, chunks int) {
	ctx = context.WithoutCancel(ctx)
	var wg sync.WaitGroup
	sem := make(chan struct{}, snapshotWrites)
	for k := range chunks {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := c.exec(ctx, gocql.LocalQuorum, c.cql(`DELETE FROM DS.index_chunks WHERE id = ? AND chunk = ?`), gocql.UUID(id), k); err != nil {
				c.cfg.Logger.Debug("delete a chunk of an index snapshot", "dataset", c.cfg.Dataset, "snapshot", id, "chunk", k, "err", err)
			}
		})
	}
	wg.Wait()
}

// Snapshot implements store.Store: it reads up to snapshotReadAhead chunks ahead of the
// reader.
func (c *Store) Snapshot(ctx context.Context) (io.ReadCloser, error) {
	version, h, err := c.versionAndSnapshot(ctx)
	switch {
	case err != nil:
		return nil, err
	case h == nil:
		return nil, fmt.Errorf("dataset %q has no index snapshot: %w", c.cfg.Dataset, store.ErrNotFound)
	case h.Of != version:
		return nil, fmt.Errorf("the index snapshot of dataset %q is stale (the samples changed since): %w", c.cfg.Dataset, store.ErrNotFound)
	}
	ctx, cancel := context.WithCancel(ctx)
	sr := &snapshotReader{c: c, h: *h, cancel: cancel, results: make([]chan chunkResult, h.Chunks), slots: make(chan struct{}, snapshotReadAhead)}
	for k := range sr.results {
		sr.results[k] = make(chan chunkResult, 1)
	}
	go sr.fetch(ctx)
	return sr, nil
}

type chunkResult struct {
	data []byte
	err  error
}

// snapshotReader hands out a snapshot's chunks in order while fetch reads ahead.
type snapshotReader struct {
	c       *Store
	h       snapshotHeader
	cancel  context.CancelFunc
	results []chan chunkResult // chunk k's, sent once
	next    int                // the chunk Read takes next
	cur     []byte             // what is left of the chunk before next
	err     error              // sticky
	slots   chan struct{}      // a chunk being read or read and not yet taken holds one
}

func (sr *snapshotReader) fetch(ctx context.Context) {
	for k := range sr.results {
		select {
		case sr.slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		go func() { sr.results[k] <- sr.fetchChunk(ctx, k) }()
	}
}

func (sr *snapshotReader) fetchChunk(ctx context.Context, k int) chunkResult {
	c := sr.c
	var data []byte
	var crc int32
	err := c.readMeta(ctx, func(rctx context.Context) error {
		return c.session.Query(c.cql(`SELECT crc32c, data FROM DS.index_chunks WHERE id = ? AND chunk = ?`), gocql.UUID(sr.h.ID), k).
			WithContext(rctx).Consistency(gocql.LocalQuorum).Idempotent(true).Scan(&crc, &data)
	})
	want := SnapshotChunk
	if k == sr.h.Chunks-1 {
		want = int(sr.h.Bytes - int64(k)*SnapshotChunk)
	}
	switch {
	case errors.Is(err, gocql.ErrNotFound):
		// Replaced and deleted since it was opened.
		err = fmt.Errorf("chunk %d of the index snapshot of dataset %q is gone: %w", k, c.cfg.Dataset, store.ErrNotFound)
	case err != nil:
		err = fmt.Errorf("read chunk %d of the index snapshot of dataset %q: %w", k, c.cfg.Dataset, kinded(err))
	case len(data) != want || uint32(crc) != crc32.Checksum(data, castagnoli):
		err = fmt.Errorf("chunk %d of the index snapshot of dataset %q does not match its checksum or length: %w", k, c.cfg.Dataset, store.ErrCorrupt)
	}
	return chunkResult{data, err}
}

// Read implements io.Reader.
func (sr *snapshotReader) Read(p []byte) (int, error) {
	for len(sr.cur) == 0 {
		if sr.err != nil {
			return 0, sr.err
		}
		if sr.next == len(sr.results) {
			sr.err = io.EOF
			continue
		}
		res := <-sr.results[sr.next]
		sr.next++
		<-sr.slots
		sr.cur, sr.err = res.data, res.err
	}
	n := copy(p, sr.cur)
	sr.cur = sr.cur[n:]
	return n, nil
}

// Close implements io.Closer: it stops the chunks still being read.
func (sr *snapshotReader) Close() error {
	sr.cancel()
	return nil
}
