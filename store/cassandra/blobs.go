package cassandra

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cassfs/cassfs/store"
	"github.com/gocql/gocql"
	"github.com/google/uuid"
)

// Put implements store.Store.
func (c *Store) Put(ctx context.Context, s store.Sample, data, target []byte) error {
	if err := store.CheckPut(s, data, target); err != nil {
		return err
	}
	c.mu.Lock()
	known, crc := c.columns, c.crc
	c.mu.Unlock()
	if !crc {
		s.HasCRC32C = false // a dataset opened without Create, made before the column
	}
	if s.Target != nil && !c.hasTargets() {
		return fmt.Errorf("put sample %s (%s): dataset %q has no target columns (open it with Create to add them)", s.ID, s.Name, c.cfg.Dataset)
	}
	writes, err := putWrites(s, data, target, known)
	if err != nil {
		return err
	}
	for _, w := range writes {
		if err := c.exec(ctx, gocql.LocalQuorum, c.cql(w.query), w.args...); err != nil {
			return fmt.Errorf("put %s of sample %s (%s): %w", w.what, s.ID, s.Name, kinded(err))
		}
	}
	return nil
}

// write is one statement of a Put.
type write struct {
	what  string // "blob" or "metadata", for errors
	query string
	args  []any
}

// putWrites returns the statements that store a sample, in the order they must run: the
// blob first, the target's blob second, then the metadata row, which is the commit marker
// (see store's package doc): a Put interrupted before the row leaves invisible orphan
// blobs, never a listed sample without data. TestPutWritesTheBlobFirst pins the order.
func putWrites(s store.Sample, data, target []byte, known []string) ([]write, error) {
	cols := []string{"id", "label", "name", "size", "checksum"}
	args := []any{gocql.UUID(s.ID), s.Label, s.Name, s.Size, s.Checksum[:]}
	if s.HasCRC32C {
		cols = append(cols, "crc32c")
		args = append(args, int32(s.CRC32C))
	}
	blobs := []write{{"blob", `INSERT INTO DS.blobs (id, label, data) VALUES (?, ?, ?)`, []any{gocql.UUID(s.ID), s.Label, data}}}
	if t := s.Target; t != nil {
		cols = append(cols, "target_ext", "target_size", "target_checksum", "target_crc32c")
		args = append(args, t.Ext, t.Size, t.Checksum[:], int32(t.CRC32C))
		blobs = append(blobs, write{"target", `INSERT INTO DS.blobs (id, label, data) VALUES (?, ?, ?)`, []any{gocql.UUID(store.TargetID(s.ID)), s.Label, target}})
	}
	meta, err := metadataWrite(s, cols, args, known)
	if err != nil {
		return nil, err
	}
	return append(blobs, meta), nil
}

// metadataWrite is the statement that writes a sample's metadata row: cols and args, then
// the user's columns of s.Meta (every one of them known).
func metadataWrite(s store.Sample, cols []string, args []any, known []string) (write, error) {
	keys := make([]string, 0, len(s.Meta))
	for k, v := range s.Meta {
		if v == "" {
			continue
		}
		if !slices.Contains(known, k) {
			return write{}, fmt.Errorf("put sample %s (%s): unknown metadata column %q", s.ID, s.Name, k)
		}
		keys = append(keys, k)
	}
	slices.Sort(keys) // stable statement text, so gocql's prepared-statement cache hits
	for _, k := range keys {
		cols = append(cols, k)
		args = append(args, s.Meta[k])
	}
	return write{"metadata", `INSERT INTO DS.samples (` + strings.Join(cols, ", ") + `) VALUES (?` + strings.Repeat(", ?", len(cols)-1) + `)`, args}, nil
}

// Get implements store.BlobReader. Each call picks its replica anew (token-aware routing
// with shuffled replicas, connect.go), so a second call for the same id, as store/hedge
// makes for a read not answered in time, likely goes to another replica.
func (c *Store) Get(ctx context.Context, id uuid.UUID, buf []byte) (store.Blob, error) {
	if c.attach != nil && len(c.attach.sources) > 0 {
		return c.getAttached(ctx, id, buf)
	}
	rctx, release, err := c.acquire(ctx)
	if err != nil {
		return store.Blob{}, fmt.Errorf("get sample %s: %w", id, kinded(err))
	}
	defer release()
	var label int
	data := blobBytes{buf: buf}
	err = again(rctx, func() error {
		return c.session.Query(c.getStmt, gocql.UUID(id)).WithContext(rctx).Idempotent(true).Scan(&label, &data)
	})
	if errors.Is(err, gocql.ErrNotFound) {
		return store.Blob{}, fmt.Errorf("get sample %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return store.Blob{}, fmt.Errorf("get sample %s: %w", id, kinded(err))
	}
	return store.Blob{Label: label, Data: data.data}, nil
}

// blobBytes receives the blob column: into the caller's buffer when Get was given one with
// room, otherwise as the driver's own bytes, not copied. That is safe because gocql v1.7
// reads every response into a frame buffer of its own (conn.recv makes a new framer per
// response and framer.readFrame allocates the body unless it fits the framer's own 128
// bytes), which nothing reuses once the query is done. A driver that pooled frame
// buffers would break this; TestRetainedBlobsStayIntact (e2e) would then fail.
type blobBytes struct {
	buf  []byte // the caller's buffer, or nil
	data []byte
}

// UnmarshalCQL implements gocql.Unmarshaler.
func (b *blobBytes) UnmarshalCQL(info gocql.TypeInfo, data []byte) error {
	if cap(b.buf) >= len(data) {
		b.data = append(b.buf[:0], data...)
	} else {
		b.data = data
	}
	return nil
}
