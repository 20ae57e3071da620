package cassandra

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gocql/gocql"
)

// simNode is a simulated node for the range scan: rows at sorted tokens, a page's answer
// after Base plus its rows' share of a capacity that all pages in flight divide among
// themselves, and, as a small Cassandra node does, a read that would take longer than
// NodeTimeout dropped: it fails after NodeTimeout instead.
type simNode struct {
	tokens      []int64
	Base        time.Duration
	RowsPerSec  float64 // 0: no limit
	NodeTimeout time.Duration

	mu        sync.Mutex
	seen      []int // times each row was handed over
	inFlight  int
	peak      int
	failures  int
	failEarly func(r scanRange) error // injected failures, before any row
}

func newSimNode(n int, seed uint64) *simNode {
	rng := rand.New(rand.NewPCG(seed, 1))
	set := map[int64]bool{}
	for len(set) < n {
		set[int64(rng.Uint64())] = true
	}
	tokens := make([]int64, 0, n)
	for t := range set {
		if t != -1<<63 {
			tokens = append(tokens, t)
		}
	}
	slices.Sort(tokens)
	return &simNode{tokens: tokens, seen: make([]int, len(tokens))}
}

func (s *simNode) read(ctx context.Context, r scanRange) pageResult {
	res := pageResult{Last: r.From}
	s.mu.Lock()
	s.inFlight++
	s.peak = max(s.peak, s.inFlight)
	share := s.inFlight
	fail := s.failEarly
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inFlight--
		s.mu.Unlock()
	}()
	lo, _ := slices.BinarySearch(s.tokens, r.From+1)
	if r.From == 1<<63-1 {
		lo = len(s.tokens)
	}
	hi := lo
	for hi < len(s.tokens) && s.tokens[hi] <= r.To && hi-lo < r.Page {
		hi++
	}
	took := s.Base
	if s.RowsPerSec > 0 {
		took += time.Duration(float64(hi-lo) * float64(share) / s.RowsPerSec * float64(time.Second))
	}
	var err error
	if fail != nil {
		err = fail(r)
	}
	if s.NodeTimeout > 0 && took > s.NodeTimeout {
		took, err = s.NodeTimeout, errors.New("Operation failed - received 0 responses and 1 failures: UNKNOWN")
	}
	select {
	case <-time.After(took):
	case <-ctx.Done():
		res.Err = ctx.Err()
		return res
	}
	if err != nil {
		s.mu.Lock()
		s.failures++
		s.mu.Unlock()
		res.Err = err
		return res
	}
	s.mu.Lock()
	for k := lo; k < hi; k++ {
		s.seen[k]++
	}
	s.mu.Unlock()
	res.Rows = hi - lo
	if hi > lo {
		res.Last = s.tokens[hi-1]
	}
	return res
}

func (s *simNode) checkEachOnce(t *testing.T) {
	t.Helper()
	for k, n := range s.seen {
		if n != 1 {
			t.Fatalf("row %d (token %d) handed over %d times, want once", k, s.tokens[k], n)
		}
	}
}

func firstRanges(n, page int) []scanRange {
	var out []scanRange
	for _, r := range tokenRanges(n) {
		out = append(out, scanRange{From: r[0], To: r[1], Page: page})
	}
	return out
}

func simScan(node *simNode, maxPar int, timeout time.Duration) *rangeScan {
	return &rangeScan{
		Read:    node.read,
		Final:   finalScanError,
		Max:     maxPar,
		Timeout: timeout,
		Stall:   30 * time.Second,
		pause:   5 * time.Millisecond,
	}
}

// TestRangeScanAdaptsToASmallNode: a node that serves 1M rows/s in all, and drops reads that
// would take over 100 ms, is read completely, every row once, with far fewer pages in
// flight than the 64 ranges (all 64 at once take 640 ms each: every one dropped).
func TestRangeScanAdaptsToASmallNode(t *testing.T) {
	node := newSimNode(200_000, 1)
	node.Base, node.RowsPerSec, node.NodeTimeout = time.Millisecond, 1e6, 100*time.Millisecond
	if err := simScan(node, 64, 2*time.Second).Run(context.Background(), firstRanges(64, scanFirstPage)); err != nil {
		t.Fatal(err)
	}
	node.checkEachOnce(t)
	if node.peak > 32 || node.failures > 16 {
		t.Errorf("up to %d pages in flight and %d of 64 pages dropped, want at most 32 and 16: the limit held below what the node serves", node.peak, node.failures)
	}
	t.Logf("peak in flight %d, %d pages dropped by the node", node.peak, node.failures)
}

// TestRangeScanOverALongLink: over a 100 ms link with an idle node, the limit doubles to
// all 64 ranges within a few round trips.
func TestRangeScanOverALongLink(t *testing.T) {
	node := newSimNode(100_000, 2)
	node.Base = 100 * time.Millisecond
	start := time.Now()
	if err := simScan(node, 64, 10*time.Second).Run(context.Background(), firstRanges(64, scanFirstPage)); err != nil {
		t.Fatal(err)
	}
	node.checkEachOnce(t)
	if took := time.Since(start); took > 10*node.Base {
		t.Errorf("64 one-page ranges took %v over a %v link, want a few round trips", took, node.Base)
	}
	if node.peak < 32 {
		t.Errorf("up to %d pages in flight over a long link, want the limit grown to at least 32", node.peak)
	}
}

// TestRangeScanRetriesFailedRanges: ranges that time out a few times each, and a page that
// fails after part of a range was read, are read again (split, smaller pages) with every
// row handed over exactly once.
func TestRangeScanRetriesFailedRanges(t *testing.T) {
	node := newSimNode(50_000, 3)
	node.Base = time.Millisecond
	var mu sync.Mutex
	fails := map[int64]int{}
	ranges := firstRanges(16, 1000)
	for _, r := range ranges[:8] {
		fails[r.From] = 0
	}
	node.failEarly = func(r scanRange) error {
		mu.Lock()
		defer mu.Unlock()
		// The pages starting where the lower half's ranges start fail three times each.
		if n, ok := fails[r.From]; ok && n < 3 {
			fails[r.From]++
			return &gocql.RequestErrReadTimeout{}
		}
		return nil
	}
	if err := simScan(node, 16, time.Second).Run(context.Background(), ranges); err != nil {
		t.Fatal(err)
	}
	node.checkEachOnce(t)
	if node.failures < 8*3 {
		t.Errorf("%d failures injected, want at least 24: the test does not test retries", node.failures)
	}
}

// TestRangeScanGivesUpNamingTheRange: a range that never answers fails the scan in bounded
// time, with an error naming a range of it and the node's cause; an error retrying cannot
// mend fails it at once.
func TestRangeScanGivesUpNamingTheRange(t *testing.T) {
	node := newSimNode(10_000, 4)
	node.failEarly = func(r scanRange) error {
		if r.From >= 0 && r.From < 1<<62 {
			return errors.New("Operation failed - received 0 responses and 1 failures: UNKNOWN from /127.0.0.1:7000")
		}
		return nil
	}
	start := time.Now()
	err := simScan(node, 8, time.Second).Run(context.Background(), firstRanges(8, 500))
	if err == nil || !strings.Contains(err.Error(), "tokens (") || !strings.Contains(err.Error(), "UNKNOWN from /127.0.0.1:7000") || !strings.Contains(err.Error(), "tries") {
		t.Errorf("scan of a dead range: %v, want the range, the tries and the cause", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("gave up after %v", took)
	}

	var calls atomic.Int64
	node.failEarly = func(scanRange) error { calls.Add(1); return &callerError{errors.New("caller says stop")} }
	err = simScan(node, 8, time.Second).Run(context.Background(), firstRanges(8, 500))
	if err == nil || !strings.Contains(err.Error(), "caller says stop") || calls.Load() > 8 {
		t.Errorf("a final error: %v after %d pages, want it at once", err, calls.Load())
	}
}

// TestRangeScanStall: a node that answers nothing fails the scan after Stall, naming a range.
func TestRangeScanStall(t *testing.T) {
	node := newSimNode(1000, 5)
	node.Base = time.Hour
	s := simScan(node, 8, time.Hour)
	s.Stall = 200 * time.Millisecond
	err := s.Run(context.Background(), firstRanges(8, 500))
	if err == nil || !strings.Contains(err.Error(), "no row read for 200ms") || !strings.Contains(err.Error(), "tokens (") {
		t.Errorf("a node that never answers: %v", err)
	}
}

// TestScanControlBacksOffAndRecovers: the controller's limit halves on congestion and grows
// back by one a round while that pays.
func TestScanControlBacksOffAndRecovers(t *testing.T) {
	now := time.Unix(0, 0)
	c := newScanControl(8, 64, time.Second, now)
	// Rounds whose rate doubles with the limit: doubling up to 64.
	for c.limit < 64 {
		for range c.limit {
			now = now.Add(100 * time.Millisecond / time.Duration(c.limit))
			c.success(1000, 100*time.Millisecond, now)
		}
	}
	c.success(1000, 2*time.Second, now) // a page slower than half the deadline
	if c.limit != 32 {
		t.Fatalf("after a slow page the limit is %d, want 32", c.limit)
	}
	c.failure(now)
	if c.limit != 32 {
		t.Errorf("a second failure in the same round cut the limit to %d", c.limit)
	}
	// Rounds whose rate grows with the limit: one more a round, once the holds have passed.
	for range 10 {
		n := c.limit
		for range n {
			now = now.Add(100 * time.Millisecond / time.Duration(n))
			c.success(1000, 50*time.Millisecond, now)
		}
	}
	if c.limit <= 32 {
		t.Errorf("after ten good rounds the limit is %d, want it above 32", c.limit)
	}
	// Rounds whose rate does not grow with the limit: the limit returns to where it paid.
	flat := time.Second / 2000 // a fixed time per page: the rate is the same at any limit
	c = newScanControl(8, 64, time.Second, now)
	for range 20 {
		for range c.limit {
			now = now.Add(flat)
			c.success(1000, 10*time.Millisecond, now)
		}
	}
	if c.limit > 9 {
		t.Errorf("with a rate that does not grow with the limit, the limit is %d, want 8 or 9", c.limit)
	}
}
