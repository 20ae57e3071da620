package hedge

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cassfs/cassfs/store"
	"github.com/google/uuid"
)

// The tests run in synctest bubbles: time is the bubble's fake clock, which moves only when
// every goroutine in it is blocked, so "not answered within the delay" is exact and no test
// waits for real time.

const after = time.Second

// call is one Get the fake received; the test answers it.
type call struct {
	ctx    context.Context
	buf    []byte
	answer chan result
}

type result struct {
	b   store.Blob
	err error
}

// fake is a reader whose every Get waits until the test answers it or its context ends.
type fake struct{ calls chan *call }

func newFake() *fake { return &fake{calls: make(chan *call, 4)} }

func (f *fake) Get(ctx context.Context, id uuid.UUID, buf []byte) (store.Blob, error) {
	c := &call{ctx: ctx, buf: buf, answer: make(chan result, 1)}
	f.calls <- c
	select {
	case r := <-c.answer:
		return r.b, r.err
	case <-ctx.Done():
		return store.Blob{}, fmt.Errorf("get sample %s: %w", id, ctx.Err())
	}
}

// pending returns the calls the fake received and the test has not taken yet.
func (f *fake) pending() int { return len(f.calls) }

// get starts h.Get and returns where its result will arrive.
func get(h *Reader, ctx context.Context, buf []byte) <-chan result {
	out := make(chan result, 1)
	go func() {
		b, err := h.Get(ctx, uuid.New(), buf)
		out <- result{b, err}
	}()
	return out
}

// returned tells whether Get has returned, once everything in the bubble has settled.
func returned(got <-chan result) (result, bool) {
	synctest.Wait()
	select {
	case r := <-got:
		return r, true
	default:
		return result{}, false
	}
}

var (
	blobA       = store.Blob{Label: 1, Data: []byte("first")}
	blobB       = store.Blob{Label: 2, Data: []byte("second")}
	errDown     = fmt.Errorf("get sample: %w", store.ErrUnavailable)
	errNotFound = fmt.Errorf("get sample: %w", store.ErrNotFound)
)

// TestAnsweredInTimeIsNotHedged: a read answered within the delay is sent once, without the
// caller's buffer; nothing is sent later.
func TestAnsweredInTimeIsNotHedged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		h := New(f, after)
		got := get(h, context.Background(), make([]byte, 0, 100))
		c := <-f.calls
		if c.buf != nil {
			t.Errorf("a hedged read passed the caller's buffer on (%d bytes of room)", cap(c.buf))
		}
		time.Sleep(after - time.Nanosecond)
		synctest.Wait()
		if n := f.pending(); n != 0 {
			t.Fatalf("%d reads sent again before the delay", n)
		}
		c.answer <- result{b: blobA}
		r, ok := returned(got)
		if !ok || r.err != nil || string(r.b.Data) != "first" {
			t.Fatalf("Get = %q, %v (returned: %v); want the answer", r.b.Data, r.err, ok)
		}
		time.Sleep(2 * after)
		synctest.Wait()
		if n, hedges := f.pending(), h.Hedges(); n != 0 || hedges != 0 {
			t.Errorf("after an answer in time: %d reads sent again, Hedges() = %d; want 0, 0", n, hedges)
		}
	})
}

// TestSlowReadIsSentAgain: a read not answered within the delay is sent once more, exactly
// at the delay, and once only; each attempt's answer wins when it comes first, and the
// other attempt is cancelled.
func TestSlowReadIsSentAgain(t *testing.T) {
	for _, tc := range []struct {
		name   string
		winner int // 0: the first attempt answers first; 1: the hedge
		answer result
		want   string
	}{
		{"hedge answers first", 1, result{b: blobB}, "second"},
		{"first attempt answers first", 0, result{b: blobA}, "first"},
		{"hedge finds the blob missing", 1, result{err: errNotFound}, ""},
		{"first attempt finds the blob missing", 0, result{err: errNotFound}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFake()
				h := New(f, after)
				start := time.Now()
				got := get(h, context.Background(), nil)
				c := [2]*call{<-f.calls, <-f.calls}
				if took := time.Since(start); took != after {
					t.Errorf("the read was sent again after %v, want %v", took, after)
				}
				if h.Hedges() != 1 {
					t.Errorf("Hedges() = %d, want 1", h.Hedges())
				}
				c[tc.winner].answer <- tc.answer
				r, ok := returned(got)
				if !ok {
					t.Fatal("Get did not return on the first answer")
				}
				if string(r.b.Data) != tc.want || !errors.Is(r.err, tc.answer.err) {
					t.Errorf("Get = %q, %v; want %q, %v", r.b.Data, r.err, tc.want, tc.answer.err)
				}
				if loser := c[1-tc.winner]; loser.ctx.Err() == nil {
					t.Error("the losing attempt was not cancelled")
				}
				time.Sleep(10 * after)
				synctest.Wait()
				if n := f.pending(); n != 0 {
					t.Errorf("%d more attempts, want none", n)
				}
			})
		})
	}
}

// TestFailureWaitsForTheOther: an attempt that fails while the other runs is no answer: Get
// waits for the other, and fails with the later failure when both fail.
func TestFailureWaitsForTheOther(t *testing.T) {
	for _, tc := range []struct {
		name        string
		failing     int    // the attempt that fails first
		other       result // what the other answers then
		want        string
		wantErrText string
	}{
		{"hedge fails, first answers", 1, result{b: blobA}, "first", ""},
		{"first fails, hedge answers", 0, result{b: blobB}, "second", ""},
		{"both fail", 0, result{err: errors.New("the later failure")}, "", errDown.Error() + "\nthe later failure"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFake()
				h := New(f, after)
				got := get(h, context.Background(), nil)
				c := [2]*call{<-f.calls, <-f.calls}
				c[tc.failing].answer <- result{err: errDown}
				if r, ok := returned(got); ok {
					t.Fatalf("Get returned %q, %v on one failure while the other attempt ran", r.b.Data, r.err)
				}
				if c[1-tc.failing].ctx.Err() != nil {
					t.Fatal("one failure cancelled the other attempt")
				}
				c[1-tc.failing].answer <- tc.other
				r, ok := returned(got)
				switch {
				case !ok:
					t.Fatal("Get did not return once both attempts had")
				case tc.wantErrText != "" && (r.err == nil || r.err.Error() != tc.wantErrText):
					t.Errorf("Get error = %v, want %q", r.err, tc.wantErrText)
				case tc.wantErrText == "" && (r.err != nil || string(r.b.Data) != tc.want):
					t.Errorf("Get = %q, %v; want %q", r.b.Data, r.err, tc.want)
				}
			})
		})
	}
}

// TestFailureBeforeTheDelay: a read that fails before the delay fails at once and is not
// sent again (hedging is not retrying).
func TestFailureBeforeTheDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		h := New(f, after)
		got := get(h, context.Background(), nil)
		(<-f.calls).answer <- result{err: errDown}
		r, ok := returned(got)
		if !ok || !errors.Is(r.err, store.ErrUnavailable) {
			t.Fatalf("Get = %v (returned: %v), want the failure at once", r.err, ok)
		}
		time.Sleep(2 * after)
		synctest.Wait()
		if n, hedges := f.pending(), h.Hedges(); n != 0 || hedges != 0 {
			t.Errorf("a failed read: %d sent again, Hedges() = %d; want 0, 0", n, hedges)
		}
	})
}

// TestCancelEndsBothAttempts: the caller giving up ends both attempts, with the context's
// error.
func TestCancelEndsBothAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		h := New(f, after)
		ctx, cancel := context.WithCancel(context.Background())
		got := get(h, ctx, nil)
		c := [2]*call{<-f.calls, <-f.calls}
		cancel()
		r, ok := returned(got)
		if !ok || !errors.Is(r.err, context.Canceled) {
			t.Fatalf("Get = %v (returned: %v), want context.Canceled", r.err, ok)
		}
		if c[0].ctx.Err() == nil || c[1].ctx.Err() == nil {
			t.Error("an attempt outlived its caller")
		}
	})
}

// TestNoDelayNeverHedges: New with a delay of 0 passes every read through, buf included.
func TestNoDelayNeverHedges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		h := New(f, 0)
		buf := make([]byte, 0, 100)
		got := get(h, context.Background(), buf)
		c := <-f.calls
		if cap(c.buf) != cap(buf) {
			t.Errorf("the reader got a buffer of capacity %d, want the caller's (%d)", cap(c.buf), cap(buf))
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		if n := f.pending(); n != 0 {
			t.Errorf("%d reads sent again with no delay set", n)
		}
		c.answer <- result{b: blobA}
		if r, ok := returned(got); !ok || r.err != nil {
			t.Errorf("Get = %v (returned: %v)", r.err, ok)
		}
	})
}

// TestAttemptsShareTheirReplicas: the two attempts of a read carry the same
// store.Attempts, so that a backend asks another replica the second time; separate reads
// do not share one.
func TestAttemptsShareTheirReplicas(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		h := New(f, after)
		got := get(h, context.Background(), nil)
		first := <-f.calls
		first.answer <- result{b: blobA} // the first read is answered in time
		returned(got)
		got = get(h, context.Background(), nil)
		c1 := <-f.calls
		time.Sleep(after)
		c2 := <-f.calls
		a1, a2 := store.AttemptsOf(c1.ctx), store.AttemptsOf(c2.ctx)
		if a1 == nil || a1 != a2 || a1 == store.AttemptsOf(first.ctx) {
			t.Errorf("attempts' store.Attempts: %p and %p (an earlier read's %p); want one, the read's own", a1, a2, store.AttemptsOf(first.ctx))
		}
		c2.answer <- result{b: blobB}
		returned(got)
	})
}
