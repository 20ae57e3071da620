//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cassfs/cassfs/internal/testkit"
	"github.com/cassfs/cassfs/store"
	"github.com/google/uuid"
)

// curvePoint is one measurement of the latency-tolerance curve.
type curvePoint struct {
	Reader    string  `json:"reader"` // go, dali, torchvision
	Path      string  `json:"path"`   // cassfs, local-disk, sshfs
	RTTms     float64 `json:"rtt_ms"`
	Images    int     `json:"images"`
	PerSecond float64 `json:"images_per_s"`
	// DaemonCPUus is the cassfs daemon's CPU (user+system) per image read, in µs.
	DaemonCPUus float64 `json:"daemon_cpu_us,omitempty"`
	// DBCPUus is the database's CPU per image read (the local node's process, its JIT
	// compiler left out: nodeCPU), in µs.
	DBCPUus float64 `json:"db_cpu_us,omitempty"`
	// PeakInFlight is the most database requests the mount had in flight, sampled every
	// 20 ms.
	PeakInFlight int `json:"peak_in_flight,omitempty"`
	// Requests is the FUSE requests that reached the daemon per image; FetchP50ms the
	// median database fetch latency, in ms.
	Requests   float64 `json:"requests_per_image,omitempty"`
	FetchP50ms float64 `json:"fetch_p50_ms,omitempty"`
}

// BenchmarkLatencyCurve is the latency-tolerance curve: images/s of one cold epoch over an
// emulated link (Toxiproxy) of 0.1, 20, 50, 150 and 300 ms round trip, through a mount with
// default flags only (the window sizes itself), for three readers — a Go reader (16
// goroutines in file_list.txt order), DALI fn.readers.file (file_list, no decoding) and
// torchvision ImageFolder + DataLoader(shuffle=True, 4 workers) — each on a fresh mount
// with the page cache dropped and Cassandra warm, so everything crosses the link. In the
// same run: the raw store client at 0.1 ms (16 reads at once), the baseline of every point;
// the same files read from local disk by each reader; and by the Go reader over sshfs
// through the same link (on a subset at long round trips: sshfs reads a file per round trip
// or two). The daemon's and the database's CPU per image come from /proc/PID/stat, the
// mount's requests in flight from its metrics (the most of samples 20 ms apart).
//
// CASSFS_CURVE_COUNT sets the dataset size (default 10,000), CASSFS_CURVE_RTTS the round
// trips in ms (default 0.1,20,50,150,300), CASSFS_CURVE_READERS the readers (default
// go,dali,torchvision), CASSFS_CURVE_VARIANTS the mounts' extra flags, one set per
// variant measured, ';' between sets (default: one variant, no extra flag; "" in the
// list is the default flags: ";--block-samples 1"; a set starting with bin=PATH mounts with
// the cassfs binary at PATH, an earlier build, say), CASSFS_BENCH_CURVE a JSON file for the points
// (bench/latency_curve.py tabulates and plots it).
func BenchmarkLatencyCurve(b *testing.B) {
	count := 10_000
	if s := os.Getenv("CASSFS_CURVE_COUNT"); s != "" {
		count = testkit.Must(strconv.Atoi(s))(b)
	}
	rtts := []float64{0.1, 20, 50, 150, 300}
	if s := os.Getenv("CASSFS_CURVE_RTTS"); s != "" {
		rtts = nil
		for _, f := range strings.Split(s, ",") {
			v, err := strconv.ParseFloat(f, 64)
			if err != nil {
				b.Fatalf("CASSFS_CURVE_RTTS: %v", err)
			}
			rtts = append(rtts, v)
		}
	}
	const readers, batch = 16, 64
	ds, root := benchDataset(b, "curve", count, 43)
	st := openStore(b, ds, false)
	for range b.N {
		var points []curvePoint
		add := func(p curvePoint) {
			points = append(points, p)
			name := fmt.Sprintf("%s/%s/rtt-%gms", p.Reader, p.Path, p.RTTms)
			b.ReportMetric(p.PerSecond, name+"-images/s")
			if p.DaemonCPUus > 0 {
				b.ReportMetric(p.DaemonCPUus, name+"-daemon-cpu-us/image")
				b.ReportMetric(p.Requests, name+"-requests/image")
				b.ReportMetric(p.FetchP50ms, name+"-fetch-p50-ms")
			}
			fmt.Fprintf(os.Stderr, "%-36s %6d images %8.0f images/s  daemon CPU %5.0f µs/image  database CPU %5.0f µs/image  in flight ≤ %d  requests %.3f/image  fetch p50 %.1f ms\n", name, p.Images, p.PerSecond, p.DaemonCPUus, p.DBCPUus, p.PeakInFlight, p.Requests, p.FetchP50ms)
		}
		// The epoch-0 order, for the local and sshfs baselines.
		lines := func() []string {
			m := startMount(b, ds)
			defer m.stop(b)
			l, _ := fileList(b, filepath.Join(m.dir, "all", "epoch-0"))
			return l
		}()
		local, localList := localCopy(b, root, lines)
		dropPageCache(b)
		total, _, _ := batchTimes(b, local, readers, batch)
		add(curvePoint{Reader: "go", Path: "local-disk", Images: count, PerSecond: float64(count) / total.Seconds()})
		for _, r := range []struct{ name, script, arg string }{{"dali", "dali_bench.py", localList}, {"torchvision", "torch_bench.py", root}} {
			dropPageCache(b)
			n, secs := readerRun(b, r.script, r.arg)
			add(curvePoint{Reader: r.name, Path: "local-disk", Images: n, PerSecond: float64(n) / secs})
		}

		// The raw store client at 0.1 ms, the baseline of every cassfs point: as many reads
		// at once as the Go reader has readers.
		ids := make([]uuid.UUID, 0, count)
		if err := st.Scan(context.Background(), func(s store.Sample) error { ids = append(ids, s.ID); return nil }); err != nil {
			b.Fatal(err)
		}
		dropPageCache(b)
		warmStore(b, st)
		db := nodePID(b)
		db0 := nodeCPU(b, db)
		rate := getAll(b, st, ids, readers)
		add(curvePoint{Reader: "go", Path: "store-client", RTTms: 0.1, Images: len(ids), PerSecond: rate,
			DBCPUus: float64((nodeCPU(b, db) - db0).Microseconds()) / float64(len(ids))})
		readerSet := []string{"go", "dali", "torchvision"}
		if s := os.Getenv("CASSFS_CURVE_READERS"); s != "" {
			readerSet = strings.Split(s, ",")
		}
		variants := [][]string{nil}
		if s := os.Getenv("CASSFS_CURVE_VARIANTS"); s != "" {
			variants = nil
			for _, v := range strings.Split(s, ";") {
				variants = append(variants, strings.Fields(v))
			}
		}

		ssh := startSSHD(b)
		for _, rtt := range rtts {
			spec := linkSpec{Name: fmt.Sprintf("rtt-%gms", rtt), RTT: time.Duration(rtt * float64(time.Millisecond))}
			spec.Jitter = spec.RTT / 15
			// sshfs: a file takes a round trip or two, so long links get a subset.
			sub := min(count, max(200, int(60_000/max(rtt, 1))))
			sl := newLinkTo(b, spec, ssh.addr)
			mnt, unmount := mountSSHFS(b, ssh, sl.addr, root)
			paths := make([]string, sub)
			for k, l := range lines[:sub] {
				paths[k] = filepath.Join(mnt, origName(l))
			}
			dropPageCache(b)
			total, _, _ := batchTimes(b, paths, readers, batch)
			add(curvePoint{Reader: "go", Path: "sshfs", RTTms: rtt, Images: sub, PerSecond: float64(sub) / total.Seconds()})
			unmount()
			sl.proxy.Stop()

			ln := newLink(b, spec)
			for _, variant := range variants {
				for _, r := range readerSet {
					path, args := "cassfs", variant
					bin := ""
					if len(args) > 0 && strings.HasPrefix(args[0], "bin=") {
						bin = strings.TrimPrefix(args[0], "bin=")
						path, args = filepath.Base(bin), args[1:]
					}
					if len(args) > 0 {
						path += "[" + strings.Join(args, "=") + "]" // a metric unit has no spaces
					}
					// Default flags otherwise (metrics change nothing but what is shown).
					m := startMountWith(b, b.TempDir(), ds, runAs(bin), append(append(ln.mountArgs(), "--metrics-addr", "127.0.0.1:0"), args...)...)
					murl := metricsURL(b, m)
					dropPageCache(b)
					warmStore(b, st)
					cpu0, db0 := processCPU(b, m.cmd.Process.Pid), nodeCPU(b, db)
					req0 := sumMetric(scrape(b, murl), "cassfs_fuse_requests_total")
					peak := sampleMax(murl, "cassfs_requests_in_flight")
					var n int
					var secs float64
					switch r {
					case "go":
						epoch := filepath.Join(m.dir, "all", "epoch-0")
						names, _ := fileList(b, epoch)
						paths := make([]string, len(names))
						for k, l := range names {
							paths[k] = filepath.Join(epoch, l)
						}
						total, _, _ := batchTimes(b, paths, readers, batch)
						n, secs = len(paths), total.Seconds()
					case "dali":
						n, secs = readerRun(b, "dali_bench.py", filepath.Join(m.dir, "all", "epoch-2", "file_list.txt"))
					case "torchvision":
						n, secs = readerRun(b, "torch_bench.py", filepath.Join(m.dir, "all", "epoch-3"))
					}
					cpu, dbCPU := processCPU(b, m.cmd.Process.Pid)-cpu0, nodeCPU(b, db)-db0
					body := scrape(b, murl)
					add(curvePoint{Reader: r, Path: path, RTTms: rtt, Images: n, PerSecond: float64(n) / secs,
						DaemonCPUus: float64(cpu.Microseconds()) / float64(n), DBCPUus: float64(dbCPU.Microseconds()) / float64(n), PeakInFlight: peak(),
						Requests: (sumMetric(body, "cassfs_fuse_requests_total") - req0) / float64(n), FetchP50ms: float64(fetchMedian(body).Microseconds()) / 1000})
					fmt.Fprintf(os.Stderr, "%-36s metrics: %s\n", r+"/"+path+"/"+spec.Name, metricsSummary(scrape(b, murl)))
					m.stop(b)
				}
			}
			ln.proxy.Stop()
		}
		if out := os.Getenv("CASSFS_BENCH_CURVE"); out != "" {
			data := testkit.Must(json.MarshalIndent(points, "", " "))(b)
			if err := os.WriteFile(out, data, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// sampleMax scrapes the gauge name from the metrics at url every 20 ms until the returned
// function is called, which returns the largest value seen.
func sampleMax(url, name string) func() int {
	done := make(chan struct{})
	result := make(chan int)
	go func() {
		peak := 0
		for {
			if resp, err := http.Get(url); err == nil { // a failed scrape is a sample missed
				if body, err := io.ReadAll(resp.Body); err == nil {
					peak = max(peak, int(sumMetric(string(body), name)))
				}
				resp.Body.Close()
			}
			select {
			case <-done:
				result <- peak
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return func() int { close(done); return <-result }
}

// nodePID is the local Cassandra node's process id (the one cassandra.sh started).
func nodePID(b *testing.B) int {
	out, err := exec.Command("./cassandra.sh", "status").Output()
	m := regexp.MustCompile(`node 1: running \(pid (\d+)\)`).FindSubmatch(out)
	if m == nil {
		b.Fatalf("no running node 1 (cassandra.sh status: %v): %s", err, out)
	}
	return testkit.Must(strconv.Atoi(string(m[1])))(b)
}

// readerRun runs a reader's timing script and returns the images it read and the seconds
// it took.
func readerRun(b *testing.B, script, arg string) (int, float64) {
	var out struct {
		Images  int     `json:"images"`
		Seconds float64 `json:"seconds"`
	}
	runPython(b, &out, script, arg)
	return out.Images, out.Seconds
}

// localCopy returns the local-disk paths of an epoch's file_list lines (under root, the
// generated tree whose parent holds images/), in that order, and a DALI file_list of them
// written beside root.
func localCopy(b *testing.B, root string, lines []string) (paths []string, list string) {
	b.Helper()
	paths = make([]string, len(lines))
	var sb strings.Builder
	labels := classNames(b, root)
	for k, l := range lines {
		paths[k] = filepath.Join(root, origName(l))
		fmt.Fprintf(&sb, "images/%s %d\n", origName(l), slices.Index(labels, class(l)))
	}
	list = filepath.Join(filepath.Dir(root), "local_list.txt")
	if err := os.WriteFile(list, []byte(sb.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	return paths, list
}
