//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkTierDatabaseStopped: later epochs from the disk tier with the database gone,
// against local disk, in one run. 3,000 generated images; a mount with default flags and
// a --cache-dir of 2 GiB reads epoch 0 from the database (16 Go readers in file_list
// order: it fills the tier); the local tree is read by the same readers and by DALI
// (fn.readers.file), the page cache dropped before each; then the database goes (the
// link to it stops: connections refused, as with a stopped node), epochs 1 and 2 are
// listed (ls), and with every kernel cache dropped before each (data, dentries, inodes)
// epoch 1 is read by the Go readers and epoch 2 by DALI. Reported: images/s of each, the
// ratio to local disk read the same way, the daemon's CPU and the requests that reached
// it per image.
//
// CASSFS_BENCH_OTHER_BIN, if set, is another cassfs binary (an earlier build) whose mount
// is measured the same way right after, with its rows prefixed "other-": a regression
// shows in one run, on one machine state.
func BenchmarkTierDatabaseStopped(b *testing.B) {
	const count, readers, batch = 3000, 16, 64
	ds, root := benchDataset(b, "tierstopped", count, 43)
	bins := []struct{ tag, path string }{{"", ""}}
	if other := os.Getenv("CASSFS_BENCH_OTHER_BIN"); other != "" {
		bins = append(bins, struct{ tag, path string }{"other-", other})
	}
	for range b.N {
		for _, bin := range bins {
			l := newLink(b, linkSpec{Name: "tierstopped"})
			m := startMountWith(b, b.TempDir(), ds, runAs(bin.path), append(l.mountArgs(), "--seed", "4", "--cache-dir", b.TempDir(), "--cache-dir-size", "2GiB",
				"--metrics-addr", "127.0.0.1:0")...)
			url := metricsURL(b, m)
			requests := func() float64 { return sumMetric(scrape(b, url), "cassfs_fuse_requests_total") }
			dropPageCache(b)
			batchTimes(b, epochFiles(b, m.dir, 0), readers, batch)

			lines, _ := fileList(b, filepath.Join(m.dir, "all", "epoch-1"))
			local, localList := localCopy(b, root, lines)
			dropPageCache(b)
			tl, _, _ := batchTimes(b, local, readers, batch)
			goLocal := count / tl.Seconds()
			dropPageCache(b)
			n, secs := readerRun(b, "dali_bench.py", localList)
			daliLocal := float64(n) / secs

			l.proxy.Stop() // the database gone: what follows comes from the disk tier
			for _, e := range []string{"epoch-1", "epoch-2"} {
				if _, err := os.ReadDir(filepath.Join(m.dir, "all", e)); err != nil {
					b.Fatal(err)
				}
			}
			dropPageCache(b)
			cpu0, req0 := daemonCPU(b, m), requests()
			te, _, _ := batchTimes(b, epochFiles(b, m.dir, 1), readers, batch)
			cpu, req := daemonCPU(b, m)-cpu0, requests()-req0
			b.ReportMetric(goLocal, bin.tag+"go-local-disk-images/s")
			b.ReportMetric(count/te.Seconds(), bin.tag+"go-epoch1-images/s")
			b.ReportMetric(count/te.Seconds()/goLocal, bin.tag+"go-epoch1/local-disk")
			b.ReportMetric(float64(cpu.Microseconds())/count, bin.tag+"go-epoch1-daemon-cpu-us/image")
			b.ReportMetric(req/count, bin.tag+"go-epoch1-requests/image")

			dropPageCache(b)
			cpu0, req0 = daemonCPU(b, m), requests()
			n, secs = readerRun(b, "dali_bench.py", filepath.Join(m.dir, "all", "epoch-2", "file_list.txt"))
			cpu, req = daemonCPU(b, m)-cpu0, requests()-req0
			if n != count {
				b.Fatalf("DALI read %d images of epoch 2, want %d", n, count)
			}
			b.ReportMetric(daliLocal, bin.tag+"dali-local-disk-images/s")
			b.ReportMetric(float64(n)/secs, bin.tag+"dali-epoch2-images/s")
			b.ReportMetric(float64(n)/secs/daliLocal, bin.tag+"dali-epoch2/local-disk")
			b.ReportMetric(float64(cpu.Microseconds())/float64(n), bin.tag+"dali-epoch2-daemon-cpu-us/image")
			b.ReportMetric(req/float64(n), bin.tag+"dali-epoch2-requests/image")
			if errs := sumMetric(scrape(b, url), "cassfs_fetch_errors_total"); errs > 0 {
				b.Logf("%s%v fetch errors (the database gone: samples the tier lacked)", bin.tag, errs)
			}
			m.stop(b)
		}
	}
}
