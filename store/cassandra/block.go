package cassandra

import (
	"context"
	"fmt"
	"sync"

	"github.com/cassfs/cassfs/store"
	"github.com/gocql/gocql"
	"github.com/google/uuid"
)

// Blocks: many blobs in one request (store.BlockReader).
//
// A block is one `SELECT id, label, data FROM blobs WHERE id IN ?`. A multi-partition IN
// has no routing key of its own, and a coordinator that owns none of its ids reads them
// from the nodes that do: a second hop for every blob. So a block is split by owner: each
// id goes to the node the token-aware policy would send its own read to (one of its
// replicas, in the local data centre with --local-dc; the policy shuffles among them), and
// each part is sent to that node alone (routing.Pick, pinnedHost), which reads every id
// of it locally. On a single node there is nothing to split. Ids whose replica map is
// not known yet go where the policy sends them without it (their primary owner).
//
// Each part is one request in flight (Config.MaxInFlight) with the request deadline. A
// part that fails as a whole, or whose answer ends early (a lost connection, a timeout),
// is read again id by id (Get: token-aware, retried), so one id's trouble fails that id
// alone; an id the answer lacks is missing (store.ErrNotFound).
//
// Every blob of a part arrives in one response frame, which the driver reads into a buffer
// of its own; the blobs are handed over as slices of it, not copied (blobBytes), as Get's
// are. So a blob held keeps the whole frame alive: the caller that keeps them must count
// that (package prefetch's cache does, and copies a block's blobs out only when it evicts
// one of them). The copy per blob it spares cost the daemon about a fifth of its CPU in
// a cold epoch: the copies went to new memory, each page faulted in and zeroed
// (bench/history/journal.md, "a block's blobs kept in the buffer they came in").

// pinnedHost marks the context of a query that must go to one node first (a block's part).
type pinnedHost struct{}

// withHost returns ctx with the query pinned to h (routing.Pick); with h nil (a single
// node, or none up) it goes where the fallback policy sends it: an IN query has no
// partition key to route by.
func withHost(ctx context.Context, h *gocql.HostInfo) context.Context {
	if h == nil {
		return context.WithValue(ctx, anyNode{}, true)
	}
	return context.WithValue(ctx, pinnedHost{}, h)
}

// pinned yields h first if it is up, then next's hosts other than h: a retry of a block
// whose node went away goes to a node that fetches the ids from their owners.
func pinned(h *gocql.HostInfo, next gocql.NextHost) gocql.NextHost {
	first := h.IsUp()
	return func() gocql.SelectedHost {
		if first {
			first = false
			return selected{h}
		}
		for s := next(); s != nil; s = next() {
			if s.Info() != h {
				return s
			}
		}
		return nil
	}
}

// selected is a host chosen by pinned.
type selected struct{ h *gocql.HostInfo }

func (s selected) Info() *gocql.HostInfo { return s.h }
func (s selected) Mark(error)            {}

// GetBlock implements store.BlockReader (see Blocks above). In an attached dataset the ids
// are read from the tables their blobs are in, a block per table.
func (c *Store) GetBlock(ctx context.Context, ids []uuid.UUID, got func(k int, b store.Blob, err error)) {
	if len(ids) == 0 {
		return
	}
	if c.attach == nil || len(c.attach.sources) == 0 {
		c.readBlock(ctx, blockQuery{c.getStmt, c.blockStmt, true, ""}, ids, seq(len(ids)), got)
		return
	}
	c.getAttachedBlock(ctx, ids, got)
}

// blockQuery is what a block reads: single is the read of one id (its routing tells the
// owner), in the IN query of the block, which selects the id, the label if label is set,
// then the blob; from names the table in errors ("" for the dataset's own).
type blockQuery struct {
	single, in string
	label      bool
	from       string
}

// seq is 0..n-1.
func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// readBlock reads ids (whose indices in the caller's block are ks) with q: split by owner,
// the parts at once.
func (c *Store) readBlock(ctx context.Context, q blockQuery, ids []uuid.UUID, ks []int, got func(k int, b store.Blob, err error)) {
	hosts, parts := c.owners(q.single, ids)
	store.TellParts(ctx, len(parts))
	if len(parts) == 1 {
		c.readPart(ctx, q, hosts[0], ids, ks, got)
		return
	}
	var wg sync.WaitGroup
	for p, part := range parts {
		pids, pks := make([]uuid.UUID, len(part)), make([]int, len(part))
		for j, x := range part {
			pids[j], pks[j] = ids[x], ks[x]
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.readPart(ctx, q, hosts[p], pids, pks, got)
		}()
	}
	wg.Wait()
}

// owners splits ids by the node the token-aware policy picks first for a read of each with
// stmt (a replica, shuffled among them): the parts, as positions in ids, and their nodes
// (nil: one part, sent where routing sends it).
func (c *Store) owners(stmt string, ids []uuid.UUID) ([]*gocql.HostInfo, [][]int) {
	if c.nodes <= 1 || c.policy == nil {
		return []*gocql.HostInfo{nil}, [][]int{seq(len(ids))}
	}
	var hosts []*gocql.HostInfo
	var parts [][]int
	for x, id := range ids {
		q := c.session.Query(stmt, gocql.UUID(id))
		var h *gocql.HostInfo
		if s := c.policy.Pick(q)(); s != nil {
			h = s.Info()
		}
		q.Release()
		p := 0
		for p < len(hosts) && hosts[p] != h {
			p++
		}
		if p == len(hosts) {
			hosts, parts = append(hosts, h), append(parts, nil)
		}
		parts[p] = append(parts[p], x)
	}
	return hosts, parts
}

// readPart reads one part of a block from node h (nil: where routing sends it): see
// Blocks above.
func (c *Store) readPart(ctx context.Context, q blockQuery, h *gocql.HostInfo, ids []uuid.UUID, ks []int, got func(k int, b store.Blob, err error)) {
	answered := make([]bool, len(ids))
	err := c.queryPart(ctx, q, h, ids, func(x int, b store.Blob) {
		answered[x] = true
		got(ks[x], b, nil)
	})
	var rest []int
	for x, id := range ids {
		switch {
		case answered[x]:
		case err != nil:
			rest = append(rest, x)
		case q.from != "":
			got(ks[x], store.Blob{}, fmt.Errorf("get sample %s from %s: %w", id, q.from, store.ErrNotFound))
		default:
			got(ks[x], store.Blob{}, fmt.Errorf("get sample %s: %w", id, store.ErrNotFound))
		}
	}
	if len(rest) == 0 {
		return
	}
	if ctx.Err() != nil {
		for _, x := range rest {
			got(ks[x], store.Blob{}, fmt.Errorf("get sample %s: %w", ids[x], kinded(err)))
		}
		return
	}
	rids := make([]uuid.UUID, len(rest))
	for j, x := range rest {
		rids[j] = ids[x]
	}
	store.GetEach(ctx, c, rids, func(j int, b store.Blob, err error) { got(ks[rest[j]], b, err) })
}

// queryPart sends the IN query of ids to h and hands each row to row, with the position
// of its id in ids; it returns the query's error, if any (rows may have come before it).
func (c *Store) queryPart(ctx context.Context, q blockQuery, h *gocql.HostInfo, ids []uuid.UUID, row func(x int, b store.Blob)) error {
	rctx, release, err := c.acquire(ctx)
	if err != nil {
		return err
	}
	defer release()
	gids := make([]gocql.UUID, len(ids))
	for x, id := range ids {
		gids[x] = gocql.UUID(id)
	}
	iter := c.session.Query(q.in, gids).WithContext(withHost(rctx, h)).Idempotent(true).Iter()
	var (
		id    gocql.UUID
		label int
		data  blobBytes // the row's blob, in the response's buffer (see Blocks above)
	)
	dest := []any{&id, &data}
	if q.label {
		dest = []any{&id, &label, &data}
	}
	for {
		data = blobBytes{}
		if !iter.Scan(dest...) {
			break
		}
		for x, g := range gids {
			if g == id {
				row(x, store.Blob{Label: label, Data: data.data})
				break
			}
		}
	}
	return iter.Close()
}

// getAttachedBlock reads a block of an attached dataset: a block per source table.
func (c *Store) getAttachedBlock(ctx context.Context, ids []uuid.UUID, got func(k int, b store.Blob, err error)) {
	a := c.attach
	bySource := make([][]int, len(a.sources))
	for k, id := range ids {
		s := 0
		if len(a.sources) > 1 {
			var err error
			if s, err = c.sourceOf(ctx, id); err != nil {
				got(k, store.Blob{}, fmt.Errorf("get sample %s: %w", id, err))
				continue
			}
		}
		bySource[s] = append(bySource[s], k)
	}
	for s, ks := range bySource {
		if len(ks) == 0 {
			continue
		}
		sids := make([]uuid.UUID, len(ks))
		for j, k := range ks {
			sids[j] = ids[k]
		}
		src := a.sources[s]
		c.readBlock(ctx, blockQuery{a.stmts[s], a.blockStmts[s], src.LabelColumn != "", src.String()}, sids, ks, got)
	}
}
