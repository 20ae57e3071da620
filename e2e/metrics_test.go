//go:build e2e

package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cassfs/cassfs/internal/testkit"
)

// TestMetricsEndpoint: reading an epoch in order through a mount with prefetching shows in
// the Prometheus endpoint: prefetches, a grown window, one fetch per sample, bytes cached.
func TestMetricsEndpoint(t *testing.T) {
	d := sharedDataset(t)
	m := startMount(t, d.name, "--metrics-addr", "127.0.0.1:0")
	url := metricsURL(t, m)
	root := filepath.Join(m.dir, "all", "epoch-0")
	paths, _ := fileList(t, root)
	for _, p := range paths {
		if _, err := os.ReadFile(filepath.Join(root, p)); err != nil {
			t.Fatal(err)
		}
	}
	body := scrape(t, url)
	value := func(re string) float64 {
		t.Helper()
		v, ok := metricValue(body, re)
		if !ok {
			t.Fatalf("metrics lack %s:\n%s", re, body)
		}
		return v
	}
	if v := value("cassfs_prefetched_total"); v < sharedCount {
		t.Errorf("cassfs_prefetched_total %v, want at least the %d samples read", v, sharedCount)
	}
	// The window controller measured the readers and the link, and sized the window from them.
	rate, lat := value(`cassfs_prefetch_rate\{split="all"\}`), value("cassfs_prefetch_latency_seconds")
	if rate <= 0 || lat <= 0 || lat > 10 {
		t.Errorf("controller measured readers at %v samples/s and fetches at %v s: want both positive (and a fetch within the deadline)", rate, lat)
	}
	if v := value(`cassfs_prefetch_window\{split="all"\}`); v < 64 {
		t.Errorf("prefetch window %v, below the initial 64", v)
	}
	if v := value("cassfs_fetch_seconds_count"); v < sharedCount || v > 2*sharedCount {
		t.Errorf("cassfs_fetch_seconds_count %v for %d samples", v, sharedCount)
	}
	if v := value("cassfs_cache_misses_total"); v != 0 {
		t.Errorf("%v reads missed the cache although the prefetcher ran ahead", v)
	}
	if v := value("cassfs_cache_bytes"); v <= 0 {
		t.Errorf("cassfs_cache_bytes %v", v)
	}
	var total int64
	for i := range uint32(d.ix.Len()) {
		total += d.ix.Size(i)
	}
	// Every file is read by READs or from the bytes pushed into the page cache ahead of its
	// reader; every name is looked up once, by the reader or ahead of it.
	read, pushed := value("cassfs_read_bytes_total"), value("cassfs_page_cache_pushed_bytes_total")
	if read > float64(total) || read+pushed < float64(total) {
		t.Errorf("cassfs_read_bytes_total %v and cassfs_page_cache_pushed_bytes_total %v, read %d bytes", read, pushed, total)
	}
	if v := value("cassfs_files_read_total"); v > sharedCount {
		t.Errorf("cassfs_files_read_total %v, read %d files", v, sharedCount)
	}
	if v := value("cassfs_sample_lookups_total"); v != sharedCount {
		t.Errorf("cassfs_sample_lookups_total %v, read %d files", v, sharedCount)
	}
	if v := value(`cassfs_fetch_errors_total\{kind="timeout"\}`); v != 0 {
		t.Errorf("%v timeouts", v)
	}
	if v := value("go_goroutines"); v < 1 {
		t.Errorf("go_goroutines %v", v)
	}
	if v := value("process_resident_memory_bytes"); v < 1<<20 {
		t.Errorf("process_resident_memory_bytes %v", v)
	}
}

// metricsURL waits for the mount to log its metrics URL.
func metricsURL(t testing.TB, m *mounted) string {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if u := regexp.MustCompile(`url=(http://\S+/metrics)`).FindStringSubmatch(m.stderr.String()); u != nil {
			return u[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("the mount logged no metrics URL; %s", m.log())
		}
	}
}

func scrape(t testing.TB, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

// metricValue finds the sample of the metric matching re (a regexp of name and labels).
func metricValue(body, re string) (float64, bool) {
	m := regexp.MustCompile(`(?m)^` + re + ` (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(m[1], 64)
	return v, err == nil
}

// metricsSummary is one line of the cache and prefetch counters, for benchmark output.
func metricsSummary(body string) string {
	get := func(re string) float64 { v, _ := metricValue(body, re); return v }
	count := get("cassfs_fetch_seconds_count")
	mean := 0.0
	if count > 0 {
		mean = get("cassfs_fetch_seconds_sum") / count * 1000
	}
	return fmt.Sprintf("hits %.0f misses %.0f waits %.0f prefetched %.0f dropped %.0f evictions %.0f fetches %.0f (mean %.1f ms) errors %.0f window %.0f limit %.0f (latency %.1f ms) cached %.0f MiB",
		get("cassfs_cache_hits_total"), get("cassfs_cache_misses_total"), get("cassfs_cache_waits_total"),
		get("cassfs_prefetched_total"), get("cassfs_prefetch_dropped_total"), get("cassfs_cache_evictions_total"),
		count, mean, sumMetric(body, "cassfs_fetch_errors_total"), get(`cassfs_prefetch_window\{split="all"\}`), get(`cassfs_prefetch_limit\{split="all"\}`), get("cassfs_prefetch_latency_seconds")*1000, get("cassfs_cache_bytes")/(1<<20))
}

// sumMetric adds up every labelled sample of a metric.
func sumMetric(body, name string) float64 {
	sum := 0.0
	for _, m := range regexp.MustCompile(`(?m)^`+name+`(?:\{[^}]*\})? (\S+)$`).FindAllStringSubmatch(body, -1) {
		v, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			panic(fmt.Sprintf("metric %s: %v", name, err)) // the pattern matched a non-number
		}
		sum += v
	}
	return sum
}

// TestStatsCommand: cassfs stats reaches a running mount over its control socket and
// prints what it served; a directory no cassfs serves is a clear error.
func TestStatsCommand(t *testing.T) {
	d := sharedDataset(t)
	m := startMount(t, d.name)
	root := filepath.Join(m.dir, "all", "epoch-0")
	paths, _ := fileList(t, root)
	for _, p := range paths[:50] {
		if _, err := os.ReadFile(filepath.Join(root, p)); err != nil {
			t.Fatal(err)
		}
	}
	r := cassfs(t, "stats", "--interval", "100ms", m.dir)
	if r.code != 0 {
		t.Fatalf("stats: %s", r)
	}
	for _, want := range []string{"dataset " + d.name, "served    ", "prefetch  all: epoch 0 position ", "errors    canceled 0, corrupt 0", "requests  ", "; per file: lookup 1.", "pushed    ", "goroutines"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stats output lacks %q:\n%s", want, r.stdout)
		}
	}
	// The memory cgroup the daemon is charged to, where the machine has one (its limit,
	// usage and page cache: pushed pages are charged to the daemon).
	if cg, err := os.ReadFile("/proc/self/cgroup"); err == nil && regexp.MustCompile(`(?m)(^\d+:[^:]*\bmemory\b[^:]*:|^0::)`).Match(cg) {
		if !regexp.MustCompile(`memory    cgroup limit \S+( \S+)?, \S+ \S+ charged, of which \S+ \S+ page cache`).MatchString(r.stdout) {
			t.Errorf("stats output lacks the memory cgroup's line:\n%s", r.stdout)
		}
	}
	if r := cassfs(t, "stats", t.TempDir()); r.code != 1 || !strings.Contains(r.stderr, "no cassfs mount serves") {
		t.Errorf("stats of a plain directory: %s", r)
	}
}

// TestBenchCommand: cassfs bench reads the same samples from the database, through a
// mount and from the source tree, and reports each with its ratio to the database.
func TestBenchCommand(t *testing.T) {
	d := sharedDataset(t)
	m := startMount(t, d.name, "--seed", "4")
	r := cassfs(t, "bench", "-d", d.name, "--seed", "4", "--epoch", "2", "--mount", m.dir, "--local", d.root, "--samples", "120", "--readers", "4")
	if r.code != 0 {
		t.Fatalf("bench: %s", r)
	}
	for _, path := range []string{"store", "mount", "local"} {
		if !regexp.MustCompile(`(?m)^\s*` + path + `\s+120\s+\d+`).MatchString(r.stdout) {
			t.Errorf("bench output lacks 120 reads on %s:\n%s", path, r.stdout)
		}
	}
	// The mount's own CPU per file and its fetches per file, asked of the mount: a fresh
	// epoch of a fresh mount fetches every file it serves, at least once.
	cols := regexp.MustCompile(`(?m)^\s*mount\s.*\s(\d+)\s+(\d+)\s+(\d+\.\d+)\s*$`).FindStringSubmatch(r.stdout)
	if cols == nil {
		t.Fatalf("bench output lacks the mount's CPU and fetches per file:\n%s", r.stdout)
	}
	if f := testkit.Must(strconv.ParseFloat(cols[3], 64))(t); f < 1 {
		t.Errorf("mount: %s fetches per file read from a fresh mount, want at least 1:\n%s", cols[3], r.stdout)
	}
}

// rssBound is the resident memory `cassfs mount --help` promises for --cache-size cache
// and a dataset of samples (read from the help text, so the test holds the mount to what
// users are told).
func rssBound(t testing.TB, cache, samples int) float64 {
	t.Helper()
	r := cassfs(t, "mount", "--help")
	m := regexp.MustCompile(`resident memory stays under this plus ~(\d+) bytes per sample plus (\d+) MiB`).FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("cassfs mount --help states no memory bound for --cache-size:\n%s", r.stdout)
	}
	perSample := testkit.Must(strconv.Atoi(m[1]))(t)
	overhead := testkit.Must(strconv.Atoi(m[2]))(t)
	return float64(cache + samples*perSample + overhead<<20)
}

// fetchMedian is the median database fetch latency of the mount whose metrics body holds,
// from the cassfs_fetch_seconds histogram, interpolated within the bucket the middle fetch
// falls in as Prometheus's histogram_quantile does (0 without fetches).
func fetchMedian(body string) time.Duration {
	type bucket struct{ le, n float64 }
	var bs []bucket
	for _, m := range regexp.MustCompile(`(?m)^cassfs_fetch_seconds_bucket\{le="([^"]+)"\} (\S+)$`).FindAllStringSubmatch(body, -1) {
		le, err1 := strconv.ParseFloat(m[1], 64)
		n, err2 := strconv.ParseFloat(m[2], 64)
		if err1 != nil || err2 != nil {
			continue // +Inf
		}
		bs = append(bs, bucket{le, n})
	}
	total, _ := metricValue(body, "cassfs_fetch_seconds_count")
	var lower, below float64
	for _, b := range bs {
		if total > 0 && b.n >= total/2 {
			return time.Duration((lower + (b.le-lower)*(total/2-below)/(b.n-below)) * float64(time.Second))
		}
		lower, below = b.le, b.n
	}
	return 0
}
