//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// BenchmarkOneMountPerNode: the 8 ranks of a node read their parts of a split for three
// epochs, through one mount (its shard directories, <split>/shard-R-of-8/) and through 8
// mounts of one rank each (--shard R/8), same data, same run, same node memory budget: a
// cache of half the dataset, in one mount or split 8 ways. 4,000 generated images
// (~440 MB); each rank reads with 4 goroutines, the 8 ranks at once; the page cache is
// dropped before each epoch. Reported per mode (one-mount-, eight-mounts-): the time from
// starting the mounts until every rank has read its epoch-0 file_list, the daemons'
// resident memory summed at the end, the database fetches over the three epochs, and the
// node's images/s in each epoch.
func BenchmarkOneMountPerNode(b *testing.B) {
	const count, ranks, perRank = 4000, 8, 4
	ds, root := benchDataset(b, "node", count, 53)
	total := treeBytes(b, root)
	for range b.N {
		for _, mode := range []string{"one-mount-", "eight-mounts-"} {
			var args [][]string
			if mode == "one-mount-" {
				args = [][]string{{"--seed", "5", "--cache-size", strconv.FormatInt(total/2, 10), "--metrics-addr", "127.0.0.1:0"}}
			} else {
				for r := range ranks {
					args = append(args, []string{"--seed", "5", "--cache-size", strconv.FormatInt(total/2/ranks, 10), "--metrics-addr", "127.0.0.1:0", "--shard", fmt.Sprintf("%d/%d", r, ranks)})
				}
			}
			start := time.Now()
			mounts := startMounts(b, ds, args)
			epochDir := func(r, e int) string {
				if len(mounts) == 1 {
					return filepath.Join(mounts[0].dir, "all", fmt.Sprintf("shard-%d-of-%d", r, ranks), fmt.Sprintf("epoch-%d", e))
				}
				return filepath.Join(mounts[r].dir, "all", fmt.Sprintf("epoch-%d", e))
			}
			paths := func(r, e int) []string {
				names, _ := fileList(b, epochDir(r, e))
				for k, n := range names {
					names[k] = filepath.Join(epochDir(r, e), n)
				}
				return names
			}
			fetched := func() float64 {
				var n float64
				for _, m := range mounts {
					v, _ := metricValue(scrape(b, metricsURL(b, m)), "cassfs_fetch_seconds_count")
					n += v
				}
				return n
			}
			last := fetched()
			for r := range ranks {
				paths(r, 0)
			}
			b.ReportMetric(time.Since(start).Seconds(), mode+"ready-s")
			for e := range 3 {
				lists := make([][]string, ranks)
				for r := range ranks {
					lists[r] = paths(r, e)
				}
				dropPageCache(b)
				t0 := time.Now()
				var wg sync.WaitGroup
				for r := range ranks {
					wg.Go(func() { batchTimes(b, lists[r], perRank, len(lists[r])) })
				}
				wg.Wait()
				b.ReportMetric(count/time.Since(t0).Seconds(), fmt.Sprintf("%sepoch%d-images/s", mode, e))
				now := fetched()
				b.ReportMetric(now-last, fmt.Sprintf("%sepoch%d-fetches", mode, e)) // epoch 0's since the mounts started
				last = now
			}
			fetches, rss := fetched(), 0.0
			for _, m := range mounts {
				rss += residentMiB(b, m.cmd.Process.Pid)
			}
			b.ReportMetric(fetches, mode+"fetches-3-epochs")
			b.ReportMetric(fetches/count, mode+"fetches-per-sample")
			b.ReportMetric(rss, mode+"rss-MiB")
			for _, m := range mounts {
				m.stop(b)
			}
		}
	}
}

// startMounts starts one cassfs mount per argument list at once, as the ranks of a node
// would, and waits until every one serves.
func startMounts(b *testing.B, dataset string, args [][]string) []*mounted {
	b.Helper()
	var mounts []*mounted
	for _, a := range args {
		m := &mounted{dir: b.TempDir(), stderr: &syncBuf{}, done: make(chan error, 1)}
		m.cmd = exec.Command(cassfsBin, append([]string{"mount", "-d", dataset}, append(a, m.dir)...)...)
		m.cmd.Env = append(os.Environ(), "CASSFS_HOSTS="+strings.Join(hosts, ","))
		m.cmd.Stderr = m.stderr
		if err := m.cmd.Start(); err != nil {
			b.Fatal(err)
		}
		go func() { m.done <- m.cmd.Wait() }()
		b.Cleanup(func() { m.stop(b) })
		mounts = append(mounts, m)
	}
	deadline := time.Now().Add(120 * time.Second)
	for _, m := range mounts {
		for !isMounted(m.dir) || !serving(m.dir) {
			select {
			case err := <-m.done:
				b.Fatalf("cassfs mount exited before mounting: %v; %s", err, m.log())
			case <-time.After(20 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				b.Fatalf("cassfs mount did not mount within 120s; %s", m.log())
			}
		}
	}
	return mounts
}

// residentMiB is a process's resident memory (VmRSS), in MiB.
func residentMiB(b *testing.B, pid int) float64 {
	b.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "VmRSS:" {
			kb, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb / 1024
		}
	}
	b.Fatalf("/proc/%d/status has no VmRSS", pid)
	return 0
}
