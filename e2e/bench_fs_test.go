//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cassfs/cassfs/store"
	"github.com/google/uuid"
)

// readAll reads every path with p goroutines (open, read to EOF, close) and returns files/s
// and MB/s.
func readAll(b *testing.B, paths []string, p int) (filesPerSec, mbPerSec float64) {
	total, nbytes, _ := batchTimes(b, paths, p, len(paths))
	return float64(len(paths)) / total.Seconds(), float64(nbytes) / 1e6 / total.Seconds()
}

func dropPageCache(b testing.TB) { dropCaches(b, "3") }

// dropFileData drops the page cache only (drop_caches=1), keeping the kernel's dentries and
// inodes: a training job's state between epochs of a dataset larger than memory, whose
// file data is evicted by the data itself while the names, a few hundred bytes per file,
// stay cached because every epoch looks them up again.
func dropFileData(b testing.TB) { dropCaches(b, "1") }

// dropCaches writes what to /proc/sys/vm/drop_caches: "3" also drops dentries and inodes,
// "1" file data only.
func dropCaches(b testing.TB, what string) {
	exec.Command("sync").Run()
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte(what), 0); err != nil {
		b.Fatalf("drop the page cache for a cold local-disk baseline (needs root): %v", err)
	}
}

// BenchmarkFilesystemRead compares, in one run, a parallel reader (16 goroutines) over one
// epoch of 2,000 ~110 KB images through the mount, cold (new mount) and warm (again, from
// the page cache), against the same files on local disk (cold after dropping the page
// cache, and warm) and against raw Store.Get reads with 16 in flight (after one pass that
// warms Cassandra, so "cold" means cold in cassfs, not on Cassandra's disk). It reports files/s
// and MB/s of each, and the ratios that matter.
func BenchmarkFilesystemRead(b *testing.B) {
	const count, readers = 2000, 16
	ds, root := benchDataset(b, "benchfs", count, 21)
	var local []string
	filepath.WalkDir(root, func(p string, e os.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			local = append(local, p)
		}
		return err
	})
	st := openStore(b, ds, false)
	var ids []uuid.UUID
	if err := st.Scan(context.Background(), func(s store.Sample) error { ids = append(ids, s.ID); return nil }); err != nil {
		b.Fatal(err)
	}

	for range b.N {
		dropPageCache(b)
		self0 := selfCPU(b)
		localCold, localColdMB := readAll(b, local, readers)
		localReaderCPU := (selfCPU(b) - self0).Seconds() / float64(len(local))
		localWarm, _ := readAll(b, local, readers)

		// Two passes of raw reads: the first warms Cassandra after the page cache was
		// dropped; the second is the ceiling the mount is compared with.
		storeRaw, storeCPU := 0.0, 0.0
		for range 2 {
			before := selfCPU(b)
			storeRaw = getAll(b, st, ids, readers)
			storeCPU = (selfCPU(b) - before).Seconds() / float64(len(ids))
		}

		m := startMount(b, ds, "--metrics-addr", "127.0.0.1:0")
		url := metricsURL(b, m)
		epoch := filepath.Join(m.dir, "all", "epoch-0")
		var paths []string
		lines, _ := fileList(b, epoch)
		for _, l := range lines {
			paths = append(paths, filepath.Join(epoch, l))
		}
		cpuBefore, self0 := daemonCPU(b, m), selfCPU(b)
		req0 := sumMetric(scrape(b, url), "cassfs_fuse_requests_total")
		mountCold, mountColdMB := readAll(b, paths, readers)
		mountCPU := (daemonCPU(b, m) - cpuBefore).Seconds() / float64(len(paths))
		mountReaderCPU := (selfCPU(b) - self0).Seconds() / float64(len(paths))
		body := scrape(b, url)
		fetches, _ := metricValue(body, "cassfs_fetch_seconds_count")
		coldRequests := (sumMetric(body, "cassfs_fuse_requests_total") - req0) / float64(len(paths))
		b.ReportMetric(coldRequests, "mount-cold-requests/file")
		b.ReportMetric(float64(fetchMedian(body).Microseconds())/1000, "mount-cold-fetch-p50-ms")
		mountWarm, mountWarmMB := readAll(b, paths, readers)
		m.stop(b)

		// The same epoch once more through a fresh mount whose cache holds a quarter of the
		// dataset: prefetched blobs must not be evicted before they are read, and the
		// prefetcher must not run far into the next epoch.
		var total int64
		for _, p := range local {
			fi, err := os.Stat(p)
			if err != nil {
				b.Fatal(err)
			}
			total += fi.Size()
		}
		q := startMount(b, ds, "--metrics-addr", "127.0.0.1:0", "--cache-size", strconv.FormatInt(total/4, 10))
		qurl := metricsURL(b, q)
		qpaths := make([]string, len(lines))
		for k, l := range lines {
			qpaths[k] = filepath.Join(q.dir, "all", "epoch-0", l)
		}
		quarter, _ := readAll(b, qpaths, readers)
		// Prefetches still in flight count when they land.
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if n, ok := metricValue(scrape(b, qurl), "cassfs_requests_in_flight"); ok && n == 0 {
				break
			}
		}
		qfetches, _ := metricValue(scrape(b, qurl), "cassfs_fetch_seconds_count")
		q.stop(b)
		b.ReportMetric(quarter, "mount-quarter-cache-files/s")
		b.ReportMetric(qfetches/float64(len(qpaths)), "mount-quarter-cache-fetches/file")

		b.ReportMetric(localCold, "local-cold-files/s")
		b.ReportMetric(localColdMB, "local-cold-MB/s")
		b.ReportMetric(localWarm, "local-warm-files/s")
		b.ReportMetric(storeRaw, "store-files/s")
		b.ReportMetric(mountCold, "mount-cold-files/s")
		b.ReportMetric(mountColdMB, "mount-cold-MB/s")
		b.ReportMetric(mountWarm, "mount-warm-files/s")
		b.ReportMetric(mountWarmMB, "mount-warm-MB/s")
		b.ReportMetric(mountCold/storeRaw, "mount-cold/store")
		b.ReportMetric(mountCold/localCold, "mount-cold/local-cold")
		b.ReportMetric(mountWarm/localWarm, "mount-warm/local-warm")
		b.ReportMetric(mountCPU*1e6, "mount-cold-daemon-cpu-us/file")
		b.ReportMetric(mountReaderCPU*1e6, "mount-cold-reader-cpu-us/file")
		b.ReportMetric(localReaderCPU*1e6, "local-cold-reader-cpu-us/file")
		b.ReportMetric((mountCPU+mountReaderCPU)/localReaderCPU, "mount-cold-cpu/local-cold-reader-cpu")
		b.ReportMetric(storeCPU*1e6, "store-client-cpu-us/file")
		b.ReportMetric(fetches/float64(len(paths)), "mount-cold-fetches/file")
	}
}

// processCPU is the user and system CPU time process pid has used so far.
func processCPU(b *testing.B, pid int) time.Duration {
	b.Helper()
	path := fmt.Sprintf("/proc/%d/stat", pid)
	stat, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	return statCPU(b, path, stat)
}

// statCPU is the user and system CPU time in stat, a process's or a thread's stat file as
// read from path (fields 14 and 15, in clock ticks of 1/100 s).
func statCPU(b *testing.B, path string, stat []byte) time.Duration {
	b.Helper()
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+2:]))
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		b.Fatalf("%s: %s", path, stat)
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// daemonCPU is the CPU time the mount has used so far: its process and its children (the
// helper that looks names up ahead of the readers). A child that exited is not counted.
func daemonCPU(b *testing.B, m *mounted) time.Duration {
	b.Helper()
	pid := m.cmd.Process.Pid
	total := processCPU(b, pid)
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, t := range tasks {
		data, err := os.ReadFile(t)
		if err != nil {
			continue // the thread ended meanwhile
		}
		for _, f := range strings.Fields(string(data)) {
			child, err := strconv.Atoi(f)
			if err != nil {
				b.Fatalf("%s: %q", t, data)
			}
			total += processCPU(b, child)
		}
	}
	return total
}

// selfCPU is the user and system CPU time of this process so far.
func selfCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
