package cassandra

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cassfs/cassfs/store"
	"github.com/gocql/gocql"
)

func (c *Store) createTables(ctx context.Context) error {
	qs := []string{
		// Blobs do not compress; the label sits beside the data so one read returns both.
		`CREATE TABLE IF NOT EXISTS DS.blobs (id uuid PRIMARY KEY, label int, data blob) WITH compression = {'enabled': 'false'}`,
		`CREATE TABLE IF NOT EXISTS DS.samples (id uuid PRIMARY KEY, label int, name text, size bigint, checksum blob, crc32c int,
			target_ext text, target_size bigint, target_checksum blob, target_crc32c int)`,
		`CREATE TABLE IF NOT EXISTS DS.labels (label int PRIMARY KEY, name text)`,
		// Facts about the dataset as a whole: "created" (RFC 3339).
		`CREATE TABLE IF NOT EXISTS DS.info (key text PRIMARY KEY, value text)`,
		snapshotTable,
	}
	for _, q := range append(qs, splitTables...) {
		if err := c.ddl(ctx, c.cql(q)); err != nil {
			return fmt.Errorf("create tables of dataset %q: %w", c.cfg.Dataset, kinded(err))
		}
	}
	// Datasets made before samples had a CRC32C or targets gain the columns when written
	// to again. (Open reads the schema once more afterwards.)
	if _, err := c.Columns(ctx); err != nil {
		return err
	}
	for _, add := range []struct {
		have func() bool
		ddl  string
	}{
		{c.hasCRC, `ALTER TABLE DS.samples ADD crc32c int`},
		{c.hasTargets, `ALTER TABLE DS.samples ADD (target_ext text, target_size bigint, target_checksum blob, target_crc32c int)`},
	} {
		if add.have() {
			continue
		}
		if err := c.ddl(ctx, c.cql(add.ddl)); err != nil {
			// Another ingest may have added them meanwhile; only the schema can tell.
			if _, cerr := c.Columns(ctx); cerr != nil || !add.have() {
				return fmt.Errorf("add columns to dataset %q (%s): %w", c.cfg.Dataset, add.ddl, kinded(err))
			}
		}
	}
	return nil
}

// hasTargets reports whether the samples table has the target columns (as of the last
// Columns).
func (c *Store) hasTargets() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.targets
}

// hasCRC reports whether the samples table has the crc32c column (as of the last Columns).
func (c *Store) hasCRC() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.crc
}

func (c *Store) ddl(ctx context.Context, q string) error {
	// Schema changes wait for schema agreement across nodes; allow more than a read.
	ctx, cancel := context.WithTimeout(ctx, 3*c.cfg.Timeout)
	defer cancel()
	return c.session.Query(q).WithContext(ctx).Exec()
}

// Dataset implements store.Store.
func (c *Store) Dataset() string { return c.cfg.Dataset }

// metaTries is how many times a read of the dataset's metadata (its columns, class names,
// splits) is sent before a timeout is the answer.
const metaTries = 3

// readMeta runs op, one idempotent read of the dataset's metadata, with a deadline of its
// own, and again (metaTries in all) while it times out or loses its connection: a connection
// stuck for a moment, or a node too busy to answer one request in time, costs a mount's
// start one deadline instead of failing it. Blob reads are not retried here; their
// deadline is the reader's.
func (c *Store) readMeta(ctx context.Context, op func(rctx context.Context) error) error {
	var err error
	for range metaTries {
		rctx, release, aerr := c.acquire(ctx)
		if aerr != nil {
			return aerr
		}
		err = op(rctx)
		release()
		if err == nil || ctx.Err() != nil || !(isTimeout(err) || lostConnection(err) || errors.Is(err, context.DeadlineExceeded)) {
			return err
		}
	}
	return err
}

// acquire takes a slot of the in-flight bound and returns a context with the per-request
// deadline; release must be called when the request is done.
func (c *Store) acquire(ctx context.Context) (context.Context, func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	rctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	return rctx, func() { cancel(); <-c.sem }, nil
}

// AddColumns implements store.Store.
func (c *Store) AddColumns(ctx context.Context, names []string) error {
	for _, n := range names {
		if err := store.ValidColumnName(n); err != nil {
			return err
		}
	}
	have, err := c.Columns(ctx)
	if err != nil {
		return err
	}
	for _, n := range names {
		if slices.Contains(have, n) {
			continue
		}
		// n is a validated identifier.
		if err := c.ddl(ctx, fmt.Sprintf(c.cql(`ALTER TABLE DS.samples ADD %s text`), n)); err != nil {
			// Another ingest may have added it meanwhile; only the schema can tell.
			now, cerr := c.Columns(ctx)
			if cerr != nil || !slices.Contains(now, n) {
				return fmt.Errorf("add metadata column %q to dataset %q: %w", n, c.cfg.Dataset, kinded(err))
			}
		}
	}
	_, err = c.Columns(ctx)
	return err
}

// Columns implements store.Store.
func (c *Store) Columns(ctx context.Context) ([]string, error) {
	var cols []string
	crc, targets := false, false
	err := c.readMeta(ctx, func(rctx context.Context) error {
		cols, crc, targets = nil, false, false
		iter := c.session.Query(`SELECT column_name FROM system_schema.columns WHERE keyspace_name = ? AND table_name = 'samples'`,
			c.cfg.Dataset).WithContext(rctx).Idempotent(true).Iter()
		var name string
		for iter.Scan(&name) {
			crc = crc || name == "crc32c"
			targets = targets || name == "target_crc32c"
			if !slices.Contains(store.BuiltinColumns, name) {
				cols = append(cols, name)
			}
		}
		return iter.Close()
	})
	if err != nil {
		return nil, fmt.Errorf("read columns of dataset %q: %w", c.cfg.Dataset, kinded(err))
	}
	slices.Sort(cols)
	c.mu.Lock()
	c.columns, c.crc, c.targets = cols, crc, targets
	c.mu.Unlock()
	return slices.Clone(cols), nil
}

// SetLabels implements store.Store.
func (c *Store) SetLabels(ctx context.Context, names []string) error {
	for i, n := range names {
		if err := c.exec(ctx, gocql.LocalQuorum, c.cql(`INSERT INTO DS.labels (label, name) VALUES (?, ?)`), i, n); err != nil {
			return fmt.Errorf("store label %d (%q) of dataset %q: %w", i, n, c.cfg.Dataset, kinded(err))
		}
	}
	return nil
}

// Labels implements store.Store.
func (c *Store) Labels(ctx context.Context) ([]string, error) {
	var byLabel map[int]string
	err := c.readMeta(ctx, func(rctx context.Context) error {
		byLabel = map[int]string{}
		iter := c.session.Query(c.cql(`SELECT label, name FROM DS.labels`)).WithContext(rctx).Idempotent(true).Iter()
		var label int
		var name string
		for iter.Scan(&label, &name) {
			byLabel[label] = name
		}
		return iter.Close()
	})
	if err != nil {
		return nil, fmt.Errorf("read labels of dataset %q: %w", c.cfg.Dataset, kinded(err))
	}
	out := make([]string, len(byLabel))
	for l, n := range byLabel {
		if l < 0 || l >= len(out) {
			return nil, fmt.Errorf("dataset %q: labels are not numbered 0..%d (found %d)", c.cfg.Dataset, len(out)-1, l)
		}
		out[l] = n
	}
	return out, nil
}

func (c *Store) exec(ctx context.Context, cons gocql.Consistency, q string, args ...any) error {
	rctx, release, err := c.acquire(ctx)
	if err != nil {
		return err
	}
	defer release()
	// Every write here is idempotent: the same id always gets the same content.
	return again(rctx, func() error {
		return c.session.Query(q, args...).WithContext(rctx).Consistency(cons).Idempotent(true).Exec()
	})
}

// setCreated records when the dataset was made (by the Open that made its keyspace).
func (c *Store) setCreated(ctx context.Context, t time.Time) error {
	rctx, release, err := c.acquire(ctx)
	if err != nil {
		return err
	}
	defer release()
	err = c.session.Query(c.cql(`INSERT INTO DS.info (key, value) VALUES ('created', ?)`), t.UTC().Format(time.RFC3339Nano)).WithContext(rctx).Exec()
	if err != nil {
		return fmt.Errorf("record when dataset %q was made: %w", c.cfg.Dataset, kinded(err))
	}
	return nil
}

// Created implements store.Store. Datasets made before it was recorded have no info table
// or no row: the zero time.
func (c *Store) Created(ctx context.Context) (time.Time, error) {
	var v string
	err := c.readMeta(ctx, func(rctx context.Context) error {
		return c.session.Query(c.cql(`SELECT value FROM DS.info WHERE key = 'created'`)).WithContext(rctx).Idempotent(true).Scan(&v)
	})
	var re gocql.RequestError
	switch {
	// No row, or no table: the server refuses a query of a table it does not have as
	// invalid ("table info does not exist", "unconfigured table info").
	case errors.Is(err, gocql.ErrNotFound), errors.As(err, &re) && re.Code() == gocql.ErrCodeInvalid:
		return time.Time{}, nil
	case err != nil:
		return time.Time{}, fmt.Errorf("read when dataset %q was made: %w", c.cfg.Dataset, kinded(err))
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("dataset %q: its creation time %q is unreadable: %w", c.cfg.Dataset, v, store.ErrCorrupt)
	}
	return t, nil
}
