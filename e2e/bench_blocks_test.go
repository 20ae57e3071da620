//go:build e2e

package e2e

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/cassfs/cassfs/store"
	"github.com/google/uuid"
)

// coldBlocksRuns counts BenchmarkColdBlocks's iterations over -count runs.
var coldBlocksRuns int

// BenchmarkColdBlocks: a cold epoch read through the mount with its prefetches in blocks
// (the default, --block-samples 16) and one per sample (--block-samples 1), against the
// store client reading the same blobs one id per query with 16 in flight (the way every
// client of the blobs table reads them), and in blocks of 16 with 8 in flight, in one run.
// 4,000 generated ~110 KB images; each pass after dropping the page cache (the database's
// files too); a fresh mount for each mount pass, read by 16 Go readers in file_list order.
// Reported per pass: files/s, the reading client's CPU per file (the store client's
// process; for a mount the daemon's, helper included), the local Cassandra node's CPU per
// file without its JIT compiler's and that apart (see jvmCPU), and for the mounts the
// ratios to the one-id-per-query client. The passes start once the database's compiler
// has settled (warmDatabase).
//
// CASSFS_BENCH_OTHER_BIN, if set, is another cassfs binary (an earlier build) whose mount
// at default flags is read the same way, after the others and before them in turn, its
// rows prefixed "other-mount-blocks-": a regression shows in one run, on one machine state.
func BenchmarkColdBlocks(b *testing.B) {
	const count, readers = 4000, 16
	ds, _ := benchDataset(b, "blocks", count, 51)
	st := openStore(b, ds, false)
	var ids []uuid.UUID
	if err := st.Scan(context.Background(), func(s store.Sample) error { ids = append(ids, s.ID); return nil }); err != nil {
		b.Fatal(err)
	}
	rand.New(rand.NewPCG(51, 1)).Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	waitQuiet(b)
	type pass struct{ rate, client, database, jit float64 }
	perFile := func(d time.Duration) float64 { return d.Seconds() * 1e6 / count }
	measure := func(client func() time.Duration, read func() float64) pass {
		dropPageCache(b)
		c0, db0, jit0 := client(), databaseCPU(b), databaseJIT(b)
		rate := read()
		return pass{rate, perFile(client() - c0), perFile(databaseCPU(b) - db0), perFile(databaseJIT(b) - jit0)}
	}
	mountPass := func(bin string, args ...string) pass {
		m := startMountWith(b, b.TempDir(), ds, runAs(bin), args...)
		epoch := filepath.Join(m.dir, "all", "epoch-0")
		lines, _ := fileList(b, epoch)
		paths := make([]string, len(lines))
		for k, l := range lines {
			paths[k] = filepath.Join(epoch, l)
		}
		p := measure(func() time.Duration { return daemonCPU(b, m) }, func() float64 {
			rate, _ := readAll(b, paths, readers)
			return rate
		})
		m.stop(b)
		return p
	}
	warm := warmDatabase(b, st, ids)
	// A mount's first pass still met the compiler at work where the store client's passes
	// no longer did (up to 270 µs of compiling per file): a mount reads once more, unmeasured.
	mountPass("")
	for range b.N {
		self := func() time.Duration { return selfCPU(b) }
		single := measure(self, func() float64 { return getAll(b, st, ids, readers) })
		blocks := measure(self, func() float64 { return getBlocks(b, st, ids, 16, 8) })

		// The other build goes first in every other run: the pass right after the store
		// client's meets the database's state it left (compactions, caches).
		other := os.Getenv("CASSFS_BENCH_OTHER_BIN")
		var otherPass pass
		if coldBlocksRuns++; other != "" && coldBlocksRuns%2 == 0 {
			otherPass = mountPass(other)
		}
		inBlocks := mountPass("")
		oneEach := mountPass("", "--block-samples", "1")
		if other != "" && coldBlocksRuns%2 == 1 {
			otherPass = mountPass(other)
		}
		rows := []struct {
			tag string
			p   pass
		}{{"mount-blocks-", inBlocks}, {"mount-one-per-sample-", oneEach}}
		if other != "" {
			rows = append(rows, struct {
				tag string
				p   pass
			}{"other-mount-blocks-", otherPass})
		}

		for _, r := range append([]struct {
			tag string
			p   pass
		}{{"store-one-per-query-", single}, {"store-blocks-16x8-", blocks}}, rows...) {
			b.ReportMetric(r.p.rate, r.tag+"files/s")
			b.ReportMetric(r.p.client, r.tag+"client-cpu-us/file")
			b.ReportMetric(r.p.database, r.tag+"database-cpu-us/file")
			b.ReportMetric(r.p.jit, r.tag+"database-jit-cpu-us/file")
		}
		b.ReportMetric(float64(warm), "database-warm-up-passes")
		for _, r := range rows {
			b.ReportMetric(r.p.rate/single.rate, r.tag+"files/store-one-per-query")
			b.ReportMetric(r.p.client/single.client, r.tag+"cpu/store-one-per-query")
			b.ReportMetric(r.p.database/single.database, r.tag+"database-cpu/store-one-per-query")
		}
	}
}

// getBlocks reads every id in blocks of size with p blocks in flight and returns reads per
// second.
func getBlocks(b *testing.B, st store.BlockReader, ids []uuid.UUID, size, p int) float64 {
	b.Helper()
	blocks := (len(ids) + size - 1) / size
	start := time.Now()
	parallel(b, p, blocks, func(k int) error {
		block := ids[k*size : min((k+1)*size, len(ids))]
		var mu sync.Mutex
		var first error
		st.GetBlock(context.Background(), block, func(_ int, _ store.Blob, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil && first == nil {
				first = err
			}
		})
		return first
	})
	return float64(len(ids)) / time.Since(start).Seconds()
}
