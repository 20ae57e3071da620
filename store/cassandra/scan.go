package cassandra

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"math/big"
	"sync"

	"github.com/cassfs/cassfs/store"
	"github.com/gocql/gocql"
	"github.com/google/uuid"
)

// Scan implements store.Store: a scan of the metadata table over token ranges, page by page,
// as many pages at once as the database serves faster (rangescan.go), never touching
// blobs.
func (c *Store) Scan(ctx context.Context, fn func(store.Sample) error) error {
	cols, err := c.Columns(ctx)
	if err != nil {
		return err
	}
	crc, targets := c.hasCRC(), c.hasTargets()
	q := `SELECT token(id), id, label, name, size, checksum`
	if crc {
		q += ", crc32c"
	}
	if targets {
		q += ", target_ext, target_size, target_checksum, target_crc32c"
	}
	for _, col := range cols {
		q += ", " + col
	}
	q += c.cql(` FROM DS.samples WHERE token(id) > ? AND token(id) <= ? LIMIT ?`)

	var (
		fnMu  sync.Mutex // serializes fn
		fnErr error      // guarded by fnMu; fn's error: no fn call after it
	)
	call := func(s store.Sample) error {
		fnMu.Lock()
		defer fnMu.Unlock()
		if fnErr != nil {
			return errCallerFailed
		}
		if err := fn(s); err != nil {
			fnErr = err
			return &callerError{err}
		}
		return nil
	}
	var ranges []scanRange
	for _, r := range tokenRanges(c.cfg.ScanRanges) {
		ranges = append(ranges, scanRange{From: r[0], To: r[1], Page: scanFirstPage})
	}
	rs := &rangeScan{
		Read: func(ctx context.Context, r scanRange) pageResult {
			return c.scanPage(ctx, q, crc, targets, cols, r, call)
		},
		Final:   finalScanError,
		Max:     c.cfg.ScanParallel,
		Timeout: c.cfg.Timeout,
		Stall:   c.cfg.ScanStall,
	}
	err = rs.Run(ctx, ranges)
	c.mu.Lock()
	c.lastScan = rs.stats
	c.mu.Unlock()
	fnMu.Lock()
	failed := fnErr
	fnMu.Unlock()
	if failed != nil {
		// The caller's own error, as it gave it, whichever page the scan ended at: another
		// page in flight may have ended first, at errCallerFailed.
		return failed
	}
	if err != nil {
		return fmt.Errorf("scan dataset %q, %w", c.cfg.Dataset, err)
	}
	return nil
}

// LastScan describes the last Scan that ended.
func (c *Store) LastScan() ScanStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastScan
}

// callerError carries the error of Scan's fn through the range scan, which ends at it.
type callerError struct{ err error }

func (e *callerError) Error() string { return e.err.Error() }

// errCallerFailed ends the pages still in flight once fn has failed.
var errCallerFailed = errors.New("the scan's caller failed")

// errBadRow is wrapped by errors of rows that do not decode.
var errBadRow = errors.New("bad row")

// finalScanError reports the errors of a page that reading it again cannot mend: the
// caller's, rows that do not decode, and the requests the node refuses as such (a
// missing table or column, a refused login or permission).
func finalScanError(err error) bool {
	var ce *callerError
	var re gocql.RequestError
	if errors.As(err, &ce) || errors.Is(err, errCallerFailed) || errors.Is(err, errBadRow) {
		return true
	}
	if errors.As(err, &re) {
		switch re.Code() {
		case gocql.ErrCodeSyntax, gocql.ErrCodeInvalid, gocql.ErrCodeUnauthorized, gocql.ErrCodeCredentials, gocql.ErrCodeConfig, gocql.ErrCodeProtocol:
			return true
		}
	}
	return false
}

// scanPage reads one page of r: at most r.Page rows of tokens (r.From, r.To], in token
// order, handing each to fn.
func (c *Store) scanPage(ctx context.Context, q string, crc, targets bool, cols []string, r scanRange, fn func(store.Sample) error) pageResult {
	var (
		token    int64
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
	dest := []any{&token, &id, &label, &name, &size, &checksum}
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
	// LOCAL_QUORUM, as writes are: a scan sees every write that completed before it,
	// which an index snapshot built from it must (store's "Index snapshots").
	query := func() *gocql.Query { return c.session.Query(q, r.From, r.To, r.Page).Consistency(gocql.LocalQuorum) }
	return c.readPage(ctx, r, query, &token, dest, func() error {
		s := store.Sample{ID: uuid.UUID(id), Label: label, Name: name, Size: size}
		if len(checksum) != len(s.Checksum) {
			return fmt.Errorf("%w: sample %s (%s) has a %d-byte checksum, want %d", errBadRow, s.ID, name, len(checksum), len(s.Checksum))
		}
		copy(s.Checksum[:], checksum)
		if crc32c != nil {
			s.CRC32C, s.HasCRC32C = uint32(*crc32c), true
		}
		crc32c = nil
		if tCRC != nil {
			if len(tSum) != sha256.Size {
				return fmt.Errorf("%w: sample %s (%s) has a %d-byte target checksum, want %d", errBadRow, s.ID, name, len(tSum), sha256.Size)
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
		return fn(s)
	})
}

// readPage reads one page of a token-range scan, the query made by query (its bounds
// r.From, r.To and its LIMIT r.Page): each row scanned into dest, whose first element is
// token, then handed to row, whose error ends the page with it.
func (c *Store) readPage(ctx context.Context, r scanRange, query func() *gocql.Query, token *int64, dest []any, row func() error) pageResult {
	res := pageResult{Last: r.From}
	rctx, release, err := c.acquire(ctx)
	if err != nil {
		res.Err = err
		return res
	}
	defer release()
	// No partition key: any node coordinates the range (see routing).
	rctx = context.WithValue(rctx, anyNode{}, true)
	// One request: LIMIT and the page size are the same, and the loop below stops at the
	// limit, so a paging state the node may send back is never followed (Prefetch 0: no
	// page is fetched ahead either).
	iter := query().WithContext(rctx).Idempotent(true).PageSize(r.Page).Prefetch(0).Iter()
	for res.Rows < r.Page && iter.Scan(dest...) {
		if err := row(); err != nil {
			iter.Close()
			res.Err = err
			return res
		}
		res.Rows++
		res.Last = *token
	}
	if err := iter.Close(); err != nil {
		res.Err = kinded(err)
	}
	return res
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
