package cassandra

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"
)

// The metadata scan reads the ring as pages of token ranges, as many at once as the
// database serves faster, and survives a database that drops or times out some of them.
//
// A page is one request: the rows of (From, To] in token order, at most Page of them
// (keyset paging: "token(id) > From AND token(id) <= To LIMIT Page"). A full page means the
// range goes on after the last token read, so the rest is queued as a range of its own; a
// failed page loses nothing and repeats nothing, because the rest starts after the last
// row handed to the caller. That is also what makes a range splittable at any time.
//
// How many pages are in flight is the controller's choice (scanControl), on the principle
// of the prefetch window's: grow while the rate grows, back off when the database says it
// is overloaded. It starts at 16 and doubles each round (one round: as many pages done
// as the limit allows in flight) while the round's rows per second grew by a quarter; the
// first round that did not grow returns to the limit before it, which gave the same rate
// with less in flight, and from then on the limit grows by one a round only while that
// keeps paying. A failed page, or one slower than half the request deadline (a
// queue is building at the node: a small node drops reads queued longer than its own read
// timeout: at ImageNet scale, 64 ranges at once on one node fail that way),
// halves the limit, at most once a round. Over a long link each page is one round trip
// whatever the load, so the limit doubles up to its maximum within a few round trips.
//
// A failed page is retried after a pause (100 ms, doubling up to 5 s), its range split in
// two for the first few failures and its pages halved (down to 100 rows): a node that
// cannot answer a large read in time often can answer a small one. The scan fails when a
// range has failed maxScanFails times in a row, when no row has arrived for
// Config.ScanStall, or at once on an error that retrying cannot mend (a missing table, a
// refused login, a row that does not decode); its error names the range and the cause.

const (
	scanStartParallel = 16    // pages in flight at the start
	scanFirstPage     = 10000 // rows of a first page: 200,000 samples in 64 ranges are one round trip
	scanMinPage       = 100
	maxScanFails      = 8 // failures in a row of one range before the scan gives up
	maxScanSplits     = 3 // failures of a range that split it (at most 8 pieces from one)
)

// scanRange is a part of the ring still to read: tokens (From, To], read Page rows at a
// time; Fails counts the failures in a row of the range it came from, Err is the last.
type scanRange struct {
	From, To int64
	Page     int
	Fails    int
	Err      error
}

func (r scanRange) String() string { return fmt.Sprintf("tokens (%d, %d]", r.From, r.To) }

// split halves r at its middle token; a range of one token is not split.
func (r scanRange) split() []scanRange {
	mid := r.From + int64((uint64(r.To)-uint64(r.From))/2)
	if mid == r.From {
		return []scanRange{r}
	}
	a, b := r, r
	a.To, b.From = mid, mid
	return []scanRange{a, b}
}

// pageResult is what reading one page did: rows handed to the caller, the token of the
// last one (the range's From if none), and the error that ended the page, if any.
type pageResult struct {
	Rows int
	Last int64
	Err  error
}

// rangeScan reads a set of ranges page by page (see the comment at the top of this file).
type rangeScan struct {
	// Read reads one page of r (r.Page rows at most, from r.From on) and hands its rows to
	// the caller; it is called from several goroutines at once.
	Read func(ctx context.Context, r scanRange) pageResult
	// Final reports errors that retrying cannot mend.
	Final func(error) bool
	// Max bounds the pages in flight; Timeout is one request's deadline (a page slower than
	// half of it counts as congestion); Stall is how long the scan may go without a
	// row before it fails.
	Max            int
	Timeout, Stall time.Duration
	pause          time.Duration // the first pause before a retry (100ms; tests shorten it)

	stats ScanStats // of the last Run, complete when it returns
}

// ScanStats describes a metadata scan: what it read, how, and how long it took.
type ScanStats struct {
	Pages, Failures int           // requests made, and those that failed
	PeakInFlight    int           // most pages in flight at once
	Limit           int           // the controller's limit at the end
	Took            time.Duration // from the first request to the last answer
}

// scanDone is a page read.
type scanDone struct {
	seq  uint64
	r    scanRange
	res  pageResult
	took time.Duration
}

// Run reads ranges until every one is read, or the scan fails.
//
// It schedules the pages itself rather than through an errgroup: the limit on pages in
// flight moves while pages are in flight (errgroup's SetLimit must not change then, and
// panics if it does), most failed pages are retried rather than ending the scan, and every
// page's rows, last token and time come back to this loop, which waits on them, on the
// retry and stall timers and on ctx at once (errgroup's Go blocks until a slot frees).
func (s *rangeScan) Run(ctx context.Context, ranges []scanRange) error {
	if s.pause == 0 {
		s.pause = 100 * time.Millisecond
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ctl := newScanControl(min(scanStartParallel, s.Max), s.Max, s.Timeout/2, time.Now())
	s.stats = ScanStats{}
	began := time.Now()
	defer func() { s.stats.Limit, s.stats.Took = ctl.limit, time.Since(began) }()
	queue := append([]scanRange(nil), ranges...)
	var later []scanRetry // failed ranges waiting for their pause to end
	results := make(chan scanDone)
	inFlight := 0
	flying := map[uint64]scanRange{} // the pages in flight, by launch
	var launched uint64
	lastRow := time.Now()
	var failure error
	for {
		if failure == nil {
			now := time.Now()
			for k := 0; k < len(later); {
				if now.Before(later[k].due) {
					k++
					continue
				}
				queue = append(queue, later[k].r)
				later = append(later[:k], later[k+1:]...)
			}
			for inFlight < ctl.limit && len(queue) > 0 {
				r := queue[len(queue)-1]
				queue = queue[:len(queue)-1]
				inFlight++
				s.stats.Pages++
				s.stats.PeakInFlight = max(s.stats.PeakInFlight, inFlight)
				launched++
				flying[launched] = r
				go func(seq uint64) {
					start := time.Now()
					res := s.Read(ctx, r)
					results <- scanDone{seq, r, res, time.Since(start)}
				}(launched)
			}
		}
		if inFlight == 0 && (failure != nil || len(queue) == 0 && len(later) == 0) {
			return failure
		}
		var wake <-chan time.Time
		var timer *time.Timer
		done := ctx.Done()
		if failure != nil {
			done = nil // only the pages in flight are waited for
		} else {
			next := lastRow.Add(s.Stall)
			for _, l := range later {
				if l.due.Before(next) {
					next = l.due
				}
			}
			timer = time.NewTimer(max(time.Until(next), time.Millisecond))
			wake = timer.C
		}
		select {
		case d := <-results:
			inFlight--
			delete(flying, d.seq)
			if failure != nil {
				continue
			}
			now := time.Now()
			if d.res.Rows > 0 {
				lastRow = now
			}
			if d.res.Err == nil {
				ctl.success(d.res.Rows, d.took, now)
				if d.res.Rows >= d.r.Page && d.res.Last != d.r.To {
					rest := d.r
					rest.From, rest.Fails, rest.Err = d.res.Last, 0, nil
					queue = append(queue, rest)
				}
				continue
			}
			if ctx.Err() != nil || s.Final(d.res.Err) {
				failure = fmt.Errorf("%v: %w", d.r, d.res.Err)
				cancel()
				continue
			}
			ctl.failure(now)
			s.stats.Failures++
			rest := d.r
			rest.From, rest.Fails, rest.Err = d.res.Last, d.r.Fails+1, d.res.Err
			if rest.Fails >= maxScanFails {
				failure = fmt.Errorf("%v: no answer in %d tries, the last: %w", rest, rest.Fails, d.res.Err)
				cancel()
				continue
			}
			rest.Page = max(scanMinPage, rest.Page/2)
			parts := []scanRange{rest}
			if rest.Fails <= maxScanSplits {
				parts = rest.split()
			}
			pause := min(s.pause<<(rest.Fails-1), 50*s.pause)
			for _, p := range parts {
				later = append(later, scanRetry{p, now.Add(pause)})
			}
		case <-wake:
			if now := time.Now(); now.Sub(lastRow) >= s.Stall {
				failure = s.stalled(queue, later, flying)
				cancel()
			}
		case <-done:
			failure = ctx.Err()
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// scanRetry is a failed range and when to read it again.
type scanRetry struct {
	r   scanRange
	due time.Time
}

// stalled is the error of a scan that read no row for s.Stall: it names a range left
// unread and why it was (the last failure of one that failed, if any did).
func (s *rangeScan) stalled(queue []scanRange, later []scanRetry, flying map[uint64]scanRange) error {
	if len(later) > 0 {
		return fmt.Errorf("%v: no row read for %v; the last failure: %w", later[0].r, s.Stall, later[0].r.Err)
	}
	if seqs := slices.Sorted(maps.Keys(flying)); len(seqs) > 0 {
		return fmt.Errorf("%v: no row read for %v, a page of it unanswered", flying[seqs[0]], s.Stall)
	}
	if len(queue) > 0 {
		return fmt.Errorf("%v: no row read for %v", queue[0], s.Stall)
	}
	return fmt.Errorf("no row read for %v", s.Stall)
}

// scanControl decides how many pages a scan has in flight (see the top of this file).
type scanControl struct {
	limit, max int
	slow       time.Duration // a page slower than this is a sign of congestion
	growing    bool          // doubling each round while the rate grows
	prev       int           // the limit before the last increase
	prevRate   float64       // rows per second of the round before
	start      time.Time     // of the current round
	done, rows int           // pages and rows of the current round
	cut        bool          // the limit was cut in the current round
	hold       int           // rounds to wait before trying one more again
}

func newScanControl(start, most int, slow time.Duration, now time.Time) *scanControl {
	start = max(min(start, most), 1)
	return &scanControl{limit: start, max: max(most, 1), slow: slow, growing: true, prev: start, start: now}
}

// success counts a page read in took with rows rows.
func (c *scanControl) success(rows int, took time.Duration, now time.Time) {
	if c.slow > 0 && took > c.slow {
		c.failure(now)
		return
	}
	c.done++
	c.rows += rows
	if c.done < c.limit {
		return
	}
	rate := float64(c.rows) / max(now.Sub(c.start).Seconds(), 1e-6)
	switch {
	case c.cut:
		// A round with a cut in it measured the old limit's congestion, not the new limit.
	case c.growing && (c.prevRate == 0 || rate > 1.25*c.prevRate):
		c.prev, c.prevRate = c.limit, rate
		c.limit = min(2*c.limit, c.max)
	case c.growing:
		// Twice as many in flight bought less than a quarter more: the smaller limit gave
		// about the same rate.
		c.growing = false
		c.limit = c.prev
	case c.hold > 0:
		c.hold--
		c.prevRate = rate
	case c.limit > c.prev && rate < 1.05*c.prevRate:
		// The last one more did not pay: back to where it was, and wait before trying again.
		c.limit, c.hold = c.prev, 4
		c.prevRate = rate
	default:
		c.prev, c.prevRate = c.limit, rate
		c.limit = min(c.limit+1, c.max)
	}
	c.start, c.done, c.rows, c.cut = now, 0, 0, false
}

// failure halves the limit, at most once a round, and ends the doubling.
func (c *scanControl) failure(now time.Time) {
	c.growing = false
	if c.cut {
		return
	}
	c.limit = max(c.limit/2, 1)
	c.prev, c.prevRate, c.hold = c.limit, 0, 2
	c.start, c.done, c.rows, c.cut = now, 0, 0, true
}
