//go:build e2e

package e2e

import (
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// BenchmarkCacheDir: epochs after the first from the disk tier, against local disk, in one
// run, once with pushing into the page cache (the default) and once with opens passed
// through to the cache files (--push=false). 4,000 generated images (~430 MB) through a
// 150 ms link; the mount's memory cache holds half the dataset, its --cache-dir all of it.
// Epoch 0 is read cold through the link (it fills the directory); epochs 1–3 are read by
// the Go reader (16 goroutines, file_list order) and epoch 4 by DALI, each after dropping
// every kernel cache (data, dentries and inodes: drop_caches=3), as are the same files on
// local disk; then epochs 5–7 and 8 (DALI) the same way after dropping file data only
// (drop_caches=1: what a job sees between epochs of a dataset larger than memory, whose
// names stay cached), against local disk likewise; then epochs 9–11 and 12 (DALI) with
// nothing dropped (the dataset fits in the page cache), against local disk read warm.
// Reported per mode (push-, passthrough-): images/s of each, the ratio to local disk, the
// daemon's CPU per image and, for the Go reader, the reader's own CPU per image (local
// disk's beside it), and the requests that reached the daemon per image.
func BenchmarkCacheDir(b *testing.B) {
	const count, readers, batch = 4000, 16, 64
	ds, root := benchDataset(b, "cachedir", count, 47)
	total := treeBytes(b, root)
	noDrop := func(testing.TB) {}
	for range b.N {
		for _, mode := range []struct{ tag, flag string }{{"push-", "--push=true"}, {"passthrough-", "--push=false"}} {
			l := newLink(b, linkSpec{Name: "cachedir", RTT: 150 * time.Millisecond, Jitter: 10 * time.Millisecond})
			m := startMount(b, ds, append(l.mountArgs(), "--cache-size", strconv.FormatInt(total/2, 10), mode.flag,
				"--cache-dir", b.TempDir(), "--cache-dir-size", strconv.FormatInt(total*2, 10), "--metrics-addr", "127.0.0.1:0")...)
			url := metricsURL(b, m)
			epochPaths := func(e int) []string { return epochFiles(b, m.dir, e) }
			// The same files on local disk, in epoch 1's order; DALI's list of them.
			lines, _ := fileList(b, filepath.Join(m.dir, "all", "epoch-1"))
			local, localList := localCopy(b, root, lines)
			requests := func() float64 { return sumMetric(scrape(b, url), "cassfs_fuse_requests_total") }

			dropPageCache(b)
			t0, _, _ := batchTimes(b, epochPaths(0), readers, batch)
			b.ReportMetric(count/t0.Seconds(), mode.tag+"epoch0-150ms-images/s")
			fetched, _ := metricValue(scrape(b, url), "cassfs_fetch_seconds_count")
			// Cached epochs, against local disk, after dropping what drop says.
			cached := func(drop func(testing.TB), tag string, first int) {
				tag = mode.tag + tag
				if first == 9 { // warm: local disk read once to fill its page cache
					batchTimes(b, local, readers, batch)
				}
				drop(b)
				self0 := selfCPU(b)
				tl, _, _ := batchTimes(b, local, readers, batch)
				localRate := count / tl.Seconds()
				b.ReportMetric(localRate, tag+"local-disk-images/s")
				b.ReportMetric(float64((selfCPU(b)-self0).Microseconds())/count, tag+"local-disk-reader-cpu-us/image")
				for e := first; e < first+3; e++ {
					drop(b)
					cpu0, self0, req0 := daemonCPU(b, m), selfCPU(b), requests()
					te, _, _ := batchTimes(b, epochPaths(e), readers, batch)
					cpu, self := daemonCPU(b, m)-cpu0, selfCPU(b)-self0
					b.ReportMetric(count/te.Seconds(), fmt.Sprintf("%sepoch%d-images/s", tag, e))
					b.ReportMetric(count/te.Seconds()/localRate, fmt.Sprintf("%sepoch%d/local-disk", tag, e))
					b.ReportMetric(float64(cpu.Microseconds())/count, fmt.Sprintf("%sepoch%d-daemon-cpu-us/image", tag, e))
					b.ReportMetric(float64(self.Microseconds())/count, fmt.Sprintf("%sepoch%d-reader-cpu-us/image", tag, e))
					b.ReportMetric((requests()-req0)/count, fmt.Sprintf("%sepoch%d-requests/image", tag, e))
				}
				drop(b)
				n, secs := readerRun(b, "dali_bench.py", localList)
				daliLocal := float64(n) / secs
				drop(b)
				cpu0, req0 := daemonCPU(b, m), requests()
				e := first + 3
				n, secs = readerRun(b, "dali_bench.py", filepath.Join(m.dir, "all", fmt.Sprintf("epoch-%d", e), "file_list.txt"))
				cpu := daemonCPU(b, m) - cpu0
				b.ReportMetric(daliLocal, tag+"dali-local-disk-images/s")
				b.ReportMetric(float64(n)/secs, fmt.Sprintf("%sdali-epoch%d-images/s", tag, e))
				b.ReportMetric(float64(n)/secs/daliLocal, fmt.Sprintf("%sdali-epoch%d/local-disk", tag, e))
				b.ReportMetric(float64(cpu.Microseconds())/float64(n), fmt.Sprintf("%sdali-epoch%d-daemon-cpu-us/image", tag, e))
				b.ReportMetric((requests()-req0)/float64(n), fmt.Sprintf("%sdali-epoch%d-requests/image", tag, e))
			}
			cached(dropPageCache, "", 1)
			cached(dropFileData, "data-only-", 5)
			cached(noDrop, "warm-", 9)
			body := scrape(b, url)
			after, _ := metricValue(body, "cassfs_fetch_seconds_count")
			passed, _ := metricValue(body, "cassfs_opens_passed_through_total")
			pushed, _ := metricValue(body, `cassfs_page_cache_pushes_total\{result="pushed"\}`)
			b.ReportMetric(fetched/count, mode.tag+"epoch0-fetches/image")
			b.ReportMetric(after-fetched, mode.tag+"cached-epochs-database-fetches")
			b.ReportMetric(passed, mode.tag+"opens-passed-through")
			b.ReportMetric(pushed, mode.tag+"pushed")
			m.stop(b)
			l.proxy.Stop()
		}
	}
}
