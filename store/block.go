package store

import (
	"context"
	"sync"

	"github.com/google/uuid"
)

// BlockReader reads many blobs in one request: a block. A mount's prefetcher reads the
// blobs ahead of its readers this way (package prefetch), since a request costs the
// database and the client about as much again as a blob does (bench/history/journal.md,
// "blocks"). A BlobReader that is not one reads a block one Get per id (GetBlock).
type BlockReader interface {
	BlobReader
	// GetBlock reads the blobs of ids (sample ids or target ids, distinct) and calls got
	// once for each, with its index in ids, its blob or its error (the kinds of Get's:
	// a missing blob wraps ErrNotFound, and names its id); it returns once every id was
	// answered. got may be called from several goroutines at once, for different ids, and
	// as the answers arrive, not in the order of ids; the blob's bytes are the caller's,
	// but may be slices of one buffer the block's blobs share (a response frame), which
	// any of them held keeps alive (package prefetch counts that).
	// A block that fails as a whole (a timeout, a node lost) is read again id by id, so
	// that one id's trouble fails that id alone. Each request has the reader's deadline.
	GetBlock(ctx context.Context, ids []uuid.UUID, got func(k int, b Blob, err error))
}

// partsKey is the context key of WithParts.
type partsKey struct{}

// WithParts returns ctx carrying parts, which a BlockReader's GetBlock given it calls with
// the number of requests it splits the block into (one per node owning some of its ids)
// before it sends them: a caller hands on the answers of a block split between nodes as
// they come, since its parts arrive apart (package prefetch).
func WithParts(ctx context.Context, parts func(n int)) context.Context {
	return context.WithValue(ctx, partsKey{}, parts)
}

// TellParts tells the caller of GetBlock (WithParts) into how many parts the block went.
func TellParts(ctx context.Context, n int) {
	if parts, ok := ctx.Value(partsKey{}).(func(int)); ok {
		parts(n)
	}
}

// GetBlock reads the blobs of ids through r as BlockReader.GetBlock does: in blocks if r is
// a BlockReader, else with one Get per id, all at once.
func GetBlock(ctx context.Context, r BlobReader, ids []uuid.UUID, got func(k int, b Blob, err error)) {
	if br, ok := r.(BlockReader); ok {
		br.GetBlock(ctx, ids, got)
		return
	}
	GetEach(ctx, r, ids, got)
}

// GetEach reads the blobs of ids with one Get per id, all at once, and calls got for each
// as it arrives; it returns once all have. It is the fallback of GetBlock, and what a
// BlockReader does with the ids of a block that failed as a whole.
func GetEach(ctx context.Context, r BlobReader, ids []uuid.UUID, got func(k int, b Blob, err error)) {
	if len(ids) == 1 {
		b, err := r.Get(ctx, ids[0], nil)
		got(0, b, err)
		return
	}
	var wg sync.WaitGroup
	for k, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, err := r.Get(ctx, id, nil)
			got(k, b, err)
		}()
	}
	wg.Wait()
}
