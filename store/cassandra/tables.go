package cassandra

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cassfs/cassfs/store"
	"github.com/gocql/gocql"
	"github.com/google/uuid"
)

// Reading the tables other tools wrote (store.Tables): their schema from
// system_schema.columns, their rows by the same token-range page scan as the metadata
// scan (rangescan.go), and one blob at a time. Only SELECTs: read-only credentials on the
// user's keyspace are enough. Names come from the schema or the command line and are
// always quoted, so a user's mixed-case or reserved-word column is read as it is.

// quote makes name a quoted CQL identifier.
func quote(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }

// Table implements store.Tables.
func (c *Store) Table(ctx context.Context, keyspace, name string) (store.Table, error) {
	t := store.Table{Keyspace: keyspace, Name: name}
	err := c.readMeta(ctx, func(rctx context.Context) error {
		t.Columns = nil
		iter := c.session.Query(`SELECT column_name, kind, type, position FROM system_schema.columns WHERE keyspace_name = ? AND table_name = ?`,
			keyspace, name).WithContext(rctx).Idempotent(true).Iter()
		var col store.Column
		for iter.Scan(&col.Name, &col.Kind, &col.Type, &col.Position) {
			t.Columns = append(t.Columns, col)
		}
		return iter.Close()
	})
	if err != nil {
		return t, fmt.Errorf("read the schema of table %s: %w", t, kinded(err))
	}
	if len(t.Columns) > 0 {
		return t, nil
	}
	var ks string
	err = c.readMeta(ctx, func(rctx context.Context) error {
		return c.session.Query(`SELECT keyspace_name FROM system_schema.keyspaces WHERE keyspace_name = ?`, keyspace).WithContext(rctx).Idempotent(true).Scan(&ks)
	})
	switch {
	case errors.Is(err, gocql.ErrNotFound):
		return t, fmt.Errorf("keyspace %s does not exist: %w", keyspace, store.ErrNotFound)
	case err != nil:
		return t, fmt.Errorf("look up keyspace %s: %w", keyspace, kinded(err))
	}
	return t, fmt.Errorf("keyspace %s has no table %s: %w", keyspace, name, store.ErrNotFound)
}

// Rows implements store.Tables.
func (c *Store) Rows(ctx context.Context, t store.Table, cols []string, fn func(vals []*string) error) error {
	types := make([]string, len(cols))
	sel := make([]string, len(cols))
	for k, col := range cols {
		if inner, ok := strings.CutPrefix(col, "writetime("); ok {
			types[k], sel[k] = "bigint", "writetime("+quote(strings.TrimSuffix(inner, ")"))+")"
			continue
		}
		types[k], sel[k] = "", quote(col)
		for _, tc := range t.Columns {
			if tc.Name == col {
				types[k] = tc.Type
			}
		}
		if types[k] == "" {
			return fmt.Errorf("table %s has no column %s", t, col)
		}
	}
	var pk []string
	for _, k := range t.PartitionKey() {
		pk = append(pk, quote(k))
	}
	tok := "token(" + strings.Join(pk, ", ") + ")"
	q := "SELECT " + tok + ", " + strings.Join(sel, ", ") + " FROM " + quote(t.Keyspace) + "." + quote(t.Name) +
		" WHERE " + tok + " > ? AND " + tok + " <= ? LIMIT ?"
	var mu sync.Mutex // serializes fn
	call := func(vals []*string) error {
		mu.Lock()
		defer mu.Unlock()
		if err := fn(vals); err != nil {
			return &callerError{err}
		}
		return nil
	}
	var ranges []scanRange
	for _, r := range tokenRanges(c.cfg.ScanRanges) {
		ranges = append(ranges, scanRange{From: r[0], To: r[1], Page: scanFirstPage})
	}
	rs := &rangeScan{
		Read:    func(ctx context.Context, r scanRange) pageResult { return c.rowsPage(ctx, q, types, r, call) },
		Final:   finalScanError,
		Max:     c.cfg.ScanParallel,
		Timeout: c.cfg.Timeout,
		Stall:   c.cfg.ScanStall,
	}
	err := rs.Run(ctx, ranges)
	var ce *callerError
	if errors.As(err, &ce) {
		return ce.err
	}
	if err != nil {
		return fmt.Errorf("scan table %s, %w", t, err)
	}
	return nil
}

// rowsPage reads one page of a Rows scan.
func (c *Store) rowsPage(ctx context.Context, q string, types []string, r scanRange, fn func([]*string) error) pageResult {
	var token int64
	dest := []any{&token}
	for _, t := range types {
		dest = append(dest, newDest(t))
	}
	query := func() *gocql.Query { return c.session.Query(q, r.From, r.To, r.Page) }
	return c.readPage(ctx, r, query, &token, dest, func() error {
		vals := make([]*string, len(types))
		for k := range types {
			vals[k] = text(dest[k+1])
		}
		return fn(vals)
	})
}

// newDest returns where a value of CQL type t is scanned to: a pointer to a pointer, nil
// for null.
func newDest(t string) any {
	switch t {
	case "int", "smallint", "tinyint", "bigint", "counter":
		return new(*int64)
	case "float":
		return new(*float32)
	case "double":
		return new(*float64)
	case "boolean":
		return new(*bool)
	case "uuid", "timeuuid":
		return new(*gocql.UUID)
	case "timestamp", "date":
		return new(*time.Time)
	case "blob":
		return new(*[]byte)
	}
	return new(*string)
}

// text formats a scanned value, nil for null.
func text(d any) *string {
	var s string
	switch v := d.(type) {
	case **int64:
		if *v == nil {
			return nil
		}
		s = strconv.FormatInt(**v, 10)
	case **float32:
		if *v == nil {
			return nil
		}
		s = strconv.FormatFloat(float64(**v), 'g', -1, 32)
	case **float64:
		if *v == nil {
			return nil
		}
		s = strconv.FormatFloat(**v, 'g', -1, 64)
	case **bool:
		if *v == nil {
			return nil
		}
		s = strconv.FormatBool(**v)
	case **gocql.UUID:
		if *v == nil {
			return nil
		}
		s = (**v).String()
	case **time.Time:
		if *v == nil {
			return nil
		}
		s = (**v).UTC().Format(time.RFC3339Nano)
	case **[]byte:
		if *v == nil {
			return nil
		}
		s = fmt.Sprintf("%x", **v)
	case **string:
		if *v == nil {
			return nil
		}
		s = **v
	}
	return &s
}

// Blob implements store.Tables.
func (c *Store) Blob(ctx context.Context, src store.Source, id uuid.UUID) ([]byte, error) {
	rctx, release, err := c.acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("read %s of %s=%s in %s: %w", src.DataColumn, src.IDColumn, id, src, kinded(err))
	}
	defer release()
	var data []byte
	q := "SELECT " + quote(src.DataColumn) + " FROM " + quote(src.Keyspace) + "." + quote(src.Table) + " WHERE " + quote(src.IDColumn) + " = ?"
	err = again(rctx, func() error {
		return c.session.Query(q, gocql.UUID(id)).WithContext(rctx).Idempotent(true).Scan(&data)
	})
	if errors.Is(err, gocql.ErrNotFound) {
		return nil, fmt.Errorf("read %s of %s=%s in %s: %w", src.DataColumn, src.IDColumn, id, src, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s of %s=%s in %s: %w", src.DataColumn, src.IDColumn, id, src, kinded(err))
	}
	return data, nil
}
