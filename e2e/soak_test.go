//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkSoak: four readers walk epochs of a three-node, replication-3 dataset through
// one mount for CASSFS_SOAK (default 3m) while node 2 is restarted a third of the way in.
// The mount's resident memory, heap and goroutines are sampled every 5 s. Failures: any
// read error; a heap above the mount's memory limit (cache + index + 128 MiB, which Go's
// collector keeps); resident memory above the bound `cassfs mount --help` states for
// --cache-size (rssBound); resident memory growing by more than
// 10% from the second third of the run to the last; more goroutines once the readers
// stop than before they started (plus 10: the driver's own).
func BenchmarkSoak(b *testing.B) {
	duration := 3 * time.Minute
	if v := os.Getenv("CASSFS_SOAK"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatalf("CASSFS_SOAK=%q: %v", v, err)
		}
		duration = d
	}
	c := startCluster(b)
	d, err := generate(b, b.TempDir(), "soak_rf3", c.hosts, "--count", "4000", "--classes", "4", "--mean-size", "20000", "--seed", "21")
	if err != nil {
		b.Fatal(err)
	}
	const cache = 32 << 20
	m := startMount(b, d.name, "--hosts", strings.Join(c.hosts, ","), "--cache-size", "32MiB", "--metrics-addr", "127.0.0.1:0", "--timeout", "5s")
	url := metricsURL(b, m)
	limit := float64(cache + d.ix.Len()*100 + 128<<20)
	goroutines := func() float64 { v, _ := metricValue(scrape(b, url), "go_goroutines"); return v }
	idleBefore := goroutines()

	var (
		stop   atomic.Bool
		reads  atomic.Int64
		bytes  atomic.Int64
		errsMu sync.Mutex
		errs   []error
		wg     sync.WaitGroup
	)
	start := time.Now()
	for r := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for epoch := r; !stop.Load(); epoch += 4 {
				root := filepath.Join(m.dir, "all", fmt.Sprintf("epoch-%d", epoch))
				paths, _ := fileList(b, root)
				for _, p := range paths {
					if stop.Load() {
						return
					}
					data, err := os.ReadFile(filepath.Join(root, p))
					if err != nil {
						errsMu.Lock()
						errs = append(errs, err)
						errsMu.Unlock()
						continue
					}
					reads.Add(1)
					bytes.Add(int64(len(data)))
				}
				// The next epoch reads the same samples again: drop the kernel's copies so
				// that they come from the mount, and the database, once more.
				os.WriteFile("/proc/sys/vm/drop_caches", []byte("1"), 0)
			}
		}()
	}
	type sample struct {
		at                    time.Duration
		rss, heap, goroutines float64
		reads                 int64
	}
	var samples []sample
	restarted := false
	for time.Since(start) < duration {
		time.Sleep(5 * time.Second)
		body := scrape(b, url)
		v := func(name string) float64 { x, _ := metricValue(body, name); return x }
		samples = append(samples, sample{time.Since(start).Round(time.Second), v("process_resident_memory_bytes"), v("go_memstats_heap_alloc_bytes"), v("go_goroutines"), reads.Load()})
		if !restarted && time.Since(start) > duration/3 {
			restarted = true
			go func() {
				c.script(b, "stop", "2")
				c.script(b, "startnode", "2")
			}()
		}
	}
	stop.Store(true)
	wg.Wait()
	elapsed := time.Since(start)
	time.Sleep(3 * time.Second) // fetches in flight end
	idleAfter := goroutines()

	var maxRSS, maxHeap float64
	for _, s := range samples {
		b.Logf("t=%v rss=%.0f MiB heap=%.0f MiB goroutines=%.0f reads=%d", s.at, s.rss/(1<<20), s.heap/(1<<20), s.goroutines, s.reads)
		maxRSS, maxHeap = max(maxRSS, s.rss), max(maxHeap, s.heap)
	}
	meanRSS := func(ss []sample) float64 {
		sum := 0.0
		for _, s := range ss {
			sum += s.rss
		}
		return sum / float64(len(ss))
	}
	n := len(samples)
	middle, last := meanRSS(samples[n/3:2*n/3]), meanRSS(samples[2*n/3:])
	b.ReportMetric(float64(reads.Load())/elapsed.Seconds(), "files/s")
	b.ReportMetric(float64(bytes.Load())/elapsed.Seconds()/1e6, "MB/s")
	b.ReportMetric(maxRSS/(1<<20), "max-rss-MiB")
	b.ReportMetric(maxHeap/(1<<20), "max-heap-MiB")
	b.ReportMetric(limit/(1<<20), "limit-MiB")
	b.ReportMetric(rssBound(b, cache, d.ix.Len())/(1<<20), "rss-bound-MiB")
	b.ReportMetric(idleAfter-idleBefore, "goroutine-growth")
	b.ReportMetric(float64(len(errs)), "errors")
	for _, err := range errs[:min(len(errs), 5)] {
		b.Errorf("read error during the soak: %v", err)
	}
	if maxHeap > limit {
		b.Errorf("the heap reached %.0f MiB, over the mount's limit of %.0f MiB", maxHeap/(1<<20), limit/(1<<20))
	}
	if bound := rssBound(b, cache, d.ix.Len()); maxRSS > bound {
		b.Errorf("resident memory reached %.0f MiB, over the %.0f MiB --help promises", maxRSS/(1<<20), bound/(1<<20))
	}
	b.ReportMetric(last/middle, "rss-last/middle")
	if last > 1.1*middle {
		b.Errorf("resident memory grew from %.0f MiB (mean of the second third) to %.0f MiB (last third)", middle/(1<<20), last/(1<<20))
	}
	if idleAfter > idleBefore+10 {
		b.Errorf("goroutines of the idle mount grew from %.0f to %.0f", idleBefore, idleAfter)
	}
	if !restarted {
		b.Error("the soak ended before node 2 was restarted")
	}
}
