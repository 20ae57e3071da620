//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/Shopify/toxiproxy/v2/collectors"
	"github.com/cassfs/cassfs/internal/testkit"
	"github.com/cassfs/cassfs/store"
	"github.com/cassfs/cassfs/store/cassandra"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// link is a TCP proxy between cassfs and Cassandra that adds latency (our kernels have no
// netem): Toxiproxy in this process.
type link struct {
	proxy *toxiproxy.Proxy
	addr  string
}

// linkSpec describes an emulated network path.
type linkSpec struct {
	Name      string
	RTT       time.Duration // added round-trip time, split between the two directions
	Jitter    time.Duration // per direction
	Congested float64       // fraction of connections limited to RateKBps (0: none)
	RateKBps  int64
}

func newLink(t testing.TB, spec linkSpec) *link {
	t.Helper()
	return newLinkTo(t, spec, hosts[0])
}

// newLinkTo is newLink to another upstream address.
func newLinkTo(t testing.TB, spec linkSpec, upstream string) *link {
	t.Helper()
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	srv.Metrics.ProxyMetrics = collectors.NewProxyMetricCollectors()
	p := toxiproxy.NewProxy(srv, spec.Name, "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	half := spec.RTT.Milliseconds() / 2
	if half > 0 {
		for _, dir := range []string{"upstream", "downstream"} {
			js := fmt.Sprintf(`{"name":"latency_%s","type":"latency","stream":%q,"toxicity":1,"attributes":{"latency":%d,"jitter":%d}}`,
				dir, dir, half, spec.Jitter.Milliseconds())
			if _, err := p.Toxics.AddToxicJson(strings.NewReader(js)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if spec.Congested > 0 {
		js := fmt.Sprintf(`{"name":"congestion","type":"bandwidth","stream":"downstream","toxicity":%g,"attributes":{"rate":%d}}`,
			spec.Congested, spec.RateKBps)
		if _, err := p.Toxics.AddToxicJson(strings.NewReader(js)); err != nil {
			t.Fatal(err)
		}
	}
	return &link{proxy: p, addr: p.Listen}
}

// mountArgs are the cassfs arguments that route every connection through the link.
func (l *link) mountArgs() []string {
	return []string{"--hosts", l.addr, "--address-map", hosts[0] + "=" + l.addr}
}

// batchTimes reads paths in order with p goroutines (each takes the next path) and returns
// the time each batch of size consecutive paths took to complete after the previous one:
// what a training loop waits per batch.
func batchTimes(t testing.TB, paths []string, p, size int) (total time.Duration, bytes int64, perBatch []time.Duration) {
	done := make([]time.Time, len(paths))
	var nbytes atomic.Int64
	start := time.Now()
	parallel(t, p, len(paths), func(k int) error {
		data, err := os.ReadFile(paths[k])
		if err != nil {
			return err
		}
		nbytes.Add(int64(len(data)))
		done[k] = time.Now()
		return nil
	})
	total = time.Since(start)
	prev := start
	for b := 0; b < len(paths); b += size {
		end := done[b]
		for _, d := range done[b:min(b+size, len(paths))] {
			if d.After(end) {
				end = d
			}
		}
		if end.Before(prev) {
			end = prev // this batch was ready before the previous one completed
		}
		perBatch = append(perBatch, end.Sub(prev))
		prev = end
	}
	return total, nbytes.Load(), perBatch
}

func percentile(d []time.Duration, q float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// BenchmarkLatency is the latency lab: 2,000 ~110 KB images read through cassfs over an
// emulated link (Toxiproxy) at several round-trip times, without and with prefetching, by a
// tight parallel Go reader (16 goroutines in file_list order, batches of 64), in three
// modes — no prefetching, prefetching with strict order, prefetching with arrival binding —
// against the same files on local disk and over sshfs through the same emulated link, in the
// same run. DALI (file_list) and torchvision (ImageFolder, shuffling DataLoader) loaders are
// timed the same way. Each mount reads epoch 0 (from a cold start:
// the prefetch window ramps up) and then epoch 1 (steady state: the window carried over;
// the 128 MiB cache cannot hold the dataset and the page cache is dropped before each
// epoch, so epoch 1 is fetched again; Cassandra is warm for both). It reports
// images/s, MB/s and per-batch load time p50/p99/max, and each configuration's throughput
// relative to the same configuration at loopback latency.
func BenchmarkLatency(b *testing.B) {
	const count, readers, batch = 2000, 16, 64
	ds, root := benchDataset(b, "latency", count, 31)
	dir := filepath.Dir(root)
	st := openStore(b, ds, false)
	links := []linkSpec{
		{Name: "rtt-0.1ms"},
		{Name: "rtt-20ms", RTT: 20 * time.Millisecond, Jitter: 2 * time.Millisecond},
		{Name: "rtt-150ms", RTT: 150 * time.Millisecond, Jitter: 10 * time.Millisecond},
		// Congested routes (the paper's stragglers): each of 4 connections is, with
		// probability 1/2, limited to 2 MB/s downstream. Which ones is random per run.
		{Name: "rtt-150ms-congested", RTT: 150 * time.Millisecond, Jitter: 10 * time.Millisecond, Congested: 0.5, RateKBps: 2048},
	}
	modes := []struct {
		name string
		args []string
	}{
		{"no-prefetch", []string{"--order", "strict", "--prefetch", "0", "--cache-size", "128MiB"}},
		{"strict", []string{"--order", "strict", "--prefetch", "2048", "--prefetch-in-flight", "768", "--max-in-flight", "1024", "--cache-size", "128MiB"}},
		{"arrival", []string{"--order", "arrival", "--prefetch", "2048", "--prefetch-in-flight", "768", "--max-in-flight", "1024", "--cache-size", "128MiB"}},
	}
	for range b.N {
		var local []string
		lines, _ := func() ([]string, []string) {
			// The local baseline reads the source files in the same (epoch 0) order.
			m := startMount(b, ds)
			defer m.stop(b)
			return fileList(b, filepath.Join(m.dir, "all", "epoch-0"))
		}()
		for _, l := range lines {
			local = append(local, filepath.Join(root, origName(l)))
		}
		dropPageCache(b)
		lt, lbytes, lbatches := batchTimes(b, local, readers, batch)
		warmStore(b, st)
		report(b, "local-disk", lt, lbytes, count, lbatches)

		// The local baselines for the readers: the same files, a file_list in epoch-0 order.
		var list strings.Builder
		labels := classNames(b, root)
		for _, l := range lines {
			fmt.Fprintf(&list, "images/%s %d\n", origName(l), slices.Index(labels, class(l)))
		}
		localList := filepath.Join(dir, "local_list.txt")
		if err := os.WriteFile(localList, []byte(list.String()), 0o644); err != nil {
			b.Fatal(err)
		}
		dropPageCache(b)
		warmStore(b, st)
		readerBench(b, "local-disk/dali", "dali_bench.py", localList)
		dropPageCache(b)
		readerBench(b, "local-disk/torchvision", "torch_bench.py", root)

		base := map[string]float64{}
		batches := map[string][]float64{} // configuration → per-batch seconds, for the plot
		ssh := startSSHD(b)
		for _, spec := range links {
			if spec.Congested == 0 {
				// Another network filesystem over the same emulated link: sshfs (one SSH
				// connection, so the congested case, decided per connection, is left out).
				sl := newLinkTo(b, spec, ssh.addr)
				mnt, unmount := mountSSHFS(b, ssh, sl.addr, root)
				var paths []string
				for _, l := range lines {
					paths = append(paths, filepath.Join(mnt, origName(l)))
				}
				dropPageCache(b)
				total, nbytes, bt := batchTimes(b, paths, readers, batch)
				report(b, spec.Name+"/sshfs", total, nbytes, count, bt)
				unmount()
				sl.proxy.Stop()
			}
			ln := newLink(b, spec)
			for _, mode := range modes {
				args := mode.args
				if spec.Congested > 0 {
					if mode.name == "no-prefetch" {
						continue // tens of images/s: minutes per epoch, and nothing to learn
					}
					// Fewer requests in flight, so that those queued behind a 2 MB/s
					// connection finish within the 10 s request deadline.
					args = append(slices.Clone(args), "--prefetch-in-flight", "128", "--max-in-flight", "256", "--conns-per-host", "4")
				}
				m := startMount(b, ds, append(append(ln.mountArgs(), args...), "--metrics-addr", "127.0.0.1:0")...)
				murl := metricsURL(b, m)
				for _, epochN := range []string{"epoch-0", "epoch-1"} {
					epoch := filepath.Join(m.dir, "all", epochN)
					names, _ := fileList(b, epoch)
					var paths []string
					for _, l := range names {
						paths = append(paths, filepath.Join(epoch, l))
					}
					// Epoch 1 visits the same inodes: without this the kernel's page cache,
					// not cassfs, would serve it. Dropping it drops Cassandra's too, so
					// Cassandra is warmed again by direct reads: the link is what is measured.
					dropPageCache(b)
					warmStore(b, st)
					total, nbytes, bt := batchTimes(b, paths, readers, batch)
					name := spec.Name + "/" + mode.name + "/" + epochN
					rate := report(b, name, total, nbytes, count, bt)
					for _, d := range bt {
						batches[name] = append(batches[name], d.Seconds())
					}
					key := mode.name + epochN
					if spec.RTT == 0 {
						base[key] = rate
					} else if base[key] > 0 {
						b.ReportMetric(rate/base[key], name+"-vs-0.1ms")
						fmt.Fprintf(os.Stderr, "%-32s %8.2f of the same at 0.1 ms\n", name, rate/base[key])
					}
				}
				fmt.Fprintf(os.Stderr, "%-40s metrics: %s\n", spec.Name+"/"+mode.name, metricsSummary(scrape(b, murl)))
				fmt.Fprintf(os.Stderr, "%-40s daemon peak RSS %.0f MiB (cache bound 128 MiB)\n", spec.Name+"/"+mode.name, peakRSSMiB(b, m))
				b.ReportMetric(peakRSSMiB(b, m), spec.Name+"/"+mode.name+"-peak-RSS-MiB")
				m.stop(b)
				// The readers, each on a fresh mount (an empty cache): DALI in file_list
				// order, torchvision shuffling on its own. Without prefetching at 150 ms each
				// would take minutes (DALI opens files one at a time): skipped.
				if !(mode.name == "no-prefetch" && spec.RTT >= 150*time.Millisecond) {
					for _, r := range []struct{ name, script, arg string }{
						{"dali", "dali_bench.py", filepath.Join("epoch-2", "file_list.txt")},
						{"torchvision", "torch_bench.py", "epoch-3"},
					} {
						rm := startMount(b, ds, append(ln.mountArgs(), args...)...)
						dropPageCache(b)
						warmStore(b, st)
						readerBench(b, spec.Name+"/"+mode.name+"/"+r.name, r.script, filepath.Join(rm.dir, "all", r.arg))
						rm.stop(b)
					}
				}
			}
			ln.proxy.Stop()
		}
		if out := os.Getenv("CASSFS_BENCH_BATCHES"); out != "" {
			data := testkit.Must(json.Marshal(batches))(b)
			if err := os.WriteFile(out, data, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// readerBench runs a reader's timing script and reports images/s and batch times.
func readerBench(b *testing.B, name, script string, arg string) {
	var out struct {
		Images       int       `json:"images"`
		Seconds      float64   `json:"seconds"`
		BatchSeconds []float64 `json:"batch_seconds"`
	}
	runPython(b, &out, script, arg)
	var bt []time.Duration
	for _, s := range out.BatchSeconds {
		bt = append(bt, time.Duration(s*float64(time.Second)))
	}
	report(b, name, time.Duration(out.Seconds*float64(time.Second)), 0, out.Images, bt)
}

// peakRSSMiB is the mount daemon's peak resident memory so far (VmHWM).
func peakRSSMiB(b *testing.B, m *mounted) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", m.cmd.Process.Pid))
	if err != nil {
		b.Fatal(err)
	}
	mm := regexp.MustCompile(`VmHWM:\s+(\d+) kB`).FindSubmatch(data)
	if mm == nil {
		b.Fatalf("no VmHWM in /proc/%d/status", m.cmd.Process.Pid)
	}
	kb := testkit.Must(strconv.Atoi(string(mm[1])))(b)
	return float64(kb) / 1024
}

// classNames lists the class directories of an ImageFolder root.
func classNames(b *testing.B, root string) []string {
	entries, err := os.ReadDir(root)
	if err != nil {
		b.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

func report(b *testing.B, name string, total time.Duration, nbytes int64, count int, batches []time.Duration) float64 {
	rate := float64(count) / total.Seconds()
	b.ReportMetric(rate, name+"-images/s")
	b.ReportMetric(float64(nbytes)/1e6/total.Seconds(), name+"-MB/s")
	b.ReportMetric(float64(percentile(batches, 0.5).Microseconds())/1000, name+"-batch-p50-ms")
	b.ReportMetric(float64(percentile(batches, 0.99).Microseconds())/1000, name+"-batch-p99-ms")
	b.ReportMetric(float64(slices.Max(batches).Microseconds())/1000, name+"-batch-max-ms")
	fmt.Fprintf(os.Stderr, "%-40s %8.0f images/s %7.1f MB/s  batch p50 %7.1f ms  p99 %7.1f ms  max %7.1f ms\n", name, rate,
		float64(nbytes)/1e6/total.Seconds(), float64(percentile(batches, 0.5).Microseconds())/1000,
		float64(percentile(batches, 0.99).Microseconds())/1000, float64(slices.Max(batches).Microseconds())/1000)
	return rate
}

// warmStore reads every blob of st directly, so Cassandra serves the benchmark from memory.
func warmStore(b *testing.B, st *cassandra.Store) {
	var ids []uuid.UUID
	if err := st.Scan(context.Background(), func(s store.Sample) error { ids = append(ids, s.ID); return nil }); err != nil {
		b.Fatal(err)
	}
	getAll(b, st, ids, 32)
}

// getAll reads every id with p reads in flight and returns reads per second.
func getAll(b *testing.B, st *cassandra.Store, ids []uuid.UUID, p int) float64 {
	start := time.Now()
	parallel(b, p, len(ids), func(k int) error {
		_, err := st.Get(context.Background(), ids[k], nil)
		return err
	})
	return float64(len(ids)) / time.Since(start).Seconds()
}
