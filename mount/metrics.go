package mount

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cassfs/cassfs/disktier"
	cfs "github.com/cassfs/cassfs/fs"
	"github.com/cassfs/cassfs/prefetch"
	"github.com/cassfs/cassfs/store"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics exposes the cache, the prefetcher and fetch latencies in Prometheus's format. The
// cache and prefetcher keep their own counters; they are read at scrape time, so the read
// path pays nothing for metrics beyond one histogram observation per fetch.
type metrics struct {
	reg          *prometheus.Registry
	fetchSeconds prometheus.Histogram
	fetchErrors  *prometheus.CounterVec
	// pprof also serves Go's profiler at /debug/pprof/ (--pprof): opt-in, since a profile
	// costs the mount CPU and shows its internals.
	pprof bool
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		fetchSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "cassfs_fetch_seconds",
			Help:    "Time to fetch and verify one blob from the database.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16), // 0.5 ms … 16 s
		}),
		fetchErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cassfs_fetch_errors_total", Help: "Fetches that failed, by kind: timeout, unavailable, missing, corrupt, canceled, other.",
		}, []string{"kind"}),
	}
	// Every kind is exported from the start, so rates work before the first failure.
	for _, k := range store.Kinds {
		m.fetchErrors.WithLabelValues(k)
	}
	m.reg.MustRegister(m.fetchSeconds, m.fetchErrors, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if cg := processMemoryCgroup(); cg != nil {
		m.reg.MustRegister(memoryCollector{cg})
	}
	return m
}

// served exports what the filesystem served and how many reads were hedged.
func (m *metrics) served(f *cfs.FS, hedges func() int64) {
	m.reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "cassfs_read_bytes_total", Help: "Bytes served to readers."},
			func() float64 { return float64(f.Stats().Bytes) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "cassfs_reads_total", Help: "READ requests served."},
			func() float64 { return float64(f.Stats().Reads) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "cassfs_files_read_total", Help: "Files read (reads from offset 0)."},
			func() float64 { return float64(f.Stats().Files) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "cassfs_opens_passed_through_total", Help: "Opens passed through to a file of the cache directory (the kernel reads it; no READ reaches cassfs)."},
			func() float64 { return float64(f.Stats().PassedThrough) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "cassfs_record_tars_local_total", Help: "Tars of the record view written to local files between epochs (--records-at)."},
			func() float64 { return float64(f.Stats().LocalTars) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "cassfs_record_tar_opens_passed_through_total", Help: "Opens of the record view's tars passed through to their local files (--records-at; the kernel reads them, no READ reaches cassfs)."},
			func() float64 { return float64(f.Stats().TarsPassedThrough) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "cassfs_reads_from_cache_files_total", Help: "READs answered from a file of the cache directory where opens are not passed through (spliced; included in cassfs_reads_total)."},
			func() float64 { return float64(f.Stats().FromFiles) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "cassfs_fetch_hedges_total", Help: "Blob reads sent a second time after --speculative-after."},
			func() float64 { return float64(hedges()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "cassfs_sample_lookups_total", Help: "Lookups of samples' names: one per file a reader opens, whether its bytes come from cassfs or from the page cache."},
			func() float64 { return float64(f.Stats().Lookups) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "cassfs_page_cache_pushed_bytes_total", Help: "Bytes written into the kernel's page cache ahead of readers (--push)."},
			func() float64 { return float64(f.PushStats().Bytes) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "cassfs_page_cache_reclaims_total", Help: "Reclaims of the page cache noticed (--push): many READs at once of files pushed or read whole before (and, with --look-ahead, most of the files readers read next found paged out), after which every file is pushed again when wanted."},
			func() float64 { return float64(f.PushStats().Reclaims) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "cassfs_page_cache_checks_total", Help: "Looks at the page cache (--push with --look-ahead): READs that looked like a reclaim had the helper ask cachestat(2) about the files readers read next."},
			func() float64 { return float64(f.PushStats().Checks) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "cassfs_page_cache_checked_gone_total", Help: "Files those looks, or the looks at files nearing the readers, found with pages gone: pushed again when wanted, while the others stay marked as in the page cache."},
			func() float64 { return float64(f.PushStats().CheckedGone) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "cassfs_page_cache_nearing_checked_total", Help: "Files marked as in the page cache looked at by the helper as they neared the readers (--push with --look-ahead; cachestat(2), Linux 6.5+)."},
			func() float64 { return float64(f.PushStats().NearChecked) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "cassfs_page_cache_resident_reads_total", Help: "Files marked as in the page cache READ all the same (--push): their pages went after they were pushed or read whole, before cassfs saw it (a reclaim)."},
			func() float64 { return float64(f.PushStats().ResidentReads) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "cassfs_record_pushes_total", Help: "Samples whose bytes were written into the page cache of record files (epoch-N.wds tars) ahead of readers; their bytes count in cassfs_page_cache_pushed_bytes_total."},
			func() float64 { return float64(f.PushStats().Records) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "cassfs_record_files_dropped_total", Help: "Record files of past epochs whose pages the kernel was told to let go, once readers read the same shard of a later epoch."},
			func() float64 { return float64(f.PushStats().TarsDropped) }),
		&requestsCollector{f: f},
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "cassfs_lookahead_names_total", Help: "Names looked up ahead of the readers by the helper process (--look-ahead)."},
			func() float64 { return float64(f.LookaheadStats().Answered) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "cassfs_streamed_names_late_total", Help: "Names a class directory's stream (--stream-names) brought when the readers were at them or past, or passed over to catch up with them: left to the readers' own lookups."},
			func() float64 { return float64(f.LookaheadStats().StreamedLate) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "cassfs_reader_listed_names_total", Help: "Names bound by readers' own listings of class directories (--push with --look-ahead; under --order arrival where every sample of the class is at hand): their readers open them with no LOOKUP."},
			func() float64 { return float64(f.LookaheadStats().ReaderListed) }),
	)
	for _, r := range []struct {
		result string
		v      func(cfs.PushStats) int64
	}{
		{"pushed", func(s cfs.PushStats) int64 { return s.Pushed }},
		{"unknown", func(s cfs.PushStats) int64 { return s.Unknown }},
		{"failed", func(s cfs.PushStats) int64 { return s.Failed }},
		{"resident", func(s cfs.PushStats) int64 { return s.Resident }},
		{"over_limit", func(s cfs.PushStats) int64 { return s.OverLimit }},
	} {
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "cassfs_page_cache_pushes_total", ConstLabels: prometheus.Labels{"result": r.result},
			Help: "Prefetched files offered to the kernel's page cache (--push), by result: pushed; unknown (its inode not known to the kernel: never read yet, forgotten, or its first lookup not answered yet); failed (refused by the kernel for another reason); over_limit (not sent: the daemon's memory cgroup had no room for its pages, which would have reclaimed pages pushed before; its READs carry it); resident (not sent: pushed or read whole before, and no READ has shown its pages gone since; with --cache-dir, not read from it either).",
		}, func() float64 { return float64(r.v(f.PushStats())) }))
	}
}

// memoryCollector exports the memory cgroup the daemon is charged to (cgroup.go), read at
// scrape time: its limit, its usage and the page cache of it, which holds what the daemon
// pushed (pages a READ brings in are charged to the reader instead).
type memoryCollector struct{ cg *memoryCgroup }

var (
	descMemoryLimit = prometheus.NewDesc("cassfs_memory_limit_bytes", "Limit of the memory cgroup the daemon is charged to (the level with the least room: its own or an ancestor's); absent without a cgroup, +Inf without a limit.", nil, nil)
	descMemoryUsage = prometheus.NewDesc("cassfs_memory_usage_bytes", "Memory charged to that cgroup: the daemon's own, and the page cache it brought in.", nil, nil)
	descMemoryCache = prometheus.NewDesc("cassfs_memory_page_cache_bytes", "Of that, page cache: mostly pages pushed ahead of readers (--push), and the cache directory's files.", nil, nil)
)

func (c memoryCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descMemoryLimit
	ch <- descMemoryUsage
	ch <- descMemoryCache
}

func (c memoryCollector) Collect(ch chan<- prometheus.Metric) {
	m, err := c.cg.read()
	if err != nil {
		return
	}
	limit := float64(m.Limit)
	if !m.Limited() {
		limit = math.Inf(1)
	}
	ch <- prometheus.MustNewConstMetric(descMemoryLimit, prometheus.GaugeValue, limit)
	ch <- prometheus.MustNewConstMetric(descMemoryUsage, prometheus.GaugeValue, float64(m.Usage))
	ch <- prometheus.MustNewConstMetric(descMemoryCache, prometheus.GaugeValue, float64(m.Cache))
}

// requestsCollector exports the FUSE requests that reached the daemon, by operation.
type requestsCollector struct{ f *cfs.FS }

var descRequests = prometheus.NewDesc("cassfs_fuse_requests_total", "FUSE requests that reached the daemon, by operation (what reading a file costs in round trips through cassfs).", []string{"op"}, nil)

func (c *requestsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descRequests }

func (c *requestsCollector) Collect(ch chan<- prometheus.Metric) {
	n := c.f.RequestStats()
	for _, op := range cfs.Ops {
		ch <- prometheus.MustNewConstMetric(descRequests, prometheus.CounterValue, float64(n[op]), op)
	}
}

// watch adds the cache's and the prefetcher's (nil: none) counters.
func (m *metrics) watch(cache *prefetch.Cache, pf *prefetch.Prefetcher) {
	m.reg.MustRegister(&statsCollector{cache: cache, pf: pf})
}

// corruptCacheFile counts a cache file that failed verification (it is fetched again) with
// the fetch errors of kind corrupt.
func (m *metrics) corruptCacheFile(error) { m.fetchErrors.WithLabelValues(store.KindCorrupt).Inc() }

// watchDisk exports the disk tier's counters.
func (m *metrics) watchDisk(d *disktier.Tier) {
	counter := func(name, help string, v func(disktier.Stats) int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(v(d.Stats())) })
	}
	m.reg.MustRegister(
		counter("cassfs_disk_cache_hits_total", "Fetches served from the cache directory.", func(s disktier.Stats) int64 { return s.Hits }),
		counter("cassfs_disk_cache_misses_total", "Fetches the cache directory could not serve (they went to the database).", func(s disktier.Stats) int64 { return s.Misses }),
		counter("cassfs_disk_cache_corrupt_total", "Cache files that failed verification (fetched again).", func(s disktier.Stats) int64 { return s.Corrupt }),
		counter("cassfs_disk_cache_write_errors_total", "Failed writes to the cache directory.", func(s disktier.Stats) int64 { return s.WriteErrors }),
		counter("cassfs_disk_cache_evictions_total", "Cache files removed, read by no known epoch order, for samples read again.", func(s disktier.Stats) int64 { return s.Evicted }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "cassfs_disk_cache_bytes", Help: "Bytes held in the cache directory."}, func() float64 { return float64(d.Stats().Bytes) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "cassfs_disk_cache_entries", Help: "Files held in the cache directory."}, func() float64 { return float64(d.Stats().Entries) }),
	)
}

// timed wraps a Fetcher with the latency histogram and the error counter.
func (m *metrics) timed(next prefetch.Fetcher) *timedFetcher { return &timedFetcher{m, next} }

// timedFetcher is the metrics' link in the read chain, below the memory cache and the disk
// tier: it times what the store answers.
type timedFetcher struct {
	m    *metrics
	next prefetch.Fetcher
}

// Fetch implements prefetch.Fetcher.
func (f *timedFetcher) Fetch(ctx context.Context, i uint32) ([]byte, error) {
	start := time.Now()
	data, err := f.next.Fetch(ctx, i)
	f.m.fetchSeconds.Observe(time.Since(start).Seconds())
	if err != nil {
		f.m.fetchErrors.WithLabelValues(store.ErrorKind(err)).Inc()
	}
	return data, err
}

// FetchBlock implements prefetch.BlockFetcher: each sample's fetch is timed from the
// block's start to its answer, so that the latency a prefetch saw is what the histogram
// shows whether it came alone or in a block.
func (f *timedFetcher) FetchBlock(ctx context.Context, samples []uint32, got func(k int, data []byte, err error)) {
	start := time.Now()
	prefetch.FetchBlock(ctx, f.next, samples, func(k int, data []byte, err error) {
		f.m.fetchSeconds.Observe(time.Since(start).Seconds())
		if err != nil {
			f.m.fetchErrors.WithLabelValues(store.ErrorKind(err)).Inc()
		}
		got(k, data, err)
	})
}

// info exports what the mount serves, for cassfs stats and dashboards.
func (m *metrics) info(dataset, mountpoint string, samples int) {
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "cassfs_info", Help: "The mount: dataset and mountpoint.",
			ConstLabels: prometheus.Labels{"dataset": dataset, "mountpoint": mountpoint}}, func() float64 { return 1 }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "cassfs_samples", Help: "Samples in the dataset's index."},
			func() float64 { return float64(samples) }),
	)
}

// metricsAddr defaults a bare ":port" to the loopback interface: metrics are served to
// other machines only when asked for explicitly (0.0.0.0:port).
func metricsAddr(addr string) string {
	if strings.HasPrefix(addr, ":") {
		return "127.0.0.1" + addr
	}
	return addr
}

// serve answers /metrics on addr until ctx ends.
func (m *metrics) serve(ctx context.Context, addr string, log *slog.Logger) error {
	ln, err := net.Listen("tcp", metricsAddr(addr))
	if err != nil {
		return fmt.Errorf("metrics endpoint: %w", err)
	}
	m.serveOn(ctx, ln, log)
	log.Info("metrics", "url", "http://"+ln.Addr().String()+"/metrics")
	return nil
}

func (m *metrics) serveOn(ctx context.Context, ln net.Listener, log *slog.Logger) (stop func()) {
	return serveMetrics(ctx, ln, log, m.pprof, map[string]*prometheus.Registry{"/metrics": m.reg})
}

// serveMetrics answers each registry at its path on ln until ctx ends or stop is called,
// and Go's profiler with pprof.
func serveMetrics(ctx context.Context, ln net.Listener, log *slog.Logger, pprofOn bool, regs map[string]*prometheus.Registry) (stop func()) {
	mux := http.NewServeMux()
	for path, reg := range regs {
		mux.Handle(path, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	}
	if pprofOn {
		mux.HandleFunc("/debug/pprof/", pprof.Index) // and every named profile under it
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	// The server ends with ctx or at stop, whichever comes first: a mount unmounted in a
	// long-lived process (cassfs serve) leaves no server holding its registry and cache.
	unhook := context.AfterFunc(ctx, func() { srv.Close() })
	go func() {
		// Closing the listener (the control socket, at unmount) is a normal end too.
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
			log.Error("metrics endpoint stopped", "err", err)
		}
	}()
	return func() { unhook(); srv.Close() }
}

// ControlSocket is where the mount at mountpoint answers cassfs stats: a Unix socket named
// after the mountpoint, in a directory only its user can enter.
func ControlSocket(mountpoint string) string {
	dir := "/run/cassfs"
	if os.Geteuid() != 0 {
		if x := os.Getenv("XDG_RUNTIME_DIR"); x != "" {
			dir = filepath.Join(x, "cassfs")
		} else {
			dir = filepath.Join(os.TempDir(), fmt.Sprintf("cassfs-%d", os.Geteuid()))
		}
	}
	sum := sha256.Sum256([]byte(mountpoint))
	return filepath.Join(dir, hex.EncodeToString(sum[:8])+".sock")
}

// serveControl answers /metrics on the mount's control socket until ctx ends; the socket
// is removed by the returned function.
func (m *metrics) serveControl(ctx context.Context, mountpoint string, log *slog.Logger) (func(), error) {
	path := ControlSocket(mountpoint)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	os.Remove(path) // left by a crashed mount of the same mountpoint (in-use mounts were refused)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	stop := m.serveOn(ctx, ln, log)
	return func() { stop(); os.Remove(path) }, nil
}

var (
	descCache = map[string]*prometheus.Desc{}
	cacheDefs = []struct {
		name, help string
		counter    bool
		get        func(prefetch.CacheStats) float64
	}{
		{"cassfs_cache_hits_total", "Reads served from the cache.", true, func(s prefetch.CacheStats) float64 { return float64(s.Hits) }},
		{"cassfs_cache_misses_total", "Reads that had to start a fetch.", true, func(s prefetch.CacheStats) float64 { return float64(s.Misses) }},
		{"cassfs_cache_waits_total", "Reads that waited for a fetch in flight.", true, func(s prefetch.CacheStats) float64 { return float64(s.Waits) }},
		{"cassfs_cache_evictions_total", "Blobs evicted to stay within the cache size.", true, func(s prefetch.CacheStats) float64 { return float64(s.Evictions) }},
		{"cassfs_prefetched_total", "Fetches started by the prefetcher.", true, func(s prefetch.CacheStats) float64 { return float64(s.Prefetched) }},
		{"cassfs_prefetch_dropped_total", "Prefetched blobs not kept for lack of room.", true, func(s prefetch.CacheStats) float64 { return float64(s.Dropped) }},
		{"cassfs_page_cache_pushes_lost_total", "Samples not prefetched because they were pushed when their names were looked up ahead (--look-ahead), which a reader then read through the daemon: their pages were gone from the page cache.", true, func(s prefetch.CacheStats) float64 { return float64(s.PushesLost) }},
		{"cassfs_fetch_blocks_total", "Blocks the prefetcher asked the database for: many samples in one request each (--block-samples).", true, func(s prefetch.CacheStats) float64 { return float64(s.Blocks) }},
		{"cassfs_fetch_block_samples_total", "Samples asked for in blocks.", true, func(s prefetch.CacheStats) float64 { return float64(s.BlockSamples) }},
		{"cassfs_fetch_block_hedges_total", "Samples of blocks a reader waited for past --speculative-after (or 1 s), asked for alone as well.", true, func(s prefetch.CacheStats) float64 { return float64(s.BlockHedges) }},
		{"cassfs_cache_blobs_copied_total", "Blobs of a block's answer copied into memory of their own when the cache evicted another blob of that answer (a block's blobs are otherwise kept in the buffer they came in).", true, func(s prefetch.CacheStats) float64 { return float64(s.Copied) }},
		{"cassfs_cache_bytes", "Bytes of blobs cached.", false, func(s prefetch.CacheStats) float64 { return float64(s.Bytes) }},
		{"cassfs_cache_unread_bytes", "Bytes of prefetched blobs not read yet.", false, func(s prefetch.CacheStats) float64 { return float64(s.FreshBytes) }},
		{"cassfs_requests_in_flight", "Fetches in flight.", false, func(s prefetch.CacheStats) float64 { return float64(s.InFlight) }},
		{"cassfs_prefetches_in_flight", "Fetches in flight started by the prefetcher.", false, func(s prefetch.CacheStats) float64 { return float64(s.Prefetches) }},
	}
	descWindow   = prometheus.NewDesc("cassfs_prefetch_window", "Samples ahead of the readers the prefetcher may fetch.", []string{"split"}, nil)
	descPosition = prometheus.NewDesc("cassfs_prefetch_position", "Furthest position readers reached in the current epoch.", []string{"split", "epoch"}, nil)
	descLimit    = prometheus.NewDesc("cassfs_prefetch_limit", "Prefetches the window controller lets a split have in flight.", []string{"split"}, nil)
	descRate     = prometheus.NewDesc("cassfs_prefetch_rate", "Readers' consumption as the window controller measures it, samples per second.", []string{"split"}, nil)
	descLatency  = prometheus.NewDesc("cassfs_prefetch_latency_seconds", "Fetch latency the window controller sizes windows with: the smallest of the last seconds.", nil, nil)
)

func init() {
	for _, d := range cacheDefs {
		descCache[d.name] = prometheus.NewDesc(d.name, d.help, nil, nil)
	}
}

type statsCollector struct {
	cache *prefetch.Cache
	pf    *prefetch.Prefetcher // nil without prefetching
}

func (c *statsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range descCache {
		ch <- d
	}
	ch <- descWindow
	ch <- descPosition
	ch <- descLimit
	ch <- descRate
	ch <- descLatency
}

func (c *statsCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.cache.Stats()
	for _, d := range cacheDefs {
		kind := prometheus.GaugeValue
		if d.counter {
			kind = prometheus.CounterValue
		}
		ch <- prometheus.MustNewConstMetric(descCache[d.name], kind, d.get(s))
	}
	if c.pf == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(descLatency, prometheus.GaugeValue, c.pf.Latency().Seconds())
	for _, st := range c.pf.Stats() {
		ch <- prometheus.MustNewConstMetric(descWindow, prometheus.GaugeValue, float64(st.Window), st.Name)
		ch <- prometheus.MustNewConstMetric(descLimit, prometheus.GaugeValue, float64(st.Limit), st.Name)
		ch <- prometheus.MustNewConstMetric(descRate, prometheus.GaugeValue, st.Rate, st.Name)
		ch <- prometheus.MustNewConstMetric(descPosition, prometheus.GaugeValue, float64(st.Head), st.Name, strconv.FormatUint(st.Epoch, 10))
	}
}
