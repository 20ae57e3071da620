// Package hedge hedges blob reads: a wrapper around any store.BlobReader that sends a read
// not answered within a delay once more and takes the first answer, so a slow or frozen
// replica costs that delay instead of the whole request deadline. It knows no database.
//
// # What a hedged read does
//
// Reader.Get starts the read. If it has not answered after the delay, the same read is sent
// once more — a backend that picks its replica per call (store/cassandra) asks another,
// the attempts sharing a store.Attempts in their context — and the first answer wins; the
// other attempt is cancelled. A missing blob (store.ErrNotFound) is an answer. A failure
// is not while the other attempt runs: Get waits for that one, and fails only when both
// have. A read that fails before the delay is not sent again: hedging is not retrying.
// Hedges counts the reads sent a second time.
//
// buf is not used: each attempt reads into bytes of its own. The losing attempt may still
// be writing into its buffer after Get has returned the winner's, and store.BlobReader
// forbids writing into the caller's buf after Get returns.
//
// # Decisions
//
// The hedge is made around the backend's Get, not with the driver's own speculative
// execution: in gocql 1.7 a speculative attempt that finds no further host answers
// ErrNoConnections at once, and that answer wins the race (query_executor.go,
// executeQuery and do). Around Get it is also the same for every backend, and tested
// without a database.
//
// Whether to hedge is the caller's decision: it only helps where a second attempt can
// reach another replica (store/cassandra: Nodes above one), and it gives up buf.
package hedge

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/cassfs/cassfs/store"
	"github.com/google/uuid"
)

// Reader is a store.BlobReader that hedges the reads of another. It is safe for
// concurrent use.
type Reader struct {
	r      store.BlobReader
	after  time.Duration
	hedges atomic.Int64 // reads sent a second time
}

var _ store.BlobReader = (*Reader)(nil)

// New returns a Reader that sends a read of r not answered after the delay after once
// more. An after of 0 or less never hedges: Get is r's own, buf included.
func New(r store.BlobReader, after time.Duration) *Reader {
	return &Reader{r: r, after: after}
}

// Get implements store.BlobReader: see the package doc. Errors are the attempts' own.
func (h *Reader) Get(ctx context.Context, id uuid.UUID, buf []byte) (store.Blob, error) {
	if h.after <= 0 {
		return h.r.Get(ctx, id, buf)
	}
	type result struct {
		b   store.Blob
		err error
	}
	ctx, cancel := context.WithCancel(store.WithAttempts(ctx, new(store.Attempts)))
	defer cancel() // the losing attempt stops
	results := make(chan result, 2)
	attempt := func() {
		b, err := h.r.Get(ctx, id, nil)
		results <- result{b, err}
	}
	go attempt()
	hedge := time.NewTimer(h.after)
	defer hedge.Stop()
	running := 1
	var failed error // the first attempt's failure, while the other runs
	for {
		select {
		case <-hedge.C:
			h.hedges.Add(1)
			running++
			go attempt()
		case r := <-results:
			running--
			// A missing sample is an answer; a failure waits for the other attempt, and
			// when both fail, both causes are told.
			switch {
			case r.err == nil || errors.Is(r.err, store.ErrNotFound):
				return r.b, r.err
			case running == 0:
				return r.b, errors.Join(failed, r.err)
			}
			failed = r.err
		}
	}
}

// Hedges is how many reads were sent a second time.
func (h *Reader) Hedges() int64 { return h.hedges.Load() }

// GetBlock implements store.BlockReader: the block is r's own (or one Get per id, each
// hedged, where r reads no blocks). A block is not hedged here: the blobs a reader waits
// for are read again by themselves by the cache above (package prefetch), where a second
// attempt of a single read is hedged as any.
func (h *Reader) GetBlock(ctx context.Context, ids []uuid.UUID, got func(k int, b store.Blob, err error)) {
	if br, ok := h.r.(store.BlockReader); ok {
		br.GetBlock(ctx, ids, got)
		return
	}
	store.GetEach(ctx, h, ids, got)
}
