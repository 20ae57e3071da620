//go:build e2e

package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkSlowdown: the database slows down in the middle of reading and recovers. A
// fresh mount (default flags but a cache of 64 MiB, so every epoch is fetched again)
// behind a 20 ms Toxiproxy link is read by 16 goroutines in file_list.txt order, epoch
// after epoch, the page cache dropped before each (a dataset larger than memory), for 20 s; from 6 s to 11 s every connection's downstream is limited to
// 16 MB/s (a bandwidth toxic: the database answers at a fifth of its rate or less). Every
// 250 ms the mount's requests in flight are sampled (Prometheus) and the files read
// counted. Reported: files/s and mean requests in flight before (1–6 s), during (7–11 s)
// and after (13–20 s), how long after the slowdown the rate is back to 0.8× of before (per
// 500 ms), and read errors, which must be none: a request the 10 s deadline can absorb
// does not fail. Also reported: pushes lost (cassfs_page_cache_pushes_lost_total).
func BenchmarkSlowdown(b *testing.B) {
	const count, readers = 4000, 16
	const slowFrom, slowTo, end = 6 * time.Second, 11 * time.Second, 20 * time.Second
	ds, _ := benchDataset(b, "slowdown", count, 41)
	for range b.N {
		ln := newLink(b, linkSpec{Name: "slowdown", RTT: 20 * time.Millisecond, Jitter: 2 * time.Millisecond})
		m := startMount(b, ds, append(ln.mountArgs(), "--cache-size", "64MiB", "--metrics-addr", "127.0.0.1:0")...)
		url := metricsURL(b, m)
		const tick = 250 * time.Millisecond
		ticks := int(end / tick)
		var done [80]atomic.Int64 // files read in each tick
		inFlight := make([]float64, ticks)
		var errs atomic.Int64
		var firstErr atomic.Pointer[error]
		start := time.Now()
		var wg sync.WaitGroup
		wg.Go(func() { // the sampler
			for k := range ticks {
				time.Sleep(time.Until(start.Add(time.Duration(k+1) * tick)))
				if resp, err := http.Get(url); err == nil { // a failed scrape is a sample missed
					if body, err := io.ReadAll(resp.Body); err == nil {
						inFlight[k] = sumMetric(string(body), "cassfs_requests_in_flight")
					}
					resp.Body.Close()
				}
			}
		})
		wg.Go(func() { // the slowdown
			time.Sleep(time.Until(start.Add(slowFrom)))
			js := `{"name":"slow","type":"bandwidth","stream":"downstream","toxicity":1,"attributes":{"rate":16384}}`
			if _, err := ln.proxy.Toxics.AddToxicJson(strings.NewReader(js)); err != nil {
				b.Error(err)
				return
			}
			time.Sleep(time.Until(start.Add(slowTo)))
			if err := ln.proxy.Toxics.RemoveToxic(b.Context(), "slow"); err != nil {
				b.Error(err)
			}
		})
		for epoch := 0; time.Since(start) < end; epoch++ {
			dropFileData(b)
			paths, _ := fileList(b, filepath.Join(m.dir, "all", fmt.Sprint("epoch-", epoch)))
			var next atomic.Int64
			var rg sync.WaitGroup
			for range readers {
				rg.Go(func() {
					for time.Since(start) < end {
						k := next.Add(1) - 1
						if k >= int64(len(paths)) {
							return
						}
						if _, err := os.ReadFile(filepath.Join(m.dir, "all", fmt.Sprint("epoch-", epoch), paths[k])); err != nil {
							errs.Add(1)
							firstErr.CompareAndSwap(nil, &err)
							continue
						}
						if t := int(time.Since(start) / tick); t < ticks {
							done[t].Add(1)
						}
					}
				})
			}
			rg.Wait()
		}
		wg.Wait()
		lost, _ := metricValue(scrape(b, url), "cassfs_page_cache_pushes_lost_total")
		m.stop(b)

		window := func(from, to time.Duration) (rate, flight float64) {
			var files int64
			for k := int(from / tick); k < int(to/tick); k++ {
				files += done[k].Load()
				flight += inFlight[k]
			}
			n := float64(int(to/tick) - int(from/tick))
			return float64(files) / (to - from).Seconds(), flight / n
		}
		beforeRate, beforeFlight := window(time.Second, slowFrom)
		slowRate, slowFlight := window(slowFrom+time.Second, slowTo)
		afterRate, afterFlight := window(slowTo+2*time.Second, end)
		recovered := time.Duration(-1)
		for t := slowTo; t+500*time.Millisecond <= end; t += 500 * time.Millisecond {
			if r, _ := window(t, t+500*time.Millisecond); r >= 0.8*beforeRate {
				recovered = t + 500*time.Millisecond - slowTo
				break
			}
		}
		b.Logf("files/s before %.0f, slowed %.0f, after %.0f; requests in flight before %.0f, slowed %.0f, after %.0f; back to 0.8× after %v; %d read errors; %.0f pushes lost",
			beforeRate, slowRate, afterRate, beforeFlight, slowFlight, afterFlight, recovered, errs.Load(), lost)
		series := make([]string, ticks)
		for k := range ticks {
			series[k] = fmt.Sprintf("%d:%.0f", done[k].Load()*int64(time.Second/tick), inFlight[k])
		}
		b.Logf("per 250 ms, files/s:in flight: %s", strings.Join(series, " "))
		if n := errs.Load(); n > 0 {
			b.Errorf("%d reads failed, the first: %v", n, *firstErr.Load())
		}
		b.ReportMetric(beforeRate, "before-files/s")
		b.ReportMetric(slowRate, "slowed-files/s")
		b.ReportMetric(afterRate, "after-files/s")
		b.ReportMetric(beforeFlight, "before-in-flight")
		b.ReportMetric(slowFlight, "slowed-in-flight")
		b.ReportMetric(afterFlight, "after-in-flight")
		b.ReportMetric(recovered.Seconds(), "recovered-s")
		b.ReportMetric(lost, "pushes-lost")
	}
}
