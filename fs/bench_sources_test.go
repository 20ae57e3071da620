package fs_test

import (
	"context"
	"os"
	"testing"

	"github.com/cassfs/cassfs/disktier"
	cfs "github.com/cassfs/cassfs/fs"
	"github.com/cassfs/cassfs/index"
	"github.com/cassfs/cassfs/internal/testkit"
	"github.com/cassfs/cassfs/prefetch"
	"github.com/cassfs/cassfs/splits"
	"github.com/cassfs/cassfs/store/memstore"
	"github.com/cassfs/cassfs/view"
)

// BenchmarkCachedEpochSourcesWithoutPassthrough is mount's BenchmarkCachedEpochSources
// (the same dataset, readers and measures, with its local-disk baseline) for the disk
// tier served in ways no mount option chooses, so wired here by hand:
//
//   - disk-splice: the disk tier on the disk without passthrough (MountOptions.NoPassthrough:
//     what a mount does where the kernel refuses it, not root or Linux before 6.9): OPEN
//     unanswered, READs spliced from the files;
//   - disk-read: the disk tier on the disk without passthrough: a 64 MiB memory cache that
//     the prefetcher fills from the tier's files ahead of the readers, READs answered from
//     it (what a mount did before it spliced).
func BenchmarkCachedEpochSourcesWithoutPassthrough(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("mounting and dropping the page cache need root")
	}
	ctx := context.Background()
	const n = 4000
	st := memstore.New("test", memstore.Options{})
	blobs := testkit.PutEpochSamples(b, st, n)
	ix, err := index.Load(ctx, st)
	testkit.Check(b, err)
	for range b.N {
		var localRate float64
		for _, source := range testkit.BenchSources("local", "disk-splice", "disk-read") {
			if source == "local" {
				localRate = testkit.LocalEpochs(b, blobs, 3, func(e uint64) []uint32 { return splits.Permutation(n, "local", 1, e) })
				b.ReportMetric(localRate, source+"-files/s")
				continue
			}
			d, err := disktier.Open(b.TempDir(), "test", ix, 1<<40, nil)
			testkit.Check(b, err)
			b.Cleanup(func() { d.Close() })
			var cache *prefetch.Cache
			var backing cfs.Backing
			arrived := func(i uint32) bool { return cache.Has(i) || d.Holds(i) }
			switch source {
			case "disk-splice":
				cache = prefetch.NewCache(d.Over(prefetch.StoreFetch(st, ix)), prefetch.CacheOptions{MaxBytes: 1 << 30, Samples: ix.Len(), Local: d.Holds})
				backing = backingFunc(func(i uint32) (*os.File, bool) {
					f, ok := d.Backing(i)
					if ok {
						cache.Drop(i)
					}
					return f, ok
				})
			case "disk-read":
				cache = prefetch.NewCache(d.Over(prefetch.StoreFetch(st, ix)), prefetch.CacheOptions{MaxBytes: 64 << 20, Samples: ix.Len()})
				arrived = cache.Has
			default:
				b.Fatalf("unknown source %q", source)
			}
			p := prefetch.NewPrefetcher(cache, prefetch.Options{Size: ix.BlobSize})
			vs := view.New(view.Config{Index: ix, Splits: []*splits.Split{splits.All(ix)}, Mode: view.Arrival, Arrived: arrived, Progress: p})
			mnt := b.TempDir()
			server := mountSelf(b, mnt, cfs.New(cfs.Config{Views: vs, Blobs: cache, Backing: backing}), cfs.MountOptions{FsName: "cassfs:bench", NoPassthrough: source == "disk-splice"})
			rate, cpu := testkit.MountEpochs(b, mnt, "all", n, 3)
			b.ReportMetric(rate, source+"-files/s")
			b.ReportMetric(rate/localRate, source+"/local")
			b.ReportMetric(cpu, source+"-daemon-cpu-us/file")
			testkit.Check(b, server.Unmount())
			p.Close()
			cache.Close()
		}
	}
}
