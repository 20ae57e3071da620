package cassandra

import (
	"context"
	"crypto/sha256"
	"fmt"
	"math"
	"math/big"
	"sync"

	"github.com/cassfs/cassfs/store"
	"github.com/gocql/gocql"
	"github.com/google/uuid"
)

// Scan implements store.Store: a parallel scan of the metadata table over token sub-ranges, never
// touching blobs.
func (c *Store) Scan(ctx context.Context, fn func(store.Sample) error) error {
	cols, err := c.Columns(ctx)
	if err != nil {
		return err
	}
	crc, targets := c.hasCRC(), c.hasTargets()
	q := `SELECT id, label, name, size, checksum`
	if crc {
		q += ", crc32c"
	}
	if targets {
		q += ", target_ext, target_size, target_checksum, target_crc32c"
	}
	for _, col := range cols {
		q += ", " + col
	}
	q += c.cql(` FROM DS.samples WHERE token(id) > ? AND token(id) <= ?`)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ranges := tokenRanges(c.cfg.ScanRanges)
	work := make(chan [2]int64)
	var (
		fnMu     sync.Mutex // serializes fn
		failed   bool       // guarded by fnMu; no fn call after a failure
		errOnce  sync.Once
		firstErr error
		wg       sync.WaitGroup
	)
	fail := func(err error) {
		errOnce.Do(func() { firstErr = err; cancel() })
	}
	call := func(s store.Sample) error {
		fnMu.Lock()
		defer fnMu.Unlock()
		if failed {
			return context.Canceled
		}
		if err := fn(s); err != nil {
			failed = true
			fail(err)
			return err
		}
		return nil
	}
	for w := 0; w < c.cfg.ScanParallel; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range work {
				if err := c.scanRange(ctx, q, crc, targets, cols, r, call); err != nil {
					fail(err)
				}
			}
		}()
	}
feed:
	for _, r := range ranges {
		select {
		case work <- r:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}

// scanPage is the page size of the metadata scan: a sub-range of a dataset of a few
// million samples is one page, so each sub-range costs one round trip.
const scanPage = 10000

func (c *Store) scanRange(ctx context.Context, q string, crc, targets bool, cols []string, r [2]int64, fn func(store.Sample) error) error {
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-c.sem }()
	// One sub-range is a few thousand narrow rows even for millions of samples; its pages
	// share one deadline.
	rctx, cancel := context.WithTimeout(ctx, 3*c.cfg.Timeout)
	defer cancel()
	// No partition key: any node coordinates the range (see routing).
	rctx = context.WithValue(rctx, anyNode{}, true)
	iter := c.session.Query(q, r[0], r[1]).WithContext(rctx).Idempotent(true).PageSize(scanPage).Iter()
	var (
		id       gocql.UUID
		label    int
		name     string
		size     int64
		checksum []byte
		crc32c   *int32 // nil: written before samples had the column
		tExt     string
		tSize    int64
		tSum     []byte
		tCRC     *int32 // nil: no target
	)
	meta := make([]*string, len(cols))
	dest := []any{&id, &label, &name, &size, &checksum}
	if crc {
		dest = append(dest, &crc32c)
	}
	if targets {
		dest = append(dest, &tExt, &tSize, &tSum, &tCRC)
	}
	for i := range cols {
		meta[i] = new(string)
		dest = append(dest, meta[i])
	}
	for iter.Scan(dest...) {
		s := store.Sample{ID: uuid.UUID(id), Label: label, Name: name, Size: size}
		if len(checksum) != len(s.Checksum) {
			iter.Close()
			return fmt.Errorf("scan dataset %q: sample %s (%s) has a %d-byte checksum, want %d", c.cfg.Dataset, s.ID, name, len(checksum), len(s.Checksum))
		}
		copy(s.Checksum[:], checksum)
		if crc32c != nil {
			s.CRC32C, s.HasCRC32C = uint32(*crc32c), true
		}
		crc32c = nil
		if tCRC != nil {
			if len(tSum) != sha256.Size {
				iter.Close()
				return fmt.Errorf("scan dataset %q: sample %s (%s) has a %d-byte target checksum, want %d", c.cfg.Dataset, s.ID, name, len(tSum), sha256.Size)
			}
			s.Target = &store.Target{Ext: tExt, Size: tSize, CRC32C: uint32(*tCRC)}
			copy(s.Target.Checksum[:], tSum)
		}
		tCRC = nil
		for i, col := range cols {
			if *meta[i] != "" {
				if s.Meta == nil {
					s.Meta = make(map[string]string, len(cols))
				}
				s.Meta[col] = *meta[i]
			}
			*meta[i] = ""
		}
		if err := fn(s); err != nil {
			iter.Close()
			return err
		}
	}
	if err := iter.Close(); err != nil {
		return fmt.Errorf("scan dataset %q, tokens (%d, %d]: %w", c.cfg.Dataset, r[0], r[1], kinded(err))
	}
	return nil
}

// tokenRanges splits Murmur3's ring (-2^63, 2^63-1] into n contiguous (start, end] ranges.
// Murmur3Partitioner never yields the minimum token -2^63, so the first open bound loses
// nothing.
func tokenRanges(n int) [][2]int64 {
	lo, hi := big.NewInt(math.MinInt64), big.NewInt(math.MaxInt64)
	span := new(big.Int).Sub(hi, lo)
	out := make([][2]int64, 0, n)
	prev := int64(math.MinInt64)
	for i := 1; i <= n; i++ {
		end := new(big.Int).Mul(span, big.NewInt(int64(i)))
		end.Quo(end, big.NewInt(int64(n)))
		end.Add(end, lo)
		e := end.Int64()
		if i == n {
			e = math.MaxInt64
		}
		out = append(out, [2]int64{prev, e})
		prev = e
	}
	return out
}
